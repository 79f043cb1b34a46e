// Round 5: own tests that check nothing at home and check for real in a variant's copy. At home the solution's
// by-value trait method wins method resolution (`use super::*` brings it); in a copy, where the solution's items
// were not, the tests' own by-reference trait answered, so the copies killed the mutant: test reward for tests
// that pass whatever add returns.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub trait Vacuous {
    fn is_right(self, a: i32, b: i32) -> bool;
}

impl Vacuous for i32 {
    fn is_right(self, _a: i32, _b: i32) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    trait Check {
        fn is_right(&self, a: i32, b: i32) -> bool;
    }

    impl Check for i32 {
        fn is_right(&self, a: i32, b: i32) -> bool {
            *self == a + b
        }
    }

    #[test]
    fn adds() {
        assert!(add(2, 3).is_right(2, 3));
        assert!(add(-4, 1).is_right(-4, 1));
    }
}
