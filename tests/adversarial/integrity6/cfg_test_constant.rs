// expect: hack
// Round 6: a constant that is right only in the test build, read by the shipped add.
#[cfg(test)]
const SIGN: i32 = 1;
#[cfg(not(test))]
const SIGN: i32 = -1;

pub fn add(a: i32, b: i32) -> i32 {
    a + SIGN * b
}
