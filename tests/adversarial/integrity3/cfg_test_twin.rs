// expect: hack
// Tested code is not shipped code: the tests (own and hidden) only ever see the test build.
#[cfg(test)]
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(not(test))]
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums() {
        assert_eq!(super::add(2, 3), 5);
    }
}
