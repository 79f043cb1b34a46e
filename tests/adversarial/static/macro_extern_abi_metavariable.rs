// expect: extern block
// The ABI string of the extern block comes from a macro argument.
macro_rules! foreign {
    ($abi:literal) => {
        extern $abi {
            fn _exit(code: i32) -> !;
        }
    };
}

foreign!("C");

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
