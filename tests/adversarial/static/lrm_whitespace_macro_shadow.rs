// expect: redefines assert_eq!
// U+200E (LEFT-TO-RIGHT MARK) is whitespace to rustc: it must not split `macro_rules! assert_eq`.
macro_rules!‎ assert_eq {
    ($($t:tt)*) => {};
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
