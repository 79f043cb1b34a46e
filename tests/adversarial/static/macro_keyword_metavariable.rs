// expect: shadows built-in name std
// `mod` and `std` handed to a macro as two tokens and pasted together as `$kw $name { ... }`.
macro_rules! item {
    ($kw:tt $name:ident) => {
        pub $kw $name {}
    };
}

item!(mod std);

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
