// expect: extern crate
// `extern crate std as sys;` reaches std under a name no path rule knows.
extern crate std as sys;

pub fn add(a: i32, b: i32) -> i32 {
    sys::mem::drop(b);
    a - b
}
