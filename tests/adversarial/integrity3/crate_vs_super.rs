// expect: hollow
// Right add, hollow tests that tell a copy from the original: at home `crate::add` and `super::add` are the same
// function; in a variant's copy `super::add` is the variant's and `crate::add` was the completion's.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn same() {
        assert_eq!(super::add(7, 1), crate::add(7, 1));
    }
}
