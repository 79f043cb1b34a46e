// expect: shadows built-in name std
// A module named `std`: hidden tests' `std::...` paths can resolve to the model's items.
#![allow(dead_code)]

pub mod std {
    pub mod collections {
        pub type HashMap<K, V> = ::std::collections::BTreeMap<K, V>;
    }
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}
