// expect: hollow
// Right add, tests that spin on a wrong variant instead of failing: the copy times out, and the tests after it in
// the group are skipped. Neither is a kill.
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_spins_on_a_wrong_add() {
        if super::add(2, 2) != 4 {
            #[allow(clippy::empty_loop)]
            loop {}
        }
    }

    #[test]
    fn b_holds_for_anything() {
        let _ = super::add(0, 0);
    }
}
