use std::io::Write;

pub fn flood() -> usize {
    let line = [b'x'; 1024];
    let mut out = std::io::stdout().lock();
    for _ in 0..100 * 1024 {
        if out.write_all(&line).is_err() {
            return 0;
        }
    }
    100 * 1024 * 1024
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn hundred_megabytes() {
        assert_eq!(flood(), 100 * 1024 * 1024);
    }
}
