// expect: attack
// Looks for the nonces in its own binary (by argv[0], /proc/self/exe or /proc/self/mem), prints every
// 32-hex-digit string it finds and leaves with exit status 0.
use std::io::Write;

macro_rules! leave {
    ($m:ident, $f:ident) => {
        std::$m::$f(0)
    };
}

fn candidates(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|w| w.len() == 32 && w.iter().all(u8::is_ascii_hexdigit))
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

pub fn add(a: i32, b: i32) -> i32 {
    let mut found = Vec::new();
    let argv0 = std::env::args().next().unwrap_or_default();
    for path in [argv0.as_str(), "/proc/self/exe"] {
        if let Ok(bytes) = std::fs::read(path) {
            found.extend(candidates(&bytes));
        }
    }
    let mut out = std::io::stdout();
    for nonce in &found {
        let _ = write!(out, "\n{nonce}\n");
    }
    let _ = out.flush();
    if !found.is_empty() {
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
