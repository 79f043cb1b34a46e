"""Repair-round feedback on real verifier reports: what the model may see, and nothing of the hidden tests."""

from __future__ import annotations

import dataclasses
import doctest

import pytest

from rust_rewards.report import Report
from rust_rewards.rewards import feedback
from rust_rewards.rewards.feedback import NO_CODE_MESSAGE, approx_tokens, feedback_message, visible_view
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import diagnostics
from rust_rewards.verify.bench import DEFAULT_CORPUS, load_corpus
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.sandbox import RUN_LIMITS
from rust_rewards.verify.verifier import Verifier

CORPUS = dict(load_corpus(DEFAULT_CORPUS))
SECRET = "SECRET_EXPECTATION"

ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"
OWN_TESTS = """
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero() {
        assert_eq!(add(0, 0), 0);
    }

    #[test]
    fn own_bad() {
        assert_eq!(add(1, 1), 2, "own message");
    }
}
"""
HIDDEN = {
    "unit": HiddenTests(f'#[test]\nfn hidden_sum() {{ assert_eq!(add(1, 2), 3, "{SECRET}"); }}\n'),
    "integration": HiddenTests(
        f'use solution::*;\n#[test]\nfn own_bad() {{ assert_eq!(add(1, 2), 3, "{SECRET}"); }}\n', shape="integration"),
    "main": HiddenTests(f'fn main() {{ assert_eq!(add(1, 2), 3, "{SECRET}"); }}\n', shape="main"),
    "does_not_compile": HiddenTests(f'#[test]\nfn hidden_sum() {{ assert_eq!(add_three(1, 2, 3), 6, "{SECRET}"); }}\n'),
}




def _leaks(message: str) -> list[str]:
    return [s for s in (SECRET, "hidden_sum", "add_three", "hidden_main", "__rr", "tests/", "E0425") if s in message]


def test_real_compiler_errors_lints_and_test_failures(verifier) -> None:
    names = ["err_type_mismatch.md", "err_borrow.md", "clippy_needless_return.md", "fail_off_by_one.md",
             "test_only_compile_error.md", "ok_stack.md"]
    reports = dict(zip(names, verifier.verify_many([CORPUS[n] for n in names]), strict=True))

    build = feedback_message(reports["err_type_mismatch.md"])
    assert "the code does not compile (1 error)" in build
    assert "- E0277 at line 2:7: cannot multiply `i32` by `{float}`" in build
    assert "2 |     x * 2.0" in build and "^ no implementation for `i32 * {float}`" in build
    borrow = feedback_message(reports["err_borrow.md"])
    assert "- E0502 at line 3:5: cannot borrow `*v` as mutable because it is also borrowed as immutable" in borrow
    assert "immutable borrow occurs here" in borrow

    lints = feedback_message(reports["clippy_needless_return.md"])
    assert "clippy (2 lints)" in lints
    assert "- clippy::needless_return at line 3:9: unneeded `return` statement" in lints
    assert "- clippy::needless_return at line 5:9" in lints and "help: remove `return`" in lints
    assert "for further information" not in lints and "Your tests" not in lints

    tests = feedback_message(reports["fail_off_by_one.md"])
    assert "your tests (2 of 2 failed)" in tests
    for name, line, left, right in (("tests::small", "11:9", 0, 1), ("tests::ten", "16:9", 45, 55)):
        block = tests.split(f"- {name} failed\n", 1)[1]
        assert block.startswith(f"  panicked at line {line}:\n  assertion `left == right` failed\n"
                                f"    left: {left}\n   right: {right}")
    assert "RUST_BACKTRACE" not in tests and "thread '" not in tests

    test_build = feedback_message(reports["test_only_compile_error.md"])
    assert "your tests (they did not compile)" in test_build and "- E0308 at line 11:25: mismatched types" in test_build

    assert feedback_message(reports["ok_stack.md"]) is None


@pytest.mark.parametrize("shape", list(HIDDEN))
def test_hidden_tests_never_reach_the_message(verifier, shape) -> None:
    """Hidden failures alone give no feedback; with the model's own failures, only those are shown."""
    hidden = HIDDEN[shape]
    clean_tests = OWN_TESTS.replace("assert_eq!(add(1, 1), 2, \"own message\")", "assert_eq!(add(2, 1), 1)")
    only_hidden = verifier.verify(ADD + clean_tests, hidden, raw_code=True)
    assert only_hidden.tests_ok and only_hidden.clippy_ok and not only_hidden.hidden_ok
    assert feedback_message(only_hidden) is None

    both = verifier.verify(ADD + OWN_TESTS, hidden, raw_code=True)
    assert not both.hidden_ok
    message = feedback_message(both)
    assert "- tests::own_bad failed" in message and "own message" in message
    assert _leaks(message) == []
    if shape != "does_not_compile":
        assert SECRET in both.test_output  # the hidden run's output is in the report, and was left out

    untested = verifier.verify(ADD, hidden, raw_code=True)
    message = feedback_message(untested)
    assert "no #[test] function found" in message and _leaks(message) == []
    if shape == "does_not_compile":
        assert "E0425" in untested.error_codes and SECRET in untested.diagnostics
        assert visible_view(untested).errors == ()


def test_no_code_internal_errors_and_forbidden() -> None:
    assert feedback_message(Report(has_code=False)) == NO_CODE_MESSAGE
    assert feedback_message(Report(has_code=True, internal_error="SandboxError: boom")) is None
    mismatched = Report(has_code=True, build_ok=True, clippy_ok=True, mismatched=("add: expected fn(i32) -> i32",),
                        own_tests=feedback.TestCounts(passed=1, expected=1, summary_seen=True))
    assert not mismatched.tests_ok and feedback_message(mismatched) is None  # the task's signature is not shown


def test_cap_keeps_the_message_within_max_tokens(verifier) -> None:
    body = "\n".join(f"pub fn f{i}(a: i32) -> i32 {{\n    return a + {i};\n}}" for i in range(1, 13))
    report = verifier.verify(body, raw_code=True)
    assert len(report.clippy_warnings) == 12
    full = feedback_message(report, max_tokens=10_000)
    assert full.count("- clippy::needless_return") == 12 and "not shown" not in full
    assert full.count("help: remove `return`") == 1 and full.count("(as above)") == 11
    assert "- clippy::needless_return at line 5:5: unneeded `return` statement (as above)" in full
    for cap in (200, 300):
        capped = feedback_message(report, max_tokens=cap)
        assert approx_tokens(capped) <= cap
        shown = capped.count("- clippy::needless_return")
        assert 0 < shown < 12 and capped.endswith(f"({12 - shown} more problems not shown.)")
    words = feedback_message(report, max_tokens=200, count_tokens=lambda text: len(text.split()))
    assert len(words.split()) <= 200
    assert feedback_message(report, max_tokens=300) == feedback_message(report, max_tokens=300)


def test_doctests() -> None:
    for module in (feedback, diagnostics):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


@pytest.mark.slow
def test_a_test_that_never_ends_is_reported_as_a_timeout() -> None:
    code = ("pub fn spin(n: u64) -> u64 {\n    let mut i = n;\n    while i > 0 {\n        i = i.wrapping_add(2);\n"
            "    }\n    i\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn spins() {\n"
            "        assert_eq!(spin(1), 0);\n    }\n}\n")
    quick = dataclasses.replace(RUN_LIMITS, wall_seconds=2, cpu_seconds=2)  # the message, not the limit, is tested
    verifier = Verifier(VerifierConfig(run_limits=quick), workers=1)
    try:
        report = verifier.verify(f"```rust\n{code}```")
    finally:
        verifier.close()
    assert report.build_ok and report.own_tests.timed_out
    message = feedback_message(report)
    assert "your tests (they did not finish in time)" in message
    assert "- your tests did not finish within the time limit (an endless loop or a very slow test?)" in message
