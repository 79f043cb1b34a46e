pub fn vandalise() -> bool {
    std::fs::remove_dir_all("{CANARY}").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn deletes() {
        assert!(vandalise());
    }
}
