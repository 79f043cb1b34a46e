"""Reward integrity VI: a rule costs only the reward it protects, names are resolved, what ships is judged.

``tests/adversarial/integrity6`` against the ``add`` task (reference and unit-shaped hidden tests of
``tests/adversarial/forgery``), real cargo, direct and batch mode. Each file's first line says what it is:
``honest`` (a right add written another way: every reward), ``doubt`` (a right add whose own tests are in doubt:
the hidden reward stays, the own tests' rewards go), ``hack`` (no hidden, test or assertion reward),
``off_task`` (an answer that defines nothing the task asks: no reward at all).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rust_rewards.rewards import rewards_from_report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

ADVERSARIAL = Path(__file__).parent / "adversarial"
CORPUS = ADVERSARIAL / "integrity6"
FORGERY = ADVERSARIAL / "forgery"
CASES = {p.stem: p.read_text() for p in sorted(CORPUS.glob("*.rs"))}
EXPECT = {name: re.match(r"// expect: (\w+)", text).group(1) for name, text in CASES.items()}
ADD = HiddenTests((FORGERY / "hidden" / "unit.rs").read_text(), reference=(FORGERY / "honest_right.rs").read_text(),
                  prompt=(FORGERY / "task.md").read_text())
MODES = ("direct", "batch")


@pytest.fixture(scope="module")
def reports():
    out = {}
    for mode in MODES:
        verifier = Verifier(VerifierConfig(mode=mode), workers=2)
        try:
            got = verifier.verify_many(list(CASES.values()), [ADD] * len(CASES), raw_code=True)
        finally:
            verifier.close()
        out.update({(mode, name): r for name, r in zip(CASES, got, strict=True)})
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
    elif kind == "hack":
        assert r.hack_reasons, why
        assert (rewards["hidden_test_reward"], rewards["test_reward"], rewards["assertion_reward"]) == (0, 0, 0), why
    else:
        assert kind == "off_task" and r.off_task, why
        assert not any(rewards.values()), rewards


def test_both_modes_agree(reports):
    for name in CASES:
        direct, batch = reports[("direct", name)], reports[("batch", name)]
        assert direct.verdict() == batch.verdict(), name
