pub const FOREVER: u64 = {
    let mut i: u64 = 0;
    let mut acc: u64 = 0;
    while i < u64::MAX {
        acc = acc.wrapping_add(i ^ (acc >> 3));
        i += 1;
    }
    acc
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
