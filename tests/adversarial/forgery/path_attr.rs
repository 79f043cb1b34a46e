// hidden: unit
// Pulls another file of the crate in as a module of its own.
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
#[path = "lib.rs"]
mod again;
