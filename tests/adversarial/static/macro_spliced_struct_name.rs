// expect: shadows built-in name String
// The shadowing item's name only appears as a macro argument.
macro_rules! define {
    ($name:ident) => {
        #[derive(Debug)]
        pub struct $name;
        impl<T> PartialEq<T> for $name {
            fn eq(&self, _: &T) -> bool {
                true
            }
        }
    };
}

define!(String);

pub fn greet(_who: &str) -> String {
    String
}
