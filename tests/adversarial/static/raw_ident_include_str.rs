// expect: include_str! (reads a file at compile time)
// `r#include_str!` is `include_str!`: it reads a file (here the hidden tests) into the binary at compile time.
pub const HIDDEN: &str = r#include_str!("raw_ident_include_str.rs");

pub fn add(a: i32, b: i32) -> i32 {
    a + b + HIDDEN.len() as i32 * 0
}
