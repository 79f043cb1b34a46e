"""Reward integrity III: one case per class of the third review, real cargo, direct and batch mode.

``tests/adversarial/integrity3`` against the ``add`` task (reference and unit-shaped hidden tests of
``tests/adversarial/forgery``): soundness-hole shapes, tested code that is not shipped code, own tests that can tell
a copy from the original. A second task (a word count into a ``BTreeMap``) holds the names hidden tests borrow from
the solution through ``use super::*``. Every attack earns no hidden, test or assertion reward; honest answers keep
theirs; batch mode gives each completion the verdict it gets alone.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from conftest import ADVERSARIAL

from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.soundness import FAMILIES
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.sandbox import RUN_LIMITS, detect_isolation
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "integrity3"
FORGERY = ADVERSARIAL / "forgery"
HONEST = (ADVERSARIAL / "integrity" / "honest_tested.rs").read_text()
CASES = {p.stem: p.read_text() for p in sorted(CORPUS.glob("*.rs")) if p.stem != "huge_statics"} | {
    "honest_tested": HONEST}
EXPECT = {name: re.match(r"// expect: (\w+)", text).group(1) for name, text in CASES.items()}
ADD = HiddenTests((FORGERY / "hidden" / "unit.rs").read_text(), reference=(FORGERY / "honest_right.rs").read_text(),
                  prompt=(FORGERY / "task.md").read_text())

COUNT_REFERENCE = """use std::collections::BTreeMap;

pub fn count(words: &[&str]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for w in words {
        *m.entry(w.to_string()).or_insert(0) += 1;
    }
    m
}
"""
COUNT_TESTS = """use super::*;

#[test]
fn counts() {
    let mut want = BTreeMap::new();
    want.insert("a".to_string(), 2);
    assert_eq!(count(&["a", "a"]), want);
}

#[test]
fn not_empty() {
    assert!(!count(&["a"]).is_empty());
}
"""
COUNT = HiddenTests(COUNT_TESTS, reference=COUNT_REFERENCE, prompt="Count the words into a BTreeMap.")
ALIASED_MAP = """pub struct Any<K, V>(std::marker::PhantomData<(K, V)>);
impl<K, V> Any<K, V> {
    pub fn new() -> Self { Any(std::marker::PhantomData) }
    pub fn insert(&mut self, _k: K, _v: V) {}
    pub fn is_empty(&self) -> bool { false }
}
impl<K, V> Default for Any<K, V> { fn default() -> Self { Self::new() } }
impl<K, V> PartialEq for Any<K, V> { fn eq(&self, _: &Self) -> bool { true } }
impl<K, V> std::fmt::Debug for Any<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { write!(f, "x") }
}
pub use self::Any as BTreeMap;
pub fn count(_words: &[&str]) -> BTreeMap<String, usize> { BTreeMap::new() }
"""
"""The hidden tests' ``BTreeMap`` (never imported by them) becomes a map whose ``==`` is always true."""
SHADOWING_TRAIT = """use std::collections::BTreeMap;
pub fn count(_words: &[&str]) -> BTreeMap<String, usize> { BTreeMap::new() }
pub trait Full { fn is_empty(self) -> bool; }
impl<K, V> Full for BTreeMap<K, V> { fn is_empty(self) -> bool { false } }
"""
"""A wrong count whose own trait's by-value ``is_empty`` wins method resolution in the hidden tests."""
COUNT_CASES = {"aliased_map": ALIASED_MAP, "shadowing_trait": SHADOWING_TRAIT, "count_honest": COUNT_REFERENCE}


@pytest.fixture(scope="module")
def reports():
    out = {}
    codes = list(CASES.values()) + list(COUNT_CASES.values())
    hidden = [ADD] * len(CASES) + [COUNT] * len(COUNT_CASES)
    for mode in ("direct", "batch"):
        verifier = Verifier(VerifierConfig(mode=mode), workers=2)
        got = verifier.verify_many(codes, hidden, raw_code=True)
        out.update({(mode, name): r for name, r in zip([*CASES, *COUNT_CASES], got, strict=True)})
        verifier.close()
    return out


MODES = ("direct", "batch")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(n for n, e in EXPECT.items() if e != "honest"))
def test_attacks_earn_no_test_reward(reports, mode, name):
    r = reports[(mode, name)]
    rewards = rewards_from_report(r)
    assert not r.internal_error, r.internal_error
    assert (rewards["test_reward"], rewards["assertion_reward"]) == (0.0, 0.0), (r.own_checks, r.hack_reasons)
    expect = EXPECT[name]
    if name == "tmp_counter" and detect_isolation().bwrap:
        expect = "hollow"  # a fresh /tmp for every test process: files are no channel between runs, no doubt
    if expect == "hack":
        assert r.hack_reasons and rewards["hidden_test_reward"] == 0.0
    elif expect == "doubt":  # a right add whose own tests are in doubt: only the own tests' rewards go
        assert r.source.test_doubts and not r.hack_reasons and rewards["hidden_test_reward"] == 2.0, r.hack_reasons
    else:  # hollow tests of a right add: the add keeps its hidden reward, the tests earn nothing
        assert rewards["hidden_test_reward"] == 2.0 and not r.hack_reasons
        assert r.own_checks.compiled and r.own_checks.discriminating == 0, r.own_checks


def test_each_soundness_family_names_its_issue():
    assert all("rust-lang/rust#" in family for family in FAMILIES)


@pytest.mark.parametrize("mode", MODES)
def test_cve_rs_shape_is_refused(reports, mode):
    assert any("#25860" in reason for reason in reports[(mode, "cve_rs_add")].hack_reasons)


@pytest.mark.parametrize("mode", MODES)
def test_a_spinning_copy_costs_a_short_limit_not_the_wall_clock(reports, mode):
    """The copy that spins on the wrong variant is stopped after 1 s + 10 x its time at home, not 10 s."""
    r = reports[(mode, "spin_in_variant")]
    spun = [phase for phase in r.timed_out if phase.startswith("variant")]
    assert spun and all(r.durations[phase] < 5.0 for phase in spun), (r.timed_out, r.durations)


@pytest.mark.parametrize("mode", MODES)
def test_the_honest_answer_keeps_full_marks(reports, mode):
    rewards = rewards_from_report(reports[(mode, "honest_tested")])
    assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (2.0, 2.0, 0.25)
    assert rewards_from_report(reports[(mode, "count_honest")])["hidden_test_reward"] == 2.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["aliased_map", "shadowing_trait"])
def test_hidden_tests_borrow_no_name_from_the_solution(reports, mode, name):
    r = reports[(mode, name)]
    assert r.hidden_tests is not None and r.hidden_tests.passed == 0, r.hidden_tests
    assert rewards_from_report(r)["hidden_test_reward"] == 0.0


def test_batch_gives_each_completion_its_verdict_alone(reports):
    for name in [*CASES, *COUNT_CASES]:
        direct, batch = reports[("direct", name)], reports[("batch", name)]
        assert (direct.build_ok, direct.hidden_tests, direct.own_tests, direct.own_checks, direct.hack_reasons) == (
            batch.build_ok, batch.hidden_tests, batch.own_tests, batch.own_checks, batch.hack_reasons), name


def assert_cannot_starve_its_neighbours(starver: str) -> None:
    """``starver`` (an ``add`` sized for a 384 MiB address space) in batch mode beside two honest adds under that
    limit: it fails its own hidden tests, the share is verified one by one, the neighbours keep theirs."""
    config = VerifierConfig(mode="batch", run_limits=replace(RUN_LIMITS, memory_mb=384))
    verifier = Verifier(config, workers=1)
    try:
        got = verifier.verify_many([starver, HONEST, "pub fn add(a: i32, b: i32) -> i32 {\n    b + a\n}\n"],
                                   [ADD] * 3, raw_code=True)
        reasons = dict(verifier.fallback_reasons)
    finally:
        verifier.close()
    assert [r.hidden_tests.passed for r in got] == [0, 3, 3]
    assert reasons.get("shared test binary too large") == 3, reasons


@pytest.mark.slow
def test_a_member_with_huge_statics_cannot_starve_its_neighbours():
    """Its statics would eat the address space of a shared test binary: the share is verified one by one."""
    assert_cannot_starve_its_neighbours((CORPUS / "huge_statics.rs").read_text())


LARGEST = """pub fn largest(v: &[i32]) -> i32 {
    let mut m = v[0];
    for &x in v {
        if x > m {
            m = x;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_largest() {
        assert_eq!(largest(&[1, 5, 3]), 5);
    }
}
"""
"""Honest tests whose two token mutants are equivalent on them (``>`` to ``>=``; ``v[0]`` to ``v[1]`` on this
input): only a mutant of the whole body shows that they can fail."""
PANICS_WRONG = """pub fn divide(a: i32, b: i32) -> i32 {
    if b == 0 {
        panic!("division by zero");
    }
    a * b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic]
    fn by_zero_panics() {
        divide(1, 0);
    }
}
"""
"""A wrong divide whose only test expects a panic: its mutants stop panicking, which says nothing about it."""


def test_without_a_reference_honest_tests_beat_equivalent_mutants_and_should_panic_alone_earns_nothing():
    verifier = Verifier(VerifierConfig(), workers=2)
    try:
        largest, panics = verifier.verify_many([LARGEST, PANICS_WRONG], [None, None], raw_code=True)
    finally:
        verifier.close()
    assert largest.own_checks.discriminating == 1 and rewards_from_report(largest)["test_reward"] == 2.0
    assert panics.own_checks.valid == 1 and panics.own_checks.discriminating == 0
    assert rewards_from_report(panics)["test_reward"] == 0.0


NOTE_IN_TMP = """pub fn note() { let _ = std::fs::write("/tmp/note", "x"); }
pub fn seen() -> bool { std::path::Path::new("/tmp/note").exists() }

#[cfg(test)]
mod tests {
    #[test]
    fn a_writes() { super::note(); assert!(super::seen()); }

    #[test]
    fn b_reads() { assert!(!super::seen()); }
}
"""


def test_every_test_process_starts_with_an_empty_tmp():
    """No test leaves a note for the next (the reference's or a variant's copy) in /tmp (needs bwrap's private /tmp)."""
    from rust_rewards.verify.sandbox import detect_isolation
    from rust_rewards.verify.single import verify_code

    if detect_isolation().bwrap is None:
        pytest.skip("no bwrap here: /tmp is the host's")
    r = verify_code(NOTE_IN_TMP, None)
    assert (r.own_tests.passed, r.own_tests.expected) == (2, 2), r.test_output
