// expect: #[panic_handler] attribute
// Three levels of `cfg_attr`, and a `no_std` crate with its own panic handler.
#![cfg_attr(all(), cfg_attr(all(), cfg_attr(all(), no_std)))]

#[cfg_attr(all(), cfg_attr(all(), cfg_attr(all(), panic_handler)))]
fn on_panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
