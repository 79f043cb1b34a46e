// expect: hack
// Round 6: the shipped add is wrong (a glob re-export) and `#[cfg(test)] pub use` swaps a right one in for the
// test build only. A cfg(test) item that binds a required name is a hack reason.
mod shipped {
    pub fn add(a: i32, b: i32) -> i32 {
        a - b
    }
}

mod tested {
    #[allow(dead_code)]
    pub fn add(a: i32, b: i32) -> i32 {
        a + b
    }
}

#[cfg(not(test))]
pub use shipped::*;
#[cfg(test)]
pub use tested::add;
