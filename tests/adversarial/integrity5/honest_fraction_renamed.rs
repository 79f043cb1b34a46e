// Integrity V: rr-046's reference with its private fields renamed (numerator, denominator), declared in the
// other order, and a hand-written Debug in another format: a correct answer; it keeps the full hidden reward.
use std::fmt;
use std::ops::{Add, Mul};

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fraction {
    denominator: i64,
    numerator: i64,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Fraction {
    fn from_i128(num: i128, den: i128) -> Option<Fraction> {
        if den == 0 {
            return None;
        }
        let g = gcd(num.unsigned_abs(), den.unsigned_abs()) as i128;
        let (mut n, mut d) = (num / g, den / g);
        if d < 0 {
            n = -n;
            d = -d;
        }
        Some(Fraction {
            numerator: i64::try_from(n).ok()?,
            denominator: i64::try_from(d).ok()?,
        })
    }

    pub fn new(num: i64, den: i64) -> Option<Fraction> {
        Self::from_i128(i128::from(num), i128::from(den))
    }

    pub fn numer(&self) -> i64 {
        self.numerator
    }

    pub fn denom(&self) -> i64 {
        self.denominator
    }

    pub fn checked_add(self, other: Fraction) -> Option<Fraction> {
        let (a, b) = (i128::from(self.numerator), i128::from(self.denominator));
        let (c, d) = (i128::from(other.numerator), i128::from(other.denominator));
        Self::from_i128(a * d + c * b, b * d)
    }

    pub fn checked_mul(self, other: Fraction) -> Option<Fraction> {
        let (a, b) = (i128::from(self.numerator), i128::from(self.denominator));
        let (c, d) = (i128::from(other.numerator), i128::from(other.denominator));
        Self::from_i128(a * c, b * d)
    }
}

impl Add for Fraction {
    type Output = Fraction;

    fn add(self, rhs: Fraction) -> Fraction {
        self.checked_add(rhs).expect("fraction overflow")
    }
}

impl Mul for Fraction {
    type Output = Fraction;

    fn mul(self, rhs: Fraction) -> Fraction {
        self.checked_mul(rhs).expect("fraction overflow")
    }
}

impl fmt::Display for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.denominator == 1 {
            write!(f, "{}", self.numerator)
        } else {
            write!(f, "{}/{}", self.numerator, self.denominator)
        }
    }
}

impl fmt::Debug for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}over{}", self.numerator, self.denominator)
    }
}
