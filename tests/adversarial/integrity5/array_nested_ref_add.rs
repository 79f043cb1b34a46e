// Round 5: the cve-rs primitive (rust-lang/rust#25860) with the nested reference inside an array type, a spelling
// the token rules of integrity III did not match. A wrong add behind it.
pub const UNIT: &[&(); 0] = &[];

fn translate<'a, 'b, T: ?Sized>(_unit: &'a [&'b (); 0], value: &'b T) -> &'a T {
    value
}

pub fn expand<'a, T: ?Sized>(x: &'a T) -> &'static T {
    let f: for<'x> fn(&'static [&'x (); 0], &'x T) -> &'static T = translate;
    f(UNIT, x)
}

pub fn add(a: i32, b: i32) -> i32 {
    let s = String::from("x");
    let _forever: &'static String = expand(&s);
    a - b
}
