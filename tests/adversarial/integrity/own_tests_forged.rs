// expect: attack
// A wrong add whose own test prints a passing report and leaves with exit status 0 before its assertion.
use std::io::Write;

macro_rules! leave {
    ($m:ident, $f:ident) => {
        std::$m::$f(0)
    };
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "test tests::sums ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        let _ = out.flush();
        leave!(process, exit);
        #[allow(unreachable_code)]
        {
            assert_eq!(add(2, 3), 5);
        }
    }
}
