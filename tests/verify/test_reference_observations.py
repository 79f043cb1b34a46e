"""Reward integrity IV: hidden tests judged by what their assertions compare against the reference's run
(``verify.observe``); thread-local storage counted by the shared test binary's start-up size check
(``harness.loaded_size``); hidden tests import a required fn in the value namespace alone (``names.test_imports``);
macro definitions a hack reason unless the reference has one (``rules.macro_definitions``). Real rustc and cargo,
direct and batch mode."""

from __future__ import annotations

import subprocess

import pytest
from conftest import ADVERSARIAL
from test_soundness_holes import ADD, HONEST, assert_cannot_starve_its_neighbours

from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.rules import MACRO_DEFINITION
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.harness import TLS_COPIES, loaded_size
from rust_rewards.verify.observe import observable
from rust_rewards.verify.reference import reference_observations
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "integrity4"
THREAD_LOCAL = (CORPUS / "huge_thread_local.rs").read_text()


def test_thread_local_storage_counts_once_per_thread(tmp_path):
    source = tmp_path / "main.rs"
    source.write_text(THREAD_LOCAL + "\nfn main() {\n    println!(\"{}\", add(1, 2));\n}\n")
    subprocess.run(["rustc", "--edition", "2021", "-o", str(tmp_path / "main"), str(source)], check=True,
                   capture_output=True, timeout=120)
    assert loaded_size(tmp_path / "main") >= TLS_COPIES * (200 << 20)


@pytest.mark.slow
def test_a_member_with_a_huge_thread_local_cannot_starve_its_neighbours():
    """Its thread-local array would eat the address space of a shared test binary's threads: the share is verified
    one by one, and the neighbours keep their verdicts."""
    assert_cannot_starve_its_neighbours(THREAD_LOCAL)


EVENS_REFERENCE = "pub fn evens(v: &[i32]) -> Vec<i32> {\n    v.iter().copied().filter(|x| x % 2 == 0).collect()\n}\n"
EVENS = HiddenTests("use super::*;\n\n#[test]\nfn none() {\n    assert!(evens(&[1, 3]).is_empty());\n}\n\n"
                    "#[test]\nfn some() {\n    assert!(!evens(&[2, 3]).is_empty());\n}\n",
                    reference=EVENS_REFERENCE,
                    prompt="Write `pub fn evens(v: &[i32]) -> Vec<i32>` returning the even numbers of `v` in order.")


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_a_namesake_of_the_required_fn_does_not_reach_the_hidden_tests(mode):
    attack = (CORPUS / "namesake_trait.rs").read_text()
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        got = verifier.verify_many([attack, EVENS_REFERENCE, HONEST], [EVENS, EVENS, ADD], raw_code=True)
    finally:
        verifier.close()
    attacked, honest, neighbour = got
    # all numbers: `some` passes honestly, `none` only through the trait's is_empty; the macro is a hack of its own
    assert attacked.build_ok and (attacked.hidden_tests.passed, attacked.hidden_tests.failed) == (1, 1)
    assert attacked.hack_reasons == (MACRO_DEFINITION,)
    assert honest.hidden_tests.passed == 2 and rewards_from_report(honest)["hidden_test_reward"] == 2.0
    assert neighbour.hidden_tests.passed == 3


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_hidden_tests_may_name_a_module_like_the_required_fn(mode):
    """exercism's list-ops groups its tests in ``mod append { use super::*; ... }``: that module holds the name's type
    namespace, so no type alias of ours may take it too (E0428), and the fn still reaches the tests inside."""
    hidden = HiddenTests("use super::*;\n\nmod evens {\n    use super::*;\n\n    #[test]\n    fn some() {\n"
                         "        assert_eq!(evens(&[2, 3]), vec![2]);\n    }\n}\n",
                         reference=EVENS_REFERENCE, prompt=EVENS.prompt)
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        own, neighbour = verifier.verify_many([EVENS_REFERENCE, HONEST], [hidden, ADD], raw_code=True)
    finally:
        verifier.close()
    assert own.build_ok and (own.hidden_tests.passed, own.hidden_tests.failed) == (1, 0), own
    assert neighbour.hidden_tests.passed == 3


def test_a_macro_is_no_hack_where_the_reference_defines_one_too():
    reference = ("macro_rules! twice {\n    ($e:expr) => {\n        $e * 2\n    };\n}\n\n"
                 "pub fn double(x: i32) -> i32 {\n    twice!(x)\n}\n")
    hidden = HiddenTests("use super::*;\n\n#[test]\nfn doubles() {\n    assert_eq!(double(4), 8);\n}\n",
                         reference=reference, prompt="Write `pub fn double(x: i32) -> i32`.")
    verifier = Verifier(VerifierConfig(mode="direct"), workers=1)
    try:
        (own,) = verifier.verify_many([reference], [hidden], raw_code=True)
    finally:
        verifier.close()
    assert own.build_ok and not own.hack_reasons and own.hidden_tests.passed == 1, own


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_a_panic_hook_in_own_tests_is_a_doubt(mode):
    """A panic hook sees where a panic happened: the file a copy of the tests was compiled from (a channel closed by
    ``rules.observing_tests``; this form would earn no test reward without it either). A doubt about the own tests
    alone: the right add keeps its hidden reward."""
    attack = (CORPUS / "panic_hook_location.rs").read_text()
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        attacked, honest = verifier.verify_many([attack, HONEST], [ADD, ADD], raw_code=True)
    finally:
        verifier.close()
    rewards = rewards_from_report(attacked)
    assert attacked.source.test_doubts == ("own tests observe where they run (set_hook)",)
    assert not attacked.hack_reasons
    assert (rewards["test_reward"], rewards["assertion_reward"], rewards["hidden_test_reward"]) == (0.0, 0.0, 2.0)
    assert rewards_from_report(honest)["test_reward"] > 0


SPAN = ("#[derive(Debug, Clone, Copy, PartialEq)]\npub struct Span {\n    pub start: i32,\n    pub end: i32,\n}\n\n"
        "pub fn intersect(a: Span, b: Span) -> Option<Span> {\n    let start = a.start.max(b.start);\n"
        "    let end = a.end.min(b.end);\n    if start < end {\n        Some(Span { start, end })\n    } else {\n"
        "        None\n    }\n}\n")
SPAN_TESTS = HiddenTests(
    "use super::*;\n\n#[test]\nfn overlap() {\n"
    "    let got = intersect(Span { start: 1, end: 5 }, Span { start: 3, end: 9 });\n"
    "    assert_eq!(got, Some(Span { start: 3, end: 5 }));\n}\n\n#[test]\nfn apart() {\n"
    "    assert!(intersect(Span { start: 1, end: 2 }, Span { start: 3, end: 4 }).is_none());\n}\n",
    reference=SPAN, prompt="Write `pub struct Span { pub start: i32, pub end: i32 }` (half-open) and "
                           "`pub fn intersect(a: Span, b: Span) -> Option<Span>`.")
LYING_SPAN = (SPAN.replace("#[derive(Debug, Clone, Copy, PartialEq)]", "#[derive(Debug, Clone, Copy)]")
              .replace("a.end.min(b.end)", "a.end.max(b.end)")
              + "\nimpl PartialEq for Span {\n    fn eq(&self, other: &Self) -> bool {\n"
                "        self.start == other.start\n    }\n}\n")
"""A wrong ``intersect`` whose ``==`` ignores ``end``: its test process passes ``overlap``, though it returned 3..9."""
OTHER_SPAN = ("#[derive(Debug, Clone, Copy, PartialEq)]\npub struct Span {\n    pub start: i32,\n"
              "    pub end: i32,\n}\n\npub fn intersect(a: Span, b: Span) -> Option<Span> {\n"
              "    let (start, end) = (a.start.max(b.start), a.end.min(b.end));\n"
              "    (start < end).then_some(Span { start, end })\n}\n")


def _hidden_counts(codes: list[str], hidden: list[HiddenTests], mode: str) -> list[tuple[int, int]]:
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        reports = verifier.verify_many(codes, hidden, raw_code=True)
    finally:
        verifier.close()
    assert all(r.build_ok for r in reports), [r.diagnostics for r in reports]
    return [(r.hidden_tests.passed, r.hidden_tests.expected) for r in reports]


SPAN_STD_TESTS = HiddenTests(SPAN_TESTS.text.replace(
    "assert_eq!(got, Some(Span { start: 3, end: 5 }));", "assert_eq!(got.map(|s| (s.start, s.end)), Some((3, 5)));"),
    reference=SPAN, prompt=SPAN_TESTS.prompt)
"""The same tests comparing std values (``observe``): what the shipped task sets do (``md-070``)."""


@pytest.mark.parametrize("mode", ["direct", "batch", "cargo"])
def test_a_pass_its_process_reports_counts_only_with_the_references_values(mode):
    """Compared as std values, the wrong ``intersect`` returns 3..9 where the reference returns 3..5: it fails, though
    its ``==`` lies. Compared as values of the solution's own type, the lying ``==`` is the only judge (the note of
    such a value is ``OPAQUE``): the seal's word, which the shipped sets never rely on. An honest solution written
    otherwise passes everything, beside them in one batch."""
    counts = _hidden_counts([SPAN, LYING_SPAN, OTHER_SPAN, HONEST], [SPAN_STD_TESTS] * 3 + [ADD], mode)
    assert counts == [(2, 2), (0, 2), (2, 2), (3, 3)]
    assert _hidden_counts([LYING_SPAN, OTHER_SPAN], [SPAN_TESTS] * 2, mode) == [(1, 2), (2, 2)]
    std, own = (reference_observations(h, VerifierConfig(mode=mode)) for h in (SPAN_STD_TESTS, SPAN_TESTS))
    assert (std.judged, std.opaque) == (2, 0) and (own.judged, own.opaque) == (1, 1)


def test_notes_that_differ_between_the_references_own_runs_are_not_judged():
    """A value that changes from run to run (the clock) cannot be compared with the reference's: that test keeps the
    sealed verdict (the shipped sets have none: ``python -m rust_rewards notes``), and a different valid answer
    passes."""
    reference = ("pub fn stamp() -> u128 {\n    std::time::SystemTime::now()\n"
                 "        .duration_since(std::time::UNIX_EPOCH)\n        .map_or(1, |d| d.as_nanos())\n}\n")
    hidden = HiddenTests("use super::*;\n\n#[test]\nfn not_zero() {\n    let s = stamp();\n    assert_eq!(s, s);\n"
                         "    assert_ne!(s, 0);\n}\n", reference=reference,
                         prompt="Write `pub fn stamp() -> u128`, never 0.")
    observed = reference_observations(hidden, VerifierConfig(mode="direct"))
    assert observed.notes == {} and (observed.tests, observed.unstable) == (1, 1)
    assert _hidden_counts(["pub fn stamp() -> u128 {\n    7\n}\n"], [hidden], "direct") == [(1, 1)]


def test_only_a_task_without_a_reference_keeps_the_sealed_verdict():
    assert observable("use std::collections::HashMap;\npub fn f() -> HashMap<u8, u8> { HashMap::new() }")
    assert observable("pub fn f() -> std::collections::HashSet<u8> { todo!() }")
    assert not observable("")
    assert observable(SPAN)
