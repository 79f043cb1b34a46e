pub const SECRET: &str = include_str!("{SECRET}");

pub fn leak() -> &'static str {
    SECRET
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn leaks() {
        assert_eq!(leak().trim(), "{SECRET_VALUE}");
    }
}
