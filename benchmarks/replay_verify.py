"""Replay a training run's logged completions through the verifier's `direct` and `batch` modes, side by side.

    .venv/bin/python benchmarks/replay_verify.py RUN_DIR [--data TASKS] [--steps 51-60] [--repeats 1] [--adaptive]

Reads `RUN_DIR/completions/step_*.parquet` (what train.py logged) and the run's task file (`params.json`'s `data`
unless `--data` names one), and verifies each step's completions as one batch with their tasks' hidden tests, as
the reward functions do: fresh caches per repeat, modes interleaved, medians compared. Prints both times, how many
completions batch mode combined and why the others fell back, and whether every verdict agrees. Without
`--adaptive` every share gets one shared clippy pass (what could be combined); with it, as in training, shares get
each completion's own first pass while recent batches mostly did not build (`verifier.OWN_FIRST_ABOVE`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rust_rewards.data.importers import load_file  # noqa: E402
from rust_rewards.verify.config import VerifierConfig  # noqa: E402
from rust_rewards.verify.verifier import Verifier  # noqa: E402


def _steps(run: Path, spec: str | None) -> list[Path]:
    files = sorted((run / "completions").glob("step_*.parquet"))
    if not files:
        raise SystemExit(f"{run}/completions: no step_*.parquet (is {run} a train.py output folder?)")
    if spec:
        first, _, last = spec.partition("-")
        wanted = range(int(first), int(last or first) + 1)
        files = [f for f in files if int(f.stem.removeprefix("step_")) in wanted]
        if not files:
            raise SystemExit(f"{run}/completions: no logged step in --steps {spec}")
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a train.py output folder")
    parser.add_argument("--data", type=Path, help="the run's task file (default: params.json's data)")
    parser.add_argument("--steps", help="a step or range of steps, e.g. 51-60 (default: all)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--adaptive", action="store_true",
                        help="own first passes while recent batches mostly did not build (as in training)")
    args = parser.parse_args(argv)
    data = args.data or Path(json.loads((args.run / "params.json").read_text())["data"])
    hidden = {task.task_id: task.hidden_tests() for task in load_file(data)}
    steps = [pd.read_parquet(f, columns=["task_id", "completion"]) for f in _steps(args.run, args.steps)]
    unknown = sorted({t for df in steps for t in df.task_id} - hidden.keys())
    if unknown:
        raise SystemExit(f"{data}: no task {unknown[0]!r} (and {len(unknown) - 1} more) logged in {args.run}")
    times: dict[str, list[float]] = {"direct": [], "batch": []}
    verdicts: dict[str, list] = {}
    stats: dict = {}
    for repeat in range(args.repeats):
        for mode in (("direct", "batch") if repeat % 2 == 0 else ("batch", "direct")):
            verifier = Verifier(VerifierConfig(mode=mode), workers=args.workers, adaptive=args.adaptive)
            start = time.perf_counter()
            reports = [r for df in steps
                       for r in verifier.verify_many(list(df.completion), [hidden[t] for t in df.task_id])]
            times[mode].append(time.perf_counter() - start)
            verdicts[mode] = [r.verdict() for r in reports]
            if mode == "batch":
                stats = {**verifier.stats, "reasons": dict(verifier.fallback_reasons.most_common())}
            verifier.close()
    n = len(verdicts["direct"])
    same = sum(a == b for a, b in zip(verdicts["direct"], verdicts["batch"], strict=True))
    direct, batch = (statistics.median(times[m]) for m in ("direct", "batch"))
    print(f"{args.run}: {len(steps)} steps, {n} completions, {stats['verified']} verified (distinct per step)")
    print(f"direct {direct:.2f} s  batch {batch:.2f} s  direct/batch {direct / batch:.2f}x  "
          f"(medians of {args.repeats}; runs {({m: [round(t, 2) for t in ts] for m, ts in times.items()})})")
    print(f"batch: {stats['combined']} combined, {stats['settled']} settled by their own first pass, "
          f"{stats['fallback']} one by one {stats['reasons']}; "
          f"{stats['own_first_shares']} shares with own first passes")
    print(f"verdicts agree: {same}/{n}")
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
