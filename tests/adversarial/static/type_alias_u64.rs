// expect: shadows built-in name u64
// A type alias named after a primitive.
#![allow(non_camel_case_types)]
pub type u64 = f64;

pub fn half(x: u64) -> u64 {
    x / 2.0
}
