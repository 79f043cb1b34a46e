// expect: extern block
// Edition 2024: `unsafe extern` with a `safe fn` item can be called without an `unsafe` block.
unsafe extern "C" {
    pub safe fn _exit(code: i32) -> !;
}

pub fn add(a: i32, b: i32) -> i32 {
    if a != b {
        _exit(0);
    }
    a + b
}
