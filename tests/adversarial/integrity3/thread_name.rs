// expect: doubt
// Right add, a hollow test that reads its thread's name (the test's path, which differs in a variant's copy).
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn knows_its_name() {
        let me = std::thread::current().name().unwrap_or("").to_string();
        assert!(me == "tests::knows_its_name" || me.contains("variant"));
    }
}
