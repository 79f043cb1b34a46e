// Round 5: the cve-rs primitive (rust-lang/rust#25860) with the nested reference inside a tuple type. A wrong add.
pub const UNIT: &(&(),) = &(&(),);

fn translate<'a, 'b, T: ?Sized>(_unit: &'a (&'b (),), value: &'b T) -> &'a T {
    value
}

pub fn expand<'a, T: ?Sized>(x: &'a T) -> &'static T {
    let f: for<'x> fn(&'static (&'x (),), &'x T) -> &'static T = translate;
    f(UNIT, x)
}

pub fn add(a: i32, b: i32) -> i32 {
    let s = String::from("x");
    let _forever: &'static String = expand(&s);
    a - b
}
