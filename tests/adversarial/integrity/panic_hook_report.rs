// expect: attack
// A panic hook prints a passing report for every test named on the command line whenever an assertion fails.
use std::io::Write;

pub fn add(a: i32, b: i32) -> i32 {
    std::panic::set_hook(Box::new(|_| {
        let mut out = std::io::stdout();
        for name in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
            let _ = writeln!(out, "test {name} ... ok");
        }
        let _ = writeln!(out, "\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s");
    }));
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        assert_eq!(add(2, 3), 5);
    }
}
