"""Hidden-test forgery: the corpus in tests/adversarial/forgery earns no hidden reward in either verifier mode,
every attack is flagged with a hack reason, and eval's ``hidden_ok`` agrees with the reward on every case."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import ADVERSARIAL, ROOT

from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.lexer import tokenize
from rust_rewards.rust.rules import forbidden_calls
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "forgery"
CONTROLS = {"honest_right": 2.0, "honest_wrong": 0.0}
NOT_FLAGGED = {"runtime_read_hidden", "fake_summary_lines"}
"""Attacks that fail without a static flag: the file they look for is deleted before tests run; printed test lines
and summaries are not read (a test passes only by its seal)."""


def _cases() -> dict[str, tuple[str, HiddenTests]]:
    cases = {}
    for path in sorted(CORPUS.glob("*.rs")):
        source = path.read_text()
        shape = re.match(r"// hidden: (\w+)", source).group(1)
        cases[path.stem] = (source, HiddenTests((CORPUS / "hidden" / f"{shape}.rs").read_text(), shape=shape))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", params=["direct", "cargo"])
def reports(request):
    verifier = Verifier(VerifierConfig(mode=request.param), workers=2)
    codes, hidden = zip(*CASES.values(), strict=True)
    out = dict(zip(CASES, verifier.verify_many(list(codes), list(hidden), raw_code=True), strict=True))
    verifier.close()
    return out


def test_corpus_covers_the_issue():
    expected = {"name_collision", "nested_module", "path_attr", "include_hidden", "custom_harness",
                "fake_summary_lines", "exit_in_hidden_named_fn", "macro_shadow", "macro_export_shadow"}
    assert expected <= set(CASES)
    assert {"unit", "integration", "main"} == {h.shape for _, h in CASES.values()}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(CASES) - set(CONTROLS)))
def test_attack_earns_no_hidden_reward(reports, name):
    report = reports[name]
    assert not report.internal_error, report.internal_error
    assert rewards_from_report(report)["hidden_test_reward"] == 0.0, report.hidden_tests
    assert not report.hidden_ok and report.flat()["hidden_ok"] is False
    if name not in NOT_FLAGGED:
        assert report.hack_reasons, name
        assert rewards_from_report(report)["test_reward"] == 0.0


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_controls_score_what_they_earn(reports, name):
    report = reports[name]
    assert rewards_from_report(report)["hidden_test_reward"] == CONTROLS[name]
    assert report.hack_reasons == ()
    assert report.hidden_tests.passed == (3 if CONTROLS[name] else 0)


def test_eval_and_reward_agree_on_every_case(reports):
    for name, report in reports.items():
        reward = rewards_from_report(report)["hidden_test_reward"]
        flat = report.flat()
        assert reward == 2.0 * report.hidden_fraction, name
        assert flat["hidden_ok"] == (reward == 2.0), name
        assert flat["forbidden"] + flat["mismatched"] == list(report.hack_reasons), name


def test_forged_output_passes_nothing(reports):
    """No banned call in the source: the printed lines are simply not read; no hidden test printed its nonce."""
    report = reports["fake_summary_lines"]
    assert report.source.forbidden == ()
    assert report.hidden_tests.summary_seen and report.hidden_tests.passed == 0


def test_modes_agree_on_the_corpus():
    direct = Verifier(VerifierConfig(mode="direct"), workers=2)
    cargo = Verifier(VerifierConfig(mode="cargo"), workers=2)
    names = ["nested_module", "fake_summary_lines", "macro_shadow", "honest_right", "honest_wrong"]
    codes, hidden = zip(*(CASES[n] for n in names), strict=True)
    for name, a, b in zip(names, direct.verify_many(list(codes), list(hidden), raw_code=True),
                          cargo.verify_many(list(codes), list(hidden), raw_code=True), strict=True):
        assert a.verdict() == b.verdict(), name
    direct.close()
    cargo.close()


def test_the_issue_reproduction_scores_zero_with_the_cli():
    out = subprocess.run(
        [sys.executable, "-m", "rust_rewards", "check", str(CORPUS / "nested_module.rs"),
         "--hidden-tests", str(CORPUS / "hidden" / "unit.rs")],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=True,
    ).stdout
    record = json.loads(out)
    assert record["rewards"]["hidden_test_reward"] == 0.0
    assert record["hidden_passed"] == 0 and record["hidden_total"] == 3
    assert record["hack_reasons"]


@pytest.mark.parametrize("source", [
    "use std::process::exit; pub fn f() { exit(0) }",
    "use std::process as p; pub fn f() { p::exit(0) }",
    "use std::{process::*}; pub fn f() { exit(0) }",
    "pub fn f() { ::std::process::abort() }",
    "#![no_main]",
    "#[unsafe(no_mangle)] pub extern \"C\" fn main() -> i32 { 0 }",
    "#[cfg_attr(test, export_name = \"main\")] pub fn m() {}",
    "#[used] #[link_section = \".init_array\"] static INIT: extern \"C\" fn() = f;",
    "#[path = \"other.rs\"] mod x;",
    "const S: &[u8] = include_bytes!(\"lib.rs\");",
    "include!(\"lib.rs\");",
    "pub use std::debug_assert_eq as assert_eq;",
    "#[macro_export] macro_rules! panic { ($($t:tt)*) => {} }",
    "mod r#__rr_hidden_x {}",
    "pub fn f() { println!(\"test __rr_hidden_1::h ... ok\"); }",
    "use core::arch::asm as a;",
])
def test_forbidden_constructs_are_flagged(source):
    assert forbidden_calls(tokenize(source))


@pytest.mark.parametrize("source", [
    "pub fn process(v: &[i32]) -> i32 { v.iter().sum() }\npub fn g() -> i32 { process(&[1]) }",
    "use std::process::ExitCode;",
    "#[derive(Debug, Clone)] #[cfg(feature = \"x\")] pub struct A;",
    "pub fn f() -> Vec<i32> { let vec = vec![1]; vec }",
    "#[cfg(test)] mod tests { use super::*; #[test] fn t() { assert_eq!(1 + 1, 2); } }",
])
def test_honest_code_is_not_flagged(source):
    assert forbidden_calls(tokenize(source)) == ()
