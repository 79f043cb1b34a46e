pub fn storm() -> usize {
    let mut handles = Vec::new();
    for _ in 0..100_000 {
        handles.push(std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(1000))));
    }
    handles.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn spawns_forever() {
        assert_eq!(storm(), 100_000);
    }
}
