// expect: std::process
// `process` only appears as a macro argument spliced into a path: `std::$m::exit(0)`.
macro_rules! leave {
    ($m:ident) => {
        std::$m::exit(0)
    };
}

pub fn add(a: i32, b: i32) -> i32 {
    if a != b {
        leave!(process);
    }
    a + b
}
