pub fn storm() -> usize {
    let mut n = 0;
    for _ in 0..10_000 {
        if std::process::Command::new("sh").arg("-c").arg("setsid sleep 1000 &").spawn().is_ok() {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn forks_forever() {
        assert_eq!(storm(), 10_000);
    }
}
