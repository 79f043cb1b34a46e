// expect: shadows built-in name Some
// A function named `Some` takes the prelude constructor's place in the hidden tests' expressions.
#![allow(non_snake_case)]

#[derive(Debug)]
pub struct Anything;

impl<T> PartialEq<T> for Anything {
    fn eq(&self, _: &T) -> bool {
        true
    }
}

pub fn Some<T>(_: T) -> Anything {
    Anything
}

pub fn find(_v: &[i64], _x: i64) -> Anything {
    Anything
}
