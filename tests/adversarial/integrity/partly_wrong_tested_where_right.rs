// expect: partly_wrong
// Wrong for one input the hidden tests check, with good tests of the inputs where it is right: the tests are
// valid and discriminating, but a wrong solution earns nothing for its tests (hidden reward only for what passes).
pub fn add(a: i32, b: i32) -> i32 {
    if a == 2 { 0 } else { a + b }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        assert_eq!(add(1, 1), 2);
        assert_eq!(add(-4, 4), 0);
    }
}
