pub fn spin() -> u64 {
    let mut x: u64 = 0;
    loop {
        x = x.wrapping_add(1);
        std::hint::black_box(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn never_ends() {
        assert_eq!(spin(), 1);
    }
}
