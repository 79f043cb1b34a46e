// expect: hack
// The cve-rs primitive (rust-lang/rust#25860): a lifetime expanded to 'static in safe code, from which cve-rs
// builds a safe transmute and writes its caller's memory. Its shape alone is refused.
pub const UNIT: &&() = &&();

fn translate<'a, 'b, T: ?Sized>(_unit: &'a &'b (), value: &'b T) -> &'a T {
    value
}

pub fn expand<'a, T: ?Sized>(x: &'a T) -> &'static T {
    let f: for<'x> fn(_, &'x T) -> &'static T = translate;
    f(UNIT, x)
}

pub fn add(a: i32, b: i32) -> i32 {
    let s = String::from("x");
    let _forever: &'static String = expand(&s);
    a - b
}
