// expect: #[no_mangle] attribute
// The edition-2024 spelling `unsafe(no_mangle)`, inside `cfg_attr`.
#[cfg_attr(any(test, not(test)), unsafe(no_mangle))]
pub extern "C" fn main() -> i32 {
    0
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
