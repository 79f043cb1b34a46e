"""Peak memory and time of one GRPO step on CPU, per micro-batch setting, side by side in one run.

    .venv/bin/python benchmarks/step_memory.py [--preset smollm2-cpu] [--settings 16x1,4x4] [--repeats 1]

Each setting (``BATCHxACCUMULATION``: ``--per-device-train-batch-size`` x ``--gradient-accumulation-steps``, the
same completions per step) runs ``train.py --preset P --max-steps 1 --pass-rate-k 0`` in a fresh process and folder;
settings alternate when repeated. Prints, per run, the peak resident memory of the training process (its
``ru_maxrss``, read by a wrapper process that runs nothing else) beside the peak ``train.py`` expected
(``rust_rewards.train.cpu_memory``), the step's time and its parts (generation,
rewards, the rest: the loss's forward and backward passes and the optimizer), and the medians per setting.
Extra ``train.py`` flags go after ``--``.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


def run_once(preset: str, batch: int, accumulation: int, extra: list[str]) -> dict[str, float]:
    """One ``train.py`` step in a child process: its peak RSS (GiB) and its metrics."""
    with tempfile.TemporaryDirectory(prefix="rr-step-memory-") as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, str(ROOT / "train.py"), "--preset", preset, "--max-steps", "1", "--pass-rate-k", "0",
               "--per-device-train-batch-size", str(batch), "--gradient-accumulation-steps", str(accumulation),
               "--output-dir", str(out), *extra]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"train.py failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / GIB  # KiB on Linux
        row = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
        said = re.search(r"^memory: about ([0-9.]+) GiB", done.stdout, re.M)
    step = row["step_time"]
    generation, rewards = row.get("generation_time", 0.0), row.get("reward_time", 0.0)
    return {"peak_gib": peak, "expected_gib": float(said.group(1)) if said else float("nan"), "step_s": step,
            "generation_s": generation, "rewards_s": rewards,
            "rest_s": step - generation - rewards}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="smollm2-cpu")
    parser.add_argument("--settings", default="16x1,4x4", help="BATCHxACCUMULATION, comma-separated")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.child:  # a wrapper that runs one step and nothing else: its children's ru_maxrss is that step's
        batch, accumulation = map(int, args.child.split("x"))
        print(json.dumps(run_once(args.preset, batch, accumulation, extra)))
        return
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    results: dict[str, list[dict[str, float]]] = {s: [] for s in settings}
    for repeat in range(args.repeats):
        for setting in settings:
            done = subprocess.run([sys.executable, __file__, "--preset", args.preset, "--child", setting, "--",
                                   *extra], capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(done.stderr.strip()[-2000:] or f"setting {setting} failed")
            r = json.loads(done.stdout.strip().splitlines()[-1])
            results[setting].append(r)
            print(f"run {repeat + 1} {setting:>5}: peak {r['peak_gib']:.2f} GiB (train.py expected "
                  f"{r['expected_gib']:.1f}), step {r['step_s']:.1f} s "
                  f"(generation {r['generation_s']:.1f} s, rewards {r['rewards_s']:.1f} s, "
                  f"loss and optimizer {r['rest_s']:.1f} s)", flush=True)
    base = settings[0]
    for setting in settings:
        peak = statistics.median(r["peak_gib"] for r in results[setting])
        rest = statistics.median(r["rest_s"] for r in results[setting])
        step = statistics.median(r["step_s"] for r in results[setting])
        ratio = peak / statistics.median(r["peak_gib"] for r in results[base])
        print(f"median {setting:>5}: peak {peak:.2f} GiB ({ratio:.2f}x {base}), step {step:.1f} s, "
              f"loss and optimizer {rest:.1f} s")


if __name__ == "__main__":
    main()
