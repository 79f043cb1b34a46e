"""benchmarks/learning.py's report parts that need no model: where GRPO's hidden-test signal was."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from conftest import ROOT

from rust_rewards.layout import RunFolder
from rust_rewards.train.pass_rates import PassRates

sys.path.insert(0, str(ROOT / "benchmarks"))
from learning import copy_filter, hidden_signal  # noqa: E402


def write_step(run: Path, step: int, rows: list[tuple[str, bool, int]]) -> None:
    frame = pd.DataFrame([{"step": step, "task_id": task, "completion": "fn f() {}", "reward": float(ok),
                           "build_ok": True, "clippy_ok": True, "tests_ok": None, "hidden_ok": ok,
                           "hidden_passed": 3 if ok else passed}
                          for task, ok, passed in rows])
    file = RunFolder(run).completions_at(step)
    file.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(file)


def test_hidden_signal_counts_spread_groups_per_tier_and_tasks_that_began_to_pass(tmp_path):
    write_step(tmp_path, 1, [("lp-a", True, 3), ("lp-a", False, 1), ("lp-b", False, 0), ("lp-b", False, 2)])
    write_step(tmp_path, 2, [("lp-b", True, 3), ("lp-b", False, 0), ("ez-c", True, 3), ("ez-c", True, 3)])
    tiers = {"lp-a": "loop", "lp-b": "loop", "ez-c": "easy"}
    rates = PassRates(4, {"lp-a": 1, "lp-b": 0, "ez-c": 0}, {}, {})
    assert hidden_signal(tmp_path, tiers, rates) == [
        "hidden-test signal in GRPO's groups, per step (groups whose answers pass different numbers of hidden "
        "tests, the hidden reward's spread; of them, groups with a full pass and a failure / groups):",
        "  easy tier: 0 of 1 groups with hidden-reward spread, 0 with a full pass and a failure; by step 0,0/1",
        "  easy tier: 1 tasks in rollouts, 1 with a hidden pass; 1 never passed in the filter's 4 samples, of them "
        "1 passed in a rollout",
        "  loop tier: 3 of 3 groups with hidden-reward spread, 2 with a full pass and a failure; by step 2,1/2 1,1/1",
        "  loop tier: 2 tasks in rollouts, 2 with a hidden pass; 1 never passed in the filter's 4 samples, of them "
        "1 passed in a rollout"]
    assert hidden_signal(tmp_path / "none", tiers, None) == [f"no rollouts written in {tmp_path / 'none'}/completions"]


def test_a_second_configuration_starts_from_the_first_ones_filter_counts(tmp_path):
    (tmp_path / "grpo").mkdir()
    (tmp_path / "grpo" / "pass_rates.json").write_text("{}")
    copy_filter(tmp_path, "grpo-b")
    assert (tmp_path / "grpo-b" / "pass_rates.json").read_text() == "{}"
    (tmp_path / "grpo-b" / "pass_rates.json").write_text('{"own": 1}')
    copy_filter(tmp_path, "grpo-b")  # its own counts are kept
    assert (tmp_path / "grpo-b" / "pass_rates.json").read_text() == '{"own": 1}'
