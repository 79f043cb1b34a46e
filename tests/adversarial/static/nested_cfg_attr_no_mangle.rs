// expect: #[no_mangle] attribute
// An unmangled `main` two `cfg_attr` levels down takes the harness's place at link time.
#[cfg_attr(all(), cfg_attr(all(), no_mangle))]
pub extern "C" fn main() -> i32 {
    0
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
