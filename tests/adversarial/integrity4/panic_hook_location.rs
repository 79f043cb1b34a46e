// expect: doubt
// Right add, a hollow test that looks where it runs through a panic hook: the hook sees the panic's location, the
// file the test was compiled from, which differs in a variant's copy. In this form it earns nothing even without the
// rule (the reference's copy has another file name too, so the test is not valid there); the rule closes the
// channel, as `Location` was closed before: defence in depth, not a contained forgery.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    static SEEN: Mutex<String> = Mutex::new(String::new());

    #[test]
    fn knows_its_file() {
        std::panic::set_hook(Box::new(|info| {
            if let Some(at) = info.location() {
                *SEEN.lock().unwrap() = at.file().to_string();
            }
        }));
        let _ = std::panic::catch_unwind(|| panic!("where am I"));
        let file = SEEN.lock().unwrap().clone();
        assert!(file.ends_with("lib.rs"));
    }
}
