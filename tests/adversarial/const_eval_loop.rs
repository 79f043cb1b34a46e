pub const FOREVER: u64 = {
    // Each step rewrites 128 KiB, so rustc's long-running-const-eval error comes after many seconds: the compile
    // time limit must stop this, whatever the machine's speed.
    let mut buf = [0u64; 16384];
    let mut i: u64 = 0;
    while i < u64::MAX {
        buf = [buf[(i % 16384) as usize].wrapping_add(i); 16384];
        i += 1;
    }
    buf[0]
};

pub fn value() -> u64 {
    FOREVER
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn evaluates() {
        assert!(value() > 0);
    }
}
