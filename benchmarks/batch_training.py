"""Does the batch verifier lower `reward_share` in training? A preset in `direct` and `batch` mode, side by side.

    .venv/bin/python benchmarks/batch_training.py [--preset tiny|smollm2-cpu] [--tasks bundled|easy|exemplar]
        [--temperature 1.0] [--max-steps 8] [--repeats 1] [--out outputs/batch-training] [-- TRAIN.PY FLAGS...]

Runs `train.py --preset PRESET --verifier-mode direct|batch` with the same seed (modes interleaved per repeat) and
prints each mode's mean `reward_share` and reward time per step, and whether every step's rewards were identical.
Flags after `--` go to both train.py runs (e.g. `-- --per-device-train-batch-size 32` for the real preset's 4
prompts x 8 generations per step).

`--tasks bundled` trains on the bundled tasks, as `train.py --preset tiny` does; `--tasks easy` on the easy tier
(what `smollm2-cpu` learns on: `-- --init-adapter SFT_RUN/adapter` starts from a supervised adapter). The tiny model
answers the bundled tasks with one of its warm-start programs whatever the task, so almost nothing compiles against
their hidden tests and there is little to combine. `--tasks exemplar` trains on one task per built-in warm-start
program (`tiny_model.BUILTIN_EXEMPLARS`: its prompt, its code as the reference, its assertion as the hidden test),
the only tasks the tiny model answers with code that compiles against the hidden tests: a stand-in for a model whose
completions mostly compile. `benchmarks/replay_verify.py OUT/direct` says, per completion, what was combined.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rust_rewards.atomic import write_text_atomic  # noqa: E402
from rust_rewards.data.bundled import EASY_TASKS  # noqa: E402
from rust_rewards.train.tiny_model import BUILTIN_EXEMPLARS  # noqa: E402

MODES = ("direct", "batch")


def exemplar_tasks() -> str:
    """One jsonl row per built-in warm-start program."""
    rows = []
    for ex in BUILTIN_EXEMPLARS:
        tests = f"#[test]\nfn hidden_{ex.name}() {{\n    {ex.assertion}\n}}\n"
        rows.append({"task_id": f"exemplar-{ex.name}", "prompt": ex.prompts[0], "reference_code": ex.code,
                     "reference_tests": tests, "test_shape": "unit"})
    return "".join(json.dumps(row) + "\n" for row in rows)


def _train(out: Path, mode: str, data: str | None, args: argparse.Namespace, extra: list[str]) -> list[dict]:
    run = out / mode
    cmd = [sys.executable, "train.py", "--preset", args.preset, "--verifier-mode", mode, "--output-dir", str(run),
           "--resume", "no", "--max-steps", str(args.max_steps), "--temperature", str(args.temperature)]
    if data:
        cmd += ["--data", data]
    cmd += extra
    shutil.rmtree(run, ignore_errors=True)  # a fresh run each time: same seed, same prompts
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [row for row in rows if "reward_share" in row]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=("tiny", "smollm2-cpu"), default="tiny")
    parser.add_argument("--tasks", choices=("bundled", "easy", "exemplar"), default="bundled")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "batch-training")
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:split]), argv[split + 1 :]
    args.out.mkdir(parents=True, exist_ok=True)
    data = str(EASY_TASKS) if args.tasks == "easy" else None
    if args.tasks == "exemplar":
        data = str(args.out / "exemplar_tasks.jsonl")
        write_text_atomic(exemplar_tasks(), data)
    share: dict[str, list[float]] = {m: [] for m in MODES}
    seconds: dict[str, list[float]] = {m: [] for m in MODES}
    rewards: dict[str, list[float]] = {}
    for repeat in range(args.repeats):
        for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
            rows = _train(args.out, mode, data, args, extra)
            share[mode].append(statistics.mean(r["reward_share"] for r in rows))
            seconds[mode].append(statistics.mean(r["reward_time"] for r in rows))
            rewards[mode] = [round(r["reward"], 6) for r in rows]
    print(f"{args.preset} preset, {args.tasks} tasks, temperature {args.temperature}, {args.max_steps} steps "
          f"{' '.join(extra)}, medians of {args.repeats}")
    for mode in MODES:
        print(f"{mode:>6}: reward_share {statistics.median(share[mode]):.3f}  "
              f"reward_time {statistics.median(seconds[mode]):.2f} s/step  (runs {[round(x, 3) for x in share[mode]]})")
    ratio = statistics.median(share["batch"]) / statistics.median(share["direct"])
    same = rewards["direct"] == rewards["batch"]
    print(f"batch / direct reward_share {ratio:.2f}; every step's reward identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
