// expect: attack
// A wrong add whose own tests check the wrong behaviour: they pass on it and fail on the reference.
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences() {
        assert_eq!(add(5, 3), 2);
        assert_eq!(add(2, 3), -1);
    }
}
