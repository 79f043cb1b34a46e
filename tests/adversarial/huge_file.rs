use std::io::Write;

pub fn write_big(path: &str) -> std::io::Result<u64> {
    let mut f = std::fs::File::create(path)?;
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..5 * 1024 {
        f.write_all(&chunk)?;
    }
    Ok(5 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn five_gib_in_crate() {
        assert_eq!(write_big("big.bin").unwrap(), 5 << 30);
    }
    #[test]
    fn five_gib_in_tmp() {
        assert_eq!(write_big("/tmp/big.bin").unwrap(), 5 << 30);
    }
}
