"""Run and eval folders in the exact format train.py and eval.py write, from real verifier reports of a few answers
to the ``add`` task (the dashboard's readers, charts and pages read them)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from rust_rewards.eval.metrics import summarize
from rust_rewards.report import Report
from rust_rewards.rewards import REWARD_FUNCS, rewards_from_report, weighted_total
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.verifier import get_verifier

REWARD_NAMES = tuple(f.__name__ for f in REWARD_FUNCS)

GOOD = """Here is the solution.
```rust
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
```
"""
TYPE_ERROR = """```rust
pub fn add(a: i32, b: i32) -> i32 {
    "a + b"
}
```
"""
CLIPPY = """```rust
pub fn add(a: i32, b: i32) -> i32 {
    return a + b;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
```
"""
FAILING = """```rust
pub fn add(a: i32, b: i32) -> i32 {
    a - b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(2, 3), 5);
    }
}
```
"""
NO_CODE = "I cannot write Rust today."


HIDDEN = HiddenTests(text="#[test]\nfn hidden_add() {\n    assert_eq!(add(1, 1), 2);\n}\n", shape="unit")


def verify(completions: list[str]) -> list[Report]:
    """The real verifier's reports (cargo toolchain), every task with the same hidden test."""
    return get_verifier().verify_many(completions, hidden=[HIDDEN] * len(completions))


STEPS = {1: [TYPE_ERROR, TYPE_ERROR, NO_CODE, GOOD], 2: [TYPE_ERROR, CLIPPY, FAILING, GOOD],
         3: [GOOD, GOOD, CLIPPY, FAILING]}


def write_training_dir(out: Path, steps: dict[int, list[str]] = STEPS) -> Path:
    """A training output dir in the exact format train.py writes (params, metrics.jsonl, completions/)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.json").write_text(json.dumps({"model": "tiny", "max_steps": len(steps)}))
    metric_lines = []
    for step, completions in steps.items():
        rows = []
        for i, (completion, report) in enumerate(zip(completions, verify(completions), strict=True)):
            rewards = rewards_from_report(report)
            rows.append({"step": step, "task_id": f"task_{i % 2}", "prompt": f"Write add #{i}",
                         "completion": completion, "reward": weighted_total(rewards), **rewards,
                         **report.flat()})
        frame = pd.DataFrame(rows)
        (out / "completions").mkdir(exist_ok=True)
        frame.to_parquet(out / "completions" / f"step_{step:06d}.parquet", index=False)
        metric = {"step": step, "epoch": step / len(steps), "loss": 0.01 * step,
                  "reward": frame["reward"].mean(), "reward_std": frame["reward"].std(),
                  "completions/mean_length": 100.0 + step,
                  "completions/clipped_ratio": 0.25, "entropy": 1.5 - 0.1 * step, "learning_rate": 1e-5,
                  "step_time": 2.0, "reward_time": 0.5, "reward_share": 0.25}
        for name in REWARD_NAMES:
            metric[f"rewards/{name}/mean"] = frame[name].mean()
            metric[f"rewards/{name}/std"] = frame[name].std()
        metric_lines.append(json.dumps(metric))
    (out / "metrics.jsonl").write_text("\n".join(metric_lines) + "\n")
    return out


def write_eval_dir(out: Path, with_summary: bool = True) -> Path:
    """An eval output dir as eval.py writes it: results.parquet and summary.json for two models."""
    rows = []
    for model, completions in (("base", [TYPE_ERROR, NO_CODE, GOOD, FAILING]),
                               ("grpo", [GOOD, GOOD, CLIPPY, TYPE_ERROR])):
        for i, (completion, report) in enumerate(zip(completions, verify(completions), strict=True)):
            rows.append({"model": model, "task_id": f"task_{i}", "sample": 0, "completion": completion,
                         **report.flat()})
    results = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    results.to_parquet(out / "results.parquet", index=False)
    if with_summary:
        summary = {model: s.to_dict() for model, s in summarize(results).items()}
        (out / "summary.json").write_text(json.dumps(summary))
    return out
