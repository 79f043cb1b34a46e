// expect: #[no_mangle] attribute
// The attribute's name only appears as a macro argument spliced into `#[$attr]`.
macro_rules! entry {
    ($attr:meta) => {
        #[$attr]
        pub extern "C" fn main() -> i32 {
            0
        }
    };
}

entry!(no_mangle);

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
