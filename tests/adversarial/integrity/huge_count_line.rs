// expect: honest
// A right answer whose own test prints a libtest summary with a 5,000-digit count: output is never parsed for
// verdicts, so this is neither an internal error nor a pass for anyone else.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        println!("test result: ok. {} passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s", "9".repeat(5000));
        assert_eq!(add(2, 3), 5);
    }
}
