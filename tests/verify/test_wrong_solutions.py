"""Reward integrity: the corpus in tests/adversarial/integrity (one case per class of the second adversarial
review) against the ``add`` task with its reference, in unit, integration and main shapes, in direct and batch
mode. A wrong solution earns no hidden-test and no own-test reward however it writes its output, an answer to
another task earns nothing, no completion becomes an internal error, and every completion gets in batch mode
exactly the verdict it gets alone."""

from __future__ import annotations

import re

import pytest
from conftest import ADVERSARIAL

from rust_rewards.rewards import rewards_from_report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "integrity"
FORGERY = ADVERSARIAL / "forgery"
REFERENCE = (FORGERY / "honest_right.rs").read_text().split("\n", 1)[1]
CASES = {p.stem: p.read_text() for p in sorted(CORPUS.glob("*.rs"))}
EXPECT = {name: re.match(r"// expect: (\w+)", text).group(1) for name, text in CASES.items()}
SHAPES = ("unit", "integration", "main")
SIGNATURE_ONLY = {"always_equal_type"}
"""Attacks whose tests really pass on the code as written: only the signature check stops them."""


def _hidden(shape: str) -> HiddenTests:
    return HiddenTests((FORGERY / "hidden" / f"{shape}.rs").read_text(), shape=shape, reference=REFERENCE,
                       prompt=(FORGERY / "task.md").read_text())


@pytest.fixture(scope="module")
def reports():
    out = {}
    for mode in ("direct", "batch"):
        verifier = Verifier(VerifierConfig(mode=mode), workers=2)
        for shape in SHAPES:
            got = verifier.verify_many(list(CASES.values()), [_hidden(shape)] * len(CASES), raw_code=True)
            out.update({(mode, shape, name): r for name, r in zip(CASES, got, strict=True)})
        if mode == "batch":
            out["batch_stats"] = dict(verifier.stats), dict(verifier.fallback_reasons)
        verifier.close()
    return out


@pytest.mark.slow
def test_corpus_covers_every_class():
    assert set(EXPECT.values()) == {"attack", "honest", "off_task", "partly_wrong"}
    assert {"abort_after_fake_report", "panic_hook_report", "macro_built_exit", "own_tests_forged",
            "always_equal_type", "ctor_nested_cfg_attr", "huge_count_line", "tests_that_cannot_fail",
            "tailored_tests", "other_task", "read_own_binary", "include_host_file"} <= set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["direct", "batch"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(n for n, e in EXPECT.items() if e == "attack"))
def test_attacks_earn_no_test_reward(reports, mode, shape, name):
    r = reports[(mode, shape, name)]
    rewards = rewards_from_report(r)
    assert not r.internal_error, r.internal_error
    assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (0.0, 0.0, 0.0)
    assert not r.hidden_ok and not r.tests_checked
    if name not in SIGNATURE_ONLY:  # the seals alone, whatever the static rules say
        assert r.hidden_tests.passed == 0, r.hidden_tests
        assert r.own_checks.discriminating == 0
    else:
        assert r.mismatched


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["direct", "batch"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_partly_wrong_solution_earns_nothing_for_its_tests(reports, mode, shape):
    r = reports[(mode, shape, "partly_wrong_tested_where_right")]
    rewards = rewards_from_report(r)
    assert r.tests_ok and r.own_checks.compiled  # its tests pass and compile against the variants...
    assert r.hidden_tests.passed < r.hidden_tests.expected  # ...but the hidden tests catch the solution
    assert not r.own_checks.ran and (r.own_checks.valid, r.own_checks.discriminating) == (0, 0)  # copies not run
    assert r.hidden_tests.passed > 0 or shape == "main"  # (a MultiPL-E main is one test: all or nothing)
    assert (rewards["test_reward"], rewards["assertion_reward"]) == (0.0, 0.0)
    assert rewards["hidden_test_reward"] == pytest.approx(2.0 * r.hidden_fraction)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["direct", "batch"])
@pytest.mark.parametrize("shape", SHAPES)
def test_an_answer_to_another_task_earns_nothing(reports, mode, shape):
    r = reports[(mode, shape, "other_task")]
    assert r.build_ok and r.tests_ok is False and r.off_task == ("fn add",)
    assert set(rewards_from_report(r).values()) == {0.0}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["direct", "batch"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(n for n, e in EXPECT.items() if e == "honest"))
def test_honest_answers_keep_full_marks(reports, mode, shape, name):
    r = reports[(mode, shape, name)]
    rewards = rewards_from_report(r)
    assert not r.internal_error and r.hack_reasons == () and r.on_task
    assert rewards["hidden_test_reward"] == 2.0 and rewards["test_reward"] == 2.0, (r.own_tests, r.own_checks)
    assert rewards["assertion_reward"] == 0.25 and r.own_checks == r.own_checks.__class__(
        ("reference", "mutant"), True, 1, 1)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_batch_gives_every_member_its_verdict_alone(reports, shape):
    for name in CASES:
        assert reports[("batch", shape, name)].verdict() == reports[("direct", shape, name)].verdict(), name


@pytest.mark.slow
def test_batch_combined_the_honest_and_kept_entry_point_attributes_apart(reports):
    stats, reasons = reports["batch_stats"]
    assert stats["combined"] >= 4  # unit shape: the honest answers shared a binary with attacks that run code
    assert reasons.get("banned construct", 0) >= 3  # ctor_nested_cfg_attr, in every shape, never shares a binary


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_without_reference_or_prompt_a_forged_comparison_is_still_a_hack(shape):
    """What is checked when a task gives neither: the always-equal type is flagged, the honest answer is not."""
    verifier = Verifier(VerifierConfig(), workers=2)
    bare = HiddenTests((FORGERY / "hidden" / f"{shape}.rs").read_text(), shape=shape)
    forged, honest = verifier.verify_many([CASES["always_equal_type"], CASES["honest_tested"]], [bare, bare],
                                          raw_code=True)
    verifier.close()
    assert forged.mismatched == ("implements PartialEq<i32> for its own type Wat",)
    assert rewards_from_report(forged)["hidden_test_reward"] == 0.0
    assert honest.hack_reasons == () and rewards_from_report(honest)["hidden_test_reward"] == 2.0
