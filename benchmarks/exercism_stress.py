"""Stress check of verdict stability: the Exercism references verified several rounds in a row while other
processes keep every core busy; the same code must get the same verdict every round.

Each reference is verified as a completion with a trailing comment (so it is not the reference itself: its hidden
tests are judged by their notes against the reference's own runs, as any answer's), ``--rounds`` times, each round by
a fresh ``Verifier`` (fresh cache) in ``--mode``, with ``--load`` busy-looping processes beside it (default: one per
core, as two pytest-xdist workers keep a 2-core machine busy). Prints each round's totals, then every task whose
verdict differed between rounds with each round's hidden failures (``TestCounts.failures``: which test, and why).
Exit code 1 when any verdict differed.

    .venv/bin/python benchmarks/exercism_stress.py [--rounds 3] [--load 2] [--mode direct] [--only ID]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from multiprocessing.synchronize import Event
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rust_rewards.data.importers import TaskSourceError, load_tasks  # noqa: E402
from rust_rewards.verify.config import MODES, VerifierConfig  # noqa: E402
from rust_rewards.verify.verifier import Verifier  # noqa: E402

EXERCISM = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "exercism_rust.jsonl"


def _spin(stop: Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=str(EXERCISM), help="task file (default: ../shared's Exercism set)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes beside the verifier")
    parser.add_argument("--mode", choices=MODES, default="direct")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="only tasks whose id contains this (e.g. doubly-linked-list)")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds: at least 2 (verdicts are compared between rounds)")
    try:
        tasks = [t for t in load_tasks(args.tasks)
                 if t.reference_code.strip() and t.hidden_tests() is not None and args.only in t.task_id]
    except (OSError, ValueError, TaskSourceError) as exc:
        print(f"error: --tasks {args.tasks}: {exc}", file=sys.stderr)
        return 2
    codes = [t.reference_code.rstrip() + "\n// an answer, not the reference\n" for t in tasks]
    hidden = [t.hidden_tests() for t in tasks]
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    rounds = []
    try:
        for k in range(args.rounds):
            verifier = Verifier(VerifierConfig(mode=args.mode), workers=args.workers)
            start = time.perf_counter()
            try:
                reports = verifier.verify_many(codes, hidden, raw_code=True)
            finally:
                verifier.close()
            took = time.perf_counter() - start
            verdicts = [(r.build_ok, r.hidden_tests.passed if r.hidden_tests else None,
                         r.hidden_tests.failures if r.hidden_tests else (), r.internal_error[:200]) for r in reports]
            rounds.append(verdicts)
            passed = sum(v[1] or 0 for v in verdicts)
            total = sum(r.hidden_tests.expected for r in reports if r.hidden_tests)
            print(f"round {k + 1}: {len(tasks)} references, {args.mode}, {args.load} busy processes beside, "
                  f"{took:.1f} s: hidden tests passed {passed} of {total}, "
                  f"all hidden passed {sum(r.hidden_ok for r in reports)}, internal errors "
                  f"{sum(bool(r.internal_error) for r in reports)}", flush=True)
    finally:
        stop.set()
        for p in spinners:
            p.join(timeout=5)
    differing = [i for i in range(len(tasks)) if len({r[i] for r in rounds}) > 1]
    print(f"verdicts identical in every round: {not differing} ({len(differing)} of {len(tasks)} tasks differ)")
    for i in differing:
        print(f"  {tasks[i].task_id}:")
        for k, r in enumerate(rounds):
            print(f"    round {k + 1}: build {r[i][0]}, hidden passed {r[i][1]}, failures {list(r[i][2])} "
                  f"{r[i][3]}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
