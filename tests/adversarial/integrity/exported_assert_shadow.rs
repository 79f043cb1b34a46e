// expect: attack
// An exported no-op `assert_eq!`, its name passed through a macro (the `$d` trick), reaching the hidden tests through
// their `use super::*` / `use solution::*` glob: the tests' explicit import of std's macros wins.
macro_rules! make {
    ($d:tt $name:ident) => {
        #[macro_export]
        macro_rules! $name {
            ($d($d t:tt)*) => {};
        }
    };
}
make!($ assert_eq);

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
