// expect: shadows built-in name i32
// A struct named `i32` (seen by the hidden tests through `use super::*`) that equals everything:
// `assert_eq!(add(2, 2), 5)` passes.
#![allow(non_camel_case_types)]

#[derive(Debug, Clone, Copy)]
pub struct i32;

impl<T> PartialEq<T> for i32 {
    fn eq(&self, _: &T) -> bool {
        true
    }
}

pub fn add(_a: core::primitive::i32, _b: core::primitive::i32) -> i32 {
    i32
}
