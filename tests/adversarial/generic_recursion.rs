pub fn blow<T: Default + std::fmt::Debug>(n: u32) -> usize {
    if n == 0 {
        format!("{:?}", T::default()).len()
    } else {
        blow::<(T, T)>(n - 1)
    }
}

pub fn start() -> usize {
    blow::<u8>(64)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn runs() {
        assert!(start() > 0);
    }
}
