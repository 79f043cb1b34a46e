// expect: starver
// A right add beside big zero-initialised statics (in .bss: a small binary, a big mapping). Sized here for a test
// run under a 384 MiB address-space limit; with the default 2 GiB, four 512 MiB ones do the same. A test binary
// holding them cannot start; alone that only fails its own tests, in a shared binary it would fail every
// neighbour's.
use std::sync::Mutex;

static A: Mutex<[u8; 200 << 20]> = Mutex::new([0; 200 << 20]);
static B: Mutex<[u8; 200 << 20]> = Mutex::new([0; 200 << 20]);

pub fn add(a: i32, b: i32) -> i32 {
    let pad = A.lock().map(|m| m[0]).unwrap_or(0) + B.lock().map(|m| m[0]).unwrap_or(0);
    a + b + pad as i32
}
