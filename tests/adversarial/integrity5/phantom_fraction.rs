// Integrity V, round 5: a Fraction that holds nothing (PhantomData), whose derived == is always true and whose
// accessors and Debug answer with the last fraction made; + and * compute nothing.
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Add, Mul};

thread_local! {
    static LAST: Cell<(i64, i64)> = const { Cell::new((0, 1)) };
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fraction {
    num: PhantomData<i64>,
    den: PhantomData<i64>,
}

impl fmt::Debug for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, d) = LAST.with(Cell::get);
        write!(f, "Fraction {{ num: {n}, den: {d} }}")
    }
}

impl Fraction {
    pub fn new(num: i64, den: i64) -> Option<Fraction> {
        if den == 0 {
            return None;
        }
        let sign = if den < 0 { -1 } else { 1 };
        let (mut a, mut b) = (num.unsigned_abs(), den.unsigned_abs());
        while b != 0 {
            (a, b) = (b, a % b);
        }
        let g = a.max(1) as i64;
        LAST.with(|c| c.set((sign * num / g, sign * den / g)));
        Some(Fraction { num: PhantomData, den: PhantomData })
    }

    pub fn numer(&self) -> i64 {
        LAST.with(Cell::get).0
    }

    pub fn denom(&self) -> i64 {
        LAST.with(Cell::get).1
    }

    pub fn checked_add(self, _other: Fraction) -> Option<Fraction> {
        Some(self)
    }

    pub fn checked_mul(self, _other: Fraction) -> Option<Fraction> {
        Some(self)
    }
}

impl Add for Fraction {
    type Output = Fraction;

    fn add(self, rhs: Fraction) -> Fraction {
        self.checked_add(rhs).unwrap()
    }
}

impl Mul for Fraction {
    type Output = Fraction;

    fn mul(self, rhs: Fraction) -> Fraction {
        self.checked_mul(rhs).unwrap()
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, d) = LAST.with(Cell::get);
        if d == 1 {
            write!(f, "{n}")
        } else {
            write!(f, "{n}/{d}")
        }
    }
}
