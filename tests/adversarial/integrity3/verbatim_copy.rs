// expect: doubt
// Right add, a test that compares it with a copy of itself kept in the test module: it passes on any add at
// home and "kills" every variant that differs from the completion.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    fn add_again(x: i32, y: i32) -> i32 {
        x + y
    }

    #[test]
    fn agrees() {
        assert_eq!(super::add(4, 5), add_again(4, 5));
    }
}
