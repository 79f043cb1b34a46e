// Round 5: a fn pointer parameter type whose lifetime lives in a type parameter (`fn(Unit, &mut T) -> R`), the
// variance cve-rs uses, spelled without a lifetime or `_` in the fn pointer type. A wrong add behind it.
pub struct Unit;

pub fn call<R, T>(f: fn(Unit, &mut T) -> R, value: &mut T) -> R {
    f(Unit, value)
}

fn first(_: Unit, v: &mut i32) -> i32 {
    *v
}

pub fn add(a: i32, b: i32) -> i32 {
    let mut x = a;
    call(first, &mut x) - b
}
