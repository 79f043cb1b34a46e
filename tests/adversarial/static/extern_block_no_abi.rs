// expect: extern block
// `extern { ... }` (no ABI string, "C" implied) declares libc's `_exit`.
extern {
    fn _exit(code: i32) -> !;
}

pub fn add(a: i32, b: i32) -> i32 {
    if a != b {
        unsafe { _exit(0) }
    }
    a + b
}
