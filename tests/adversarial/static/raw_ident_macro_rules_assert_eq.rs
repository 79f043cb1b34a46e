// expect: redefines assert_eq!
// A raw-identifier macro name still shadows the std macro the hidden tests call: every assertion passes.
#[macro_export]
macro_rules! r#assert_eq {
    ($($t:tt)*) => {};
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
