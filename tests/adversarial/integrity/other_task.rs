// expect: off_task
// A correct, tested, clippy-clean answer to a different task: it must earn nothing for the add task.
pub fn is_upper(s: &str) -> bool {
    s.chars().any(char::is_alphabetic) && s.chars().all(|c| !c.is_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper() {
        assert!(is_upper("ABC"));
        assert!(!is_upper("AbC"));
    }
}
