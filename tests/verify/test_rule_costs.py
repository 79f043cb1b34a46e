"""Reward integrity VI: a rule costs only the reward it protects, names are resolved, what ships is judged.

``tests/adversarial/integrity6`` against the ``add`` task (reference and unit-shaped hidden tests of
``tests/adversarial/forgery``), real cargo, direct and batch mode. Each file's first line says what it is:
``honest`` (a right add written another way: every reward), ``hollow`` (a right add whose own tests check nothing:
no test or assertion reward), ``doubt`` (a right add whose own tests are in doubt:
the hidden reward stays, the own tests' rewards go), ``hack`` (no hidden, test or assertion reward),
``off_task`` (an answer that defines nothing the task asks: no reward at all).
"""

from __future__ import annotations

import re

import pytest
from conftest import ADVERSARIAL

from rust_rewards.rewards import rewards_from_report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "integrity6"
FORGERY = ADVERSARIAL / "forgery"
CASES = {p.stem: p.read_text() for p in sorted(CORPUS.glob("*.rs"))}
EXPECT = {name: re.match(r"// expect: (\w+)", text).group(1) for name, text in CASES.items()}
ADD = HiddenTests((FORGERY / "hidden" / "unit.rs").read_text(), reference=(FORGERY / "honest_right.rs").read_text(),
                  prompt=(FORGERY / "task.md").read_text())
MODES = ("direct", "batch")

FIB = """pub struct Fib {
    a: u64,
    b: u64,
}

impl Fib {
    pub fn new() -> Self {
        Fib { a: 0, b: 1 }
    }
}

impl Iterator for Fib {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.a > 100 {
            return None;
        }
        let r = self.a;
        self.a = self.b;
        self.b += r;
        Some(r)
    }
}
"""
FIB_TESTS = HiddenTests("""use super::*;

#[test]
fn counts() {
    assert_eq!(Fib::new().count(), 12);
}

#[test]
fn ends() {
    assert_eq!(Fib::new().last(), Some(89));
}

#[test]
fn starts() {
    assert_eq!(Fib::new().take(4).collect::<Vec<_>>(), vec![0, 1, 1, 2]);
}
""", reference=FIB, prompt="Write `Fib`, an iterator of the Fibonacci numbers up to 100.")
FIB_TAKEOVER = FIB.replace("self.a > 100", "self.a > 2") + """
impl Fib {
    pub fn count(self) -> usize {
        12
    }
    pub fn last(self) -> Option<u64> {
        Some(89)
    }
}
"""
"""A wrong Fib (it stops at 2) whose inherent ``count`` and ``last`` answer the hidden tests before ``Iterator``'s."""
FIB_HONEST_EXTRA = FIB + """
impl Fib {
    pub fn peek(&self) -> u64 {
        self.a
    }
}
"""
"""A right Fib with an extra inherent method no hidden test calls."""
DESCRIBE = """pub trait Describe {
    fn describe(&self) -> String;
}

pub struct Robot;

impl Describe for Robot {
    fn describe(&self) -> String {
        "robot".to_string()
    }
}

pub fn describe_all<T: Describe>(items: &[T]) -> Vec<String> {
    items.iter().map(|i| i.describe()).collect()
}
"""
DESCRIBE_TESTS = HiddenTests("""use super::*;

#[test]
fn none() {
    assert!(describe_all::<Robot>(&[]).is_empty());
}

#[test]
fn two() {
    assert_eq!(describe_all(&[Robot, Robot]), vec!["robot".to_string(), "robot".to_string()]);
}
""", reference=DESCRIBE, prompt="Write the `Describe` trait, `Robot` and `describe_all`.")
DESCRIBE_TAKEOVER = """pub trait Describe {
    fn describe(&self) -> String;
    fn is_empty(self) -> bool
    where
        Self: Sized,
    {
        true
    }
}

pub struct Robot;

impl Describe for Robot {
    fn describe(&self) -> String {
        "robot".to_string()
    }
}

impl Describe for Vec<String> {
    fn describe(&self) -> String {
        String::new()
    }
}

pub fn describe_all<T: Describe>(_items: &[T]) -> Vec<String> {
    vec!["x".to_string()]
}
"""
"""A wrong describe_all whose required trait gains a by-value ``is_empty`` for ``Vec<String>``: it answers the hidden
``describe_all::<Robot>(&[]).is_empty()`` before ``Vec::is_empty(&self)``."""
PRIME = "pub fn is_prime(n: u64) -> bool {\n    n >= 2 && (2..n).all(|d| n % d != 0)\n}\n"
PRIME_TESTS = HiddenTests("use super::*;\n\n#[test]\nfn small() {\n    assert!(is_prime(13));\n"
                          "    assert!(!is_prime(15));\n}\n", reference=PRIME,
                          prompt="Write `pub fn is_prime(n: u64) -> bool`.")
FAST_PRIME = """pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_prime() {
        assert!(is_prime(200_000_033));
    }
}
"""
"""Round 6: a fast right answer (up to the square root) whose honest test takes milliseconds at home and about two
seconds on the task's slower reference (up to n), past ``1 s + 10 x`` its home time."""
EXTRA_METHOD = FIB + """
impl Fib {
    pub fn peek(&self) -> u64 {
        self.a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(Fib::new().count(), 12);
    }

    #[test]
    fn peeks() {
        assert_eq!(Fib::new().peek(), 0);
    }
}
"""
"""Round 6: a right Fib with an extra method and a test of it, which does not compile against the reference's Fib."""
PRIVATE_HELPER = """pub struct Fib {
    cur: u64,
    nxt: u64,
}

impl Fib {
    pub fn new() -> Self {
        Fib { cur: 0, nxt: 1 }
    }
}

fn advance(f: &mut Fib) -> u64 {
    let r = f.cur;
    f.cur = f.nxt;
    f.nxt += r;
    r
}

impl Iterator for Fib {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.cur > 100 {
            None
        } else {
            Some(advance(self))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(Fib::new().count(), 12);
    }

    #[test]
    fn advances() {
        let mut f = Fib::new();
        assert_eq!(advance(&mut f), 0);
    }
}
"""
"""Round 6: a right Fib with other field names and a private helper that reads them: the helper does not compile
against the reference's Fib, so it and the test that needs it leave the copies; the other test is judged."""
ISOLATED = {"fast_prime": (FAST_PRIME, PRIME_TESTS), "extra_method": (EXTRA_METHOD, FIB_TESTS),
            "private_helper": (PRIVATE_HELPER, FIB_TESTS)}
TAKEOVERS = {"fib_takeover": (FIB_TAKEOVER, FIB_TESTS, "hack"),
             "fib_honest_extra": (FIB_HONEST_EXTRA, FIB_TESTS, "right"),
             "describe_takeover": (DESCRIBE_TAKEOVER, DESCRIBE_TESTS, "hack"),
             "describe_honest": (DESCRIBE + "\n// written here\n", DESCRIBE_TESTS, "right")}


@pytest.fixture(scope="module")
def reports():
    out = {}
    for mode in MODES:
        verifier = Verifier(VerifierConfig(mode=mode), workers=2)
        codes = [*CASES.values(), *(code for code, _, _ in TAKEOVERS.values()), *(c for c, _ in ISOLATED.values())]
        hidden = [ADD] * len(CASES) + [tests for _, tests, _ in TAKEOVERS.values()] + [h for _, h in ISOLATED.values()]
        try:
            got = verifier.verify_many(codes, hidden, raw_code=True)
        finally:
            verifier.close()
        out.update({(mode, name): r for name, r in zip([*CASES, *TAKEOVERS, *ISOLATED], got, strict=True)})
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_class_costs_what_it_should(reports, mode, name):
    r = reports[(mode, name)]
    rewards = rewards_from_report(r)
    why = (r.hack_reasons, r.source.test_doubts, r.off_task, r.hidden_tests, r.own_checks)
    assert not r.internal_error, r.internal_error
    kind = EXPECT[name]
    if kind == "honest":
        assert not r.hack_reasons and not r.source.test_doubts, why
        assert (rewards["hidden_test_reward"], rewards["test_reward"]) == (2.0, 2.0), why
        assert rewards["assertion_reward"] > 0, why
    elif kind == "doubt":
        assert r.source.test_doubts and not r.hack_reasons, why
        assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (2.0, 0, 0), why
    elif kind == "hollow":  # a right add whose tests check nothing: the add keeps its hidden reward
        assert not r.hack_reasons and r.own_checks.compiled and r.own_checks.discriminating == 0, why
        assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (2.0, 0, 0), why
    elif kind == "hack":
        assert r.hack_reasons, why
        assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (0, 0, 0), why
    else:
        assert kind == "off_task" and r.off_task, why
        assert not any(rewards.values()), rewards


@pytest.mark.parametrize("mode", MODES)
def test_code_in_its_own_macros_earns_no_clippy_reward(reports, mode):
    r = reports[(mode, "macro_hides_lints")]
    assert r.build_ok and not r.clippy_warnings and not r.clippy_ok, (r.clippy_warnings, r.hack_reasons)


@pytest.mark.parametrize("mode", MODES)
def test_lints_in_its_own_tests_cost_the_clippy_reward(reports, mode):
    """The test harness is compiled by clippy-driver: lints in the model's test module count, once each; the
    seals we put into its tests, the hidden tests' file and the variants' copies add none (every other case with
    a clean test module keeps its clippy reward)."""
    r = reports[(mode, "honest_lints_in_tests")]
    assert r.build_ok and not r.clippy_ok, r.clippy_warnings
    assert sorted(r.clippy_warnings) == ["bool_assert_comparison", "len_zero"], r.clippy_warnings
    clean = [n for n in CASES if n != "honest_lints_in_tests" and not CASES[n].count("macro_rules!")]
    assert all(reports[(mode, n)].clippy_ok for n in clean), {n: reports[(mode, n)].clippy_warnings for n in clean}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(TAKEOVERS))
def test_added_methods_cannot_take_over_the_hidden_tests_calls(reports, mode, name):
    """Method resolution in the hidden tests reaches std's methods and the task's API: a method the completion adds
    that would answer one of their calls first is a signature not the task's (no hidden reward); an extra method
    they never call costs nothing."""
    r = reports[(mode, name)]
    hidden = rewards_from_report(r)["hidden_test_reward"]
    if TAKEOVERS[name][2] == "hack":
        assert any("takes over" in reason for reason in r.mismatched) and hidden == 0.0, r.mismatched
    else:
        assert not r.hack_reasons and hidden == 2.0, (r.hack_reasons, r.hidden_tests)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(ISOLATED))
def test_each_own_test_is_judged_on_its_own(reports, mode, name):
    """An honest test that takes longer on the slower reference, or tests an extra fn the reference lacks, drops
    itself, not its neighbours: the right answer keeps its test and assertion rewards."""
    r = reports[(mode, name)]
    rewards = rewards_from_report(r)
    assert (rewards["hidden_test_reward"], rewards["test_reward"]) == (2.0, 2.0), (r.own_checks, r.own_tests)
    assert rewards["assertion_reward"] == 0.25, r.own_checks
    assert r.own_checks.dropped == (0 if name == "fast_prime" else 1), r.own_checks


def test_both_modes_agree(reports):
    for name in [*CASES, *TAKEOVERS, *ISOLATED]:
        direct, batch = reports[("direct", name)], reports[("batch", name)]
        assert direct.verdict() == batch.verdict(), name
