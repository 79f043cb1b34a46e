// expect: doubt
// Right add, hollow tests that count their runs in /tmp, in doubt where the own, reference and variant runs share
// one (no bwrap); with bwrap every test process gets an empty /tmp of its own, and the tests check nothing.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn third_run_fails() {
        let path = "/tmp/runs";
        let n = std::fs::read_to_string(path).map(|s| s.len()).unwrap_or(0);
        std::fs::write(path, "x".repeat(n + 1)).unwrap();
        assert!(n < 2 || super::add(1, 1) == 3);
    }
}
