"""Does GRPO with our rewards make a model better? Before/after on the tiny model, measured with our own tools.

    .venv/bin/python benchmarks/learning.py [--steps 100] [--n 8] [--tasks 20] [--out outputs/learning]

1. Build (or reuse) the warm-started tiny model and split the bundled tasks into a training split and a held-out
   split (by a hash of seed and task id).
2. Sample ``--n`` completions per task with ``inference.py`` (the training temperature, fixed seed) on ``--tasks``
   tasks of each split, and score them with ``eval.py``.
3. Train the tiny preset on the training split with ``train.py`` for ``--steps`` steps (its reward curve lands in
   ``OUT/run/metrics.jsonl``: ``marimo run viz.py -- --run OUT/run``).
4. Sample and score the trained adapter the same way, and print per split and metric (build, clippy, own tests,
   hidden pass@1) the before/after rates with 95% Wilson intervals over completions, and the paired difference over
   tasks (mean of per-task differences with a 95% bootstrap interval; tasks better / same / worse).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rust_rewards.data.importers import load_tasks  # noqa: E402
from rust_rewards.eval.metrics import wilson_interval  # noqa: E402
from rust_rewards.rewards import MAX_TOTAL  # noqa: E402

TASKS = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
METRICS = {"build": "build_ok", "clippy": "clippy_ok", "own tests": "tests_ok", "hidden pass@1": "hidden_ok"}


def split(seed: int, held_out: float = 0.3) -> dict[str, list[dict]]:
    """Bundled task rows by split; a task's split depends only on the seed and its id."""
    out: dict[str, list[dict]] = {"train": [], "held-out": []}
    for task in load_tasks(TASKS):
        digest = hashlib.sha256(f"{seed}:{task.task_id}".encode()).digest()
        out["held-out" if digest[0] < held_out * 256 else "train"].append(task.to_row())
    return out


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(*args: str) -> float:
    """Run one of the notebooks as a script; return its wall time."""
    start = time.monotonic()
    subprocess.run([sys.executable, *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def paired(before: pd.Series, after: pd.Series, rng: np.random.Generator) -> tuple[float, float, float, str]:
    """Mean per-task difference, its 95% bootstrap interval over tasks, and better/same/worse counts."""
    diff = (after - before).to_numpy()
    boots = rng.choice(diff, size=(2000, len(diff))).mean(axis=1)
    low, high = np.percentile(boots, [2.5, 97.5])
    counts = f"{(diff > 0).sum()}/{(diff == 0).sum()}/{(diff < 0).sum()}"
    return float(diff.mean()), float(low), float(high), counts


def report(results: pd.DataFrame, label: str, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = [f"\n{label}: {results['task_id'].nunique()} tasks x {results.groupby(['model', 'task_id']).size().max()} "
             "samples per model", "| metric | before | after | paired diff over tasks [95% CI] | tasks +/=/- |",
             "|---|---|---|---|---|"]
    for name, column in METRICS.items():
        rows = results[results[column].notna()]
        if rows.empty:
            continue
        cells = []
        for model in ("before", "after"):
            ok = rows[rows["model"] == model][column].astype(bool)
            low, high = wilson_interval(int(ok.sum()), len(ok))
            cells.append(f"{ok.mean():.1%} [{low:.1%}, {high:.1%}] (n={len(ok)})")
        per_task = rows.assign(ok=rows[column].astype(float)).pivot_table(index="task_id", columns="model",
                                                                          values="ok", aggfunc="mean")
        mean, low, high, counts = paired(per_task["before"], per_task["after"], rng)
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {mean:+.1%} [{low:+.1%}, {high:+.1%}] | {counts} |")
    return lines


def reward_curve(metrics_file: Path, window: int = 10) -> str:
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    rewards = [r["reward"] for r in rows if r.get("reward") is not None]
    first, last = np.mean(rewards[:window]), np.mean(rewards[-window:])
    return (f"reward curve: {len(rewards)} steps, mean of the first {window} steps {first:.2f}, of the last {window} "
            f"{last:.2f} (max {MAX_TOTAL}); per-step values in {metrics_file}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--n", type=int, default=8, help="samples per task")
    parser.add_argument("--tasks", type=int, default=20, help="tasks evaluated per split")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="outputs/tiny-model")
    parser.add_argument("--out", default="outputs/learning")
    parser.add_argument("--train-args", default="", help="extra train.py flags, e.g. '--lr 1e-3'")
    args = parser.parse_args(argv)
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    from rust_rewards.train.tiny_model import build_tiny_model

    model = str(build_tiny_model(ROOT / args.model))
    splits = split(args.seed)
    train_file = write_jsonl(splits["train"], out / "train_tasks.jsonl")
    eval_files = {name: write_jsonl(rows[: args.tasks], out / f"eval_{name}.jsonl") for name, rows in splits.items()}
    sampling = ["--n", str(args.n), "--temperature", str(args.temperature), "--top-p", "1.0",
                "--max-new-tokens", "128", "--seed", str(args.seed), "--backend", "hf"]
    times: dict[str, float] = {}

    def predict(label: str, extra: list[str]) -> None:
        for name, file in eval_files.items():
            times[f"inference {label}"] = times.get(f"inference {label}", 0.0) + run(
                "inference.py", "--model", model, *extra, "--tasks", str(file), "--out",
                str(out / f"pred_{label}_{name}.parquet"), "--name", label, *sampling)

    predict("before", [])
    run_dir = out / "run"
    times["train"] = run("train.py", "--preset", "tiny", "--model", model, "--data", str(train_file),
                         "--output-dir", str(run_dir), "--max-steps", str(args.steps), "--resume", "auto",
                         "--seed", str(args.seed), *args.train_args.split())
    predict("after", ["--adapter", str(run_dir / "adapter")])
    lines = [f"learning benchmark: tiny model, {len(splits['train'])} training tasks, {len(splits['held-out'])} "
             f"held-out tasks, {args.steps} GRPO steps, sampling temperature {args.temperature}"]
    for name, file in eval_files.items():
        eval_dir = out / f"eval_{name}"
        times[f"eval {name}"] = run("eval.py", "--tasks", str(file), "--predictions",
                                    str(out / f"pred_before_{name}.parquet"), "--predictions",
                                    str(out / f"pred_after_{name}.parquet"), "--out", str(eval_dir), "--k", "1")
        lines += report(pd.read_parquet(eval_dir / "results.parquet"), f"{name} split", args.seed)
    lines += ["", reward_curve(run_dir / "metrics.jsonl"),
              "wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
              + f"; total {time.monotonic() - start:.0f} s"]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
