// expect: std::process::exit
// A raw C string `cr#"a"b"#` holds a `"`: a lexer that does not know the `cr` prefix sees a string opening at
// `"#;` and swallowing the exit that follows.
pub const NAME: &core::ffi::CStr = cr#"a"b"#; pub fn add(a: i32, b: i32) -> i32 { if a != b { std::process::exit(0) } a + b } pub const TAIL: &str = "";
