// expect: attack
// A wrong add with tests that pass whatever add does: ignored, should_panic around a failing assertion, an
// assertion in a closure never called, the solution compared with itself, a result compared with its type's bound.
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore]
    fn ignored() {
        assert_eq!(add(2, 3), 5);
    }

    #[test]
    #[should_panic]
    fn panics_anyway() {
        assert_eq!(add(2, 3), 6);
    }

    #[test]
    fn never_called() {
        let _check = || assert_eq!(add(2, 3), 5);
        fn nested() {
            assert_eq!(add(2, 3), 5);
        }
    }

    #[test]
    fn itself() {
        assert_eq!(add(2, 3), add(2, 3));
    }

    #[test]
    fn bound() {
        assert!(add(2, 3) <= i32::MAX);
    }
}
