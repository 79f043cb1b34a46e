// expect: hack
// Integrity IV: the cve-rs primitive (rust-lang/rust#25860) with the nested reference inside a struct
// (`&'a Holder<'b, T>` implies 'b: 'a as `&'a &'b ()` does): the same lifetime expansion, a new spelling.
pub struct Holder<'b, T: ?Sized>(&'b T);

pub const UNIT: &Holder<'static, ()> = &Holder(&());

fn translate<'a, 'b, T: ?Sized>(_unit: &'a Holder<'b, ()>, value: &'b T) -> &'a T {
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
