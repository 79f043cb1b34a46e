pub fn allocate() -> usize {
    let v = vec![7u8; 8 << 30];
    v.iter().map(|&b| b as usize).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn eight_gib() {
        assert_eq!(allocate(), 7 * (8 << 30));
    }
}
