// expect: include_str! (reads a file at compile time)
// `include_str` imported under another name, then invoked as `inc!`.
use std::include_str as inc;

pub const HIDDEN: &str = inc!("use_alias_include_str.rs");

pub fn add(a: i32, b: i32) -> i32 {
    a + b + HIDDEN.len() as i32 * 0
}
