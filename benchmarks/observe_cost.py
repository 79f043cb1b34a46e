"""What judging hidden tests by their notes costs (``rust_rewards.verify.observe``): the same GRPO-shaped batches
verified with and without it, side by side.

    .venv/bin/python benchmarks/observe_cost.py [--repeats 3] [--tasks 4] [--samples 8] [--modes direct,batch]

A batch is ``--tasks`` easy-tier tasks x ``--samples`` distinct completions each (the reference with a numbered
comment: every one builds and runs every hidden test, the most the notes can cost). Each repeat, per mode, verifies
with a fresh verifier: with notes and an empty reference cache (a run's first step: each task's reference is
compiled and its tests run three times), with notes again (later steps: the cache is warm), and without notes
(``observable`` returning False: the seals alone). Prints the median seconds of each and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rust_rewards.verify.crate as crate  # noqa: E402
import rust_rewards.verify.reference as reference  # noqa: E402
from rust_rewards.data.bundled import EASY_TASKS  # noqa: E402
from rust_rewards.data.importers import load_tasks  # noqa: E402
from rust_rewards.verify.config import VerifierConfig  # noqa: E402
from rust_rewards.verify.observe import observable  # noqa: E402
from rust_rewards.verify.verifier import Verifier  # noqa: E402


def timed(mode: str, codes: list[str], hidden: list, notes: bool) -> tuple[float, list[int]]:
    """Seconds to verify the batch, and each completion's hidden passes."""
    for module in (crate, reference):
        module.observable = observable if notes else (lambda reference: False)
    verifier = Verifier(VerifierConfig(mode=mode), workers=2)
    try:
        start = time.perf_counter()
        reports = verifier.verify_many(codes, hidden, raw_code=True)
        return time.perf_counter() - start, [r.hidden_tests.passed for r in reports]
    finally:
        verifier.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--modes", default="direct,batch")
    args = parser.parse_args()
    tasks = [t for t in load_tasks(str(EASY_TASKS)) if observable(t.reference_code)][: args.tasks]
    codes = [f"{t.reference_code}// sample {k}\n" for t in tasks for k in range(args.samples)]
    hidden = [t.hidden_tests() for t in tasks for _ in range(args.samples)]
    print(f"{len(tasks)} easy tasks x {args.samples} completions, {args.repeats} repeats, 2 workers")
    for mode in args.modes.split(","):
        seconds: dict[str, list[float]] = {"notes, cold": [], "notes, warm": [], "seals alone": []}
        verdicts = set()
        for _ in range(args.repeats):
            reference.TASK_MEMO.clear()
            for label, notes in (("notes, cold", True), ("notes, warm", True), ("seals alone", False)):
                took, passed = timed(mode, codes, hidden, notes)
                seconds[label].append(took)
                verdicts.add(tuple(passed))
        median = {k: statistics.median(v) for k, v in seconds.items()}
        base = median["seals alone"]
        print(f"{mode}: " + ", ".join(f"{k} {v:.2f} s ({v / base:.2f}x)" for k, v in median.items())
              + f"; verdicts identical: {len(verdicts) == 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
