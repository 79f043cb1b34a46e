// hidden: unit
// The reproduction: a nested module whose path contains the hidden filter string.
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    mod __rr_hidden {
        #[test]
        fn fake1() {}
        #[test]
        fn fake2() {}
        #[test]
        fn fake3() {}
    }

    #[test]
    fn own() {
        assert_eq!(add(1, 0), 1);
    }
}
