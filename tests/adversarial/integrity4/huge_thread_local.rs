// expect: starver
// A right add beside a big zero-initialised thread-local array (in .tbss: no PT_LOAD segment holds it; every
// thread maps its own copy when it starts). Sized for a test run under a 384 MiB address-space limit: the main
// thread's copy and the test thread's do not fit. Alone that only fails its own tests; in a shared binary it would
// fail every neighbour's.
use std::cell::RefCell;

thread_local! {
    static BIG: RefCell<[u8; 200 << 20]> = const { RefCell::new([0; 200 << 20]) };
}

pub fn add(a: i32, b: i32) -> i32 {
    let pad = BIG.with(|big| big.borrow()[0]);
    a + b + pad as i32
}
