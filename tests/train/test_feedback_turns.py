"""Feedback turns in training: the ``cargo_check`` tool on real cargo, tool-use counting, and a tiny GRPO run
with ``--feedback-turns 1`` that really calls the tool."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import ROOT

from rust_rewards.report import Report
from rust_rewards.rewards.cargo_tool import (
    NO_CODE,
    TOOL_NAME,
    cargo_check,
    first_draft,
    tool_use,
    visible_level,
)
from rust_rewards.rust.extract import completion_text
from rust_rewards.train.config import TOOL_WARM_SHARE
from rust_rewards.verify.verifier import get_verifier

ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
TESTS = ("\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n"
         "        assert_eq!(add(2, 3), 5);\n    }\n}\n")


def call(code) -> dict:
    return {"type": "function", "function": {"name": TOOL_NAME, "arguments": {"code": code}}}


def rollout(draft, final: str) -> list[dict]:
    """A TRL completion with one tool call: draft -> tool answer -> final answer."""
    return [{"role": "assistant", "content": "", "tool_calls": [call(draft)]},
            {"role": "tool", "name": TOOL_NAME, "content": cargo_check(draft)},
            {"role": "assistant", "content": final}]


def test_cargo_check_answers_from_real_cargo():
    broken = cargo_check("pub fn add(a: i32, b: i32) -> i32 {\n    a + \"b\"\n}\n" + TESTS)
    assert broken.startswith("Your answer failed these checks: the code does not compile") and "E0277" in broken
    untested = cargo_check(ADD)
    assert "your tests (there are no #[test] functions)" in untested
    failing = cargo_check(ADD + TESTS.replace("5);", "6);"))
    assert "adds failed" in failing and "left: 5" in failing
    lint = cargo_check("pub fn add(a: i32, b: i32) -> i32 {\n    return a + b;\n}\n" + TESTS)
    assert "clippy::needless_return" in lint
    assert cargo_check(f"```rust\n{ADD}{TESTS}```").startswith("All checks passed") and "1 test pass" in cargo_check(
        ADD + TESTS)


def test_malformed_tool_calls_get_a_message_not_an_exception():
    assert cargo_check() == NO_CODE and cargo_check("   ") == NO_CODE
    assert cargo_check(42).startswith("Your answer failed these checks: the code does not compile")
    assert cargo_check({"fn": "add"}).startswith("Your answer failed these checks")


def test_tool_use_counts_calls_and_improvement_over_the_first_draft():
    improved = rollout(ADD, f"```rust\n{ADD}{TESTS}```")
    same = rollout(ADD, f"```rust\n{ADD}```")
    no_code_call = [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": TOOL_NAME, "arguments": {}}}]}, {"role": "tool", "content": NO_CODE},
        {"role": "assistant", "content": f"```rust\n{ADD}```"}]
    plain = [{"role": "assistant", "content": f"```rust\n{ADD}{TESTS}```"}]
    completions = [improved, same, no_code_call, plain]
    reports = get_verifier().verify_many(completions)
    assert completion_text(improved).startswith("```rust") and reports[0].tests_ok and not reports[1].tests_ok
    assert first_draft(improved) == ADD.strip() and first_draft(no_code_call) == "" and first_draft(plain) is None
    use = tool_use(completions, reports, get_verifier())
    assert (use.completions, use.calls, use.rollouts_with_calls, use.improved) == (4, 3, 3, 2)
    assert use.metrics() == {"feedback/tool_calls": 3, "feedback/rollouts_with_calls": 3,
                             "feedback/improved_share": 2 / 3}
    assert [visible_level(r) for r in reports] == [4, 3, 3, 4] and visible_level(Report(has_code=False)) == 0


def test_feedback_turns_need_room_for_the_tool_answer():
    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.resolve import resolve_params

    with pytest.raises(ValueError, match="--feedback-turns 1: the tool's answers .* use at least 320"):
        resolve_params(params_from_mapping({"preset": "tiny", "feedback-turns": 1}))
    with pytest.raises(ValueError, match="--feedback-turns must be within \\[0, 16\\], got -1"):
        resolve_params(params_from_mapping({"preset": "tiny", "feedback-turns": -1}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tiny_run_with_feedback_turns_calls_the_tool(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--preset", "tiny", "--feedback-turns", "1",
                           "--max-completion-length", "320", "--max-steps", "2", "--model", str(tmp_path / "model"),
                           "--build-tiny-model", "true", "--output-dir", str(out)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert sum(m["feedback/tool_calls"] for m in metrics) >= 1 and any(m["tools/call_frequency"] > 0 for m in metrics)
    assert all(0.0 <= m["feedback/improved_share"] <= 1.0 for m in metrics)
    rows = pd.concat([pd.read_parquet(out / "completions" / f"step_{s:06d}.parquet") for s in (1, 2)])
    assert rows["tool_calls"].sum() == sum(m["feedback/tool_calls"] for m in metrics)
    params = json.loads((out / "params.json").read_text())
    assert params["feedback_turns"] == 1 and params["model"] == str(tmp_path / "model")
    marker = json.loads((tmp_path / "model" / "tiny_model.json").read_text())
    assert marker["warm_start"]["tool_calls"] == TOOL_WARM_SHARE and marker["warm_start"]["tool_pairs"] > 0
