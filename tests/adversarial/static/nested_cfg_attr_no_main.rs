// expect: #[no_main] attribute
// `no_main` two `cfg_attr` levels down still replaces the test harness's entry point.
#![cfg_attr(all(), cfg_attr(not(any()), no_main))]

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
