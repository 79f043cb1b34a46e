"""Time eval.py on 500 predictions built from the bundled tasks (references and broken variants).

    .venv/bin/python benchmarks/eval_500.py [--n 500]

Each task contributes its reference solution and variants: a syntax error, a type error, a clippy finding,
a model-written test module, and a completion without code. eval.py then scores them as a script, with the
hidden reference tests, on all cores; the wall time and the per-model rates are printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
FENCE = "```"


def variants(code: str) -> dict[str, str]:
    """The reference and five ways a model gets it wrong, as completion texts."""
    return {
        "reference": code,
        "syntax_error": code.rstrip().rstrip("}"),
        "type_error": code + '\npub fn broken_helper() -> u8 {\n    "not a number"\n}\n',
        "clippy": code + "\npub fn is_empty_list(v: &Vec<i32>) -> bool {\n    v.len() == 0\n}\n",
        "own_tests": code + "\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn trivial() {\n"
                            "        assert!(true);\n    }\n}\n",
        "no_code": "",
    }


def build_predictions(n: int) -> pd.DataFrame:
    tasks = [json.loads(line) for line in TASKS.read_text().splitlines() if line.strip()]
    rows = []
    pairs = itertools.cycle([(task, kind, text) for task in tasks
                             for kind, text in variants(task["reference_code"]).items()])
    samples: dict[tuple[str, str], int] = {}
    for task, kind, text in itertools.islice(pairs, n):
        key = (kind, task["task_id"])
        samples[key] = samples.get(key, -1) + 1
        completion = f"Solution:\n{FENCE}rust\n{text}\n{FENCE}\n" if text else "I am not sure how to do this."
        rows.append({"model": kind, "task_id": task["task_id"], "sample": samples[key], "completion": completion})
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        preds = Path(tmp) / "predictions.parquet"
        predictions = build_predictions(args.n)
        predictions.to_parquet(preds)
        start = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "eval.py"), "--tasks", str(TASKS), "--predictions", str(preds),
                        "--out", str(Path(tmp) / "eval"), "--k", "1"], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        summary = json.loads((Path(tmp) / "eval" / "summary.json").read_text())
    distinct = predictions["completion"].nunique()
    print(f"eval.py on {args.n} predictions ({distinct} distinct texts; repeats of a task's variant hit the cache): "
          f"{seconds:.1f} s wall, process start and writing included")
    for model, s in summary.items():
        print(f"  {model:13s} n={s['n']:3d} build {s['build_rate']:.2f} clippy {s['clippy_rate']:.2f} "
              f"test {s['test_rate']:.2f} hidden pass@1 {s['hidden_pass_at_1']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
