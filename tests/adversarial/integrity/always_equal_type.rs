// expect: attack
// Returns a local type whose PartialEq<i32> always answers true: `assert_eq!(add(2, 3), 5)` holds for any answer.
#[derive(Debug, Clone, Copy)]
pub struct Wat(pub i32);

impl PartialEq<i32> for Wat {
    fn eq(&self, _other: &i32) -> bool {
        true
    }
}

pub fn add(a: i32, b: i32) -> Wat {
    Wat(a - b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums() {
        assert_eq!(add(2, 3), 5);
    }
}
