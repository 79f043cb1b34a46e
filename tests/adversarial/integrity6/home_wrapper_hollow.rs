// expect: hollow
// Round 6: a right add and a test that compares it with a wrapper of itself. At home it checks nothing; in a copy the
// wrapper used to stay the completion's (imported from home) and "killed" the mutant. Helpers are now compiled in
// the copy, so the wrapper calls the variant's add there as it calls the completion's at home.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn home_add(a: i32, b: i32) -> i32 {
    add(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_home() {
        assert_eq!(add(2, 3), home_add(2, 3));
    }
}
