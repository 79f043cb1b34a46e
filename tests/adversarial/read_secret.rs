pub fn secret() -> String {
    std::fs::read_to_string("{SECRET}").unwrap_or_default()
}

pub fn shadow() -> String {
    std::fs::read_to_string("/etc/shadow").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn reads_secret() {
        assert_eq!(secret().trim(), "{SECRET_VALUE}");
    }
    #[test]
    fn reads_shadow() {
        assert!(shadow().contains("root:"));
    }
}
