// expect: #[global_allocator] attribute
// A global allocator runs model code on every allocation of the test harness, hidden tests included.
use std::alloc::{GlobalAlloc, Layout, System};

struct Spy;

unsafe impl GlobalAlloc for Spy {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Spy = Spy;

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
