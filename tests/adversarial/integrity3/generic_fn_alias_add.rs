// expect: hack
// Integrity IV: the fn-pointer coercion of rust-lang/rust#25860 goes through a generic type alias whose lifetimes
// (or `_`) appear only where it is used (`P<_, &'b mut T, T>`), so no `fn(..)` type in the source names one. The
// shape alone is refused: a generic alias of a fn pointer type.
type P<A, R, T> = fn(A, &mut T) -> R;

fn bump(by: i32, v: &mut i32) -> i32 {
    *v += by;
    *v
}

pub fn add(a: i32, b: i32) -> i32 {
    let mut n = a;
    let f: P<i32, i32, i32> = bump;
    f(b, &mut n) - 2 * b
}
