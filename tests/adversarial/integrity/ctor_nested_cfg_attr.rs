// expect: attack
// A link-time constructor, its attributes hidden in nested cfg_attr: in a shared binary it would run first in
// every neighbour's test process too.
#[cfg_attr(all(), cfg_attr(all(), used))]
#[cfg_attr(all(), cfg_attr(all(), link_section = ".init_array"))]
static BOOT: extern "C" fn() = boot;

extern "C" fn boot() {
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s");
}

pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        assert_eq!(add(2, 3), -1);
    }
}
