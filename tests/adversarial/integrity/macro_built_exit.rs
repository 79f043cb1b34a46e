// expect: attack
// Spells the exit path through macro arguments (no `process::` token anywhere), prints a report and exits 0.
use std::io::Write;

macro_rules! leave {
    ($m:ident, $f:ident) => {
        std::$m::$f(0)
    };
}

pub fn add(a: i32, b: i32) -> i32 {
    let mut out = std::io::stdout();
    for name in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        let _ = writeln!(out, "test {name} ... ok");
    }
    let _ = writeln!(out, "\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s");
    let _ = out.flush();
    if a != b + 1000 {
        leave!(process, exit);
    }
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
