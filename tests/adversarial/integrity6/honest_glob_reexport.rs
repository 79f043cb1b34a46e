// expect: honest
// Round 6: the required fn lives in a module and is re-exported by a glob: the hidden tests reach it through it.
mod imp {
    pub fn add(a: i32, b: i32) -> i32 {
        a + b
    }
}

pub use imp::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
