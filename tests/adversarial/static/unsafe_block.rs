// expect: unsafe code
// Any `unsafe` at all: honest std-only solutions need none, and hidden tests run with `-F unsafe_code`.
pub fn first(v: &[i32]) -> i32 {
    unsafe { *v.as_ptr() }
}
