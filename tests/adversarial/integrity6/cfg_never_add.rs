// expect: off_task
// Round 6: the required fn is never compiled (`cfg(any())` is false): an answer that defines nothing earns nothing.
#[cfg(any())]
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn unrelated() -> i32 {
    1
}

#[cfg(test)]
mod tests {
    #[test]
    fn one() {
        assert_eq!(super::unrelated(), 1);
    }
}
