// expect: #[link_section] attribute
// A constructor in `.init_array`, hidden in nested `cfg_attr`s: it runs before the test harness's main.
#[cfg_attr(all(), cfg_attr(all(), used), cfg_attr(any(test, not(test)), link_section = ".init_array"))]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    println!("test hidden::passes ... ok");
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
