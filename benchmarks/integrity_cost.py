"""What the own-test checks cost: the same completions verified with and without their variants, side by side.

    .venv/bin/python benchmarks/integrity_cost.py [--repeats 3] [--workers 2]

Two workloads, both `direct` mode: the bench corpus (`benchmarks/corpus`, no task: the own tests run against two
mutants of the completion itself) and the integrity corpus against the `add` task with its reference, in the unit
shape (the own tests run against the reference and a wrong mutant of it). Each repeat verifies each workload
with a fresh verifier twice, interleaved: with the variants (what the rewards use) and without them
(`reference.task_variants` returning none: the seals and per-test processes stay). The reference's wrong mutant is
chosen once per task and process (`reference.wrong_variant`); its one-off cost is measured on its own first.
Prints medians per completion and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rust_rewards.verify.batch as batch  # noqa: E402
import rust_rewards.verify.reference as reference  # noqa: E402
import rust_rewards.verify.single as single  # noqa: E402
from rust_rewards.rust.extract import extract_rust  # noqa: E402
from rust_rewards.tasks import HiddenTests  # noqa: E402
from rust_rewards.verify.config import VerifierConfig  # noqa: E402
from rust_rewards.verify.verifier import Verifier  # noqa: E402

FORGERY = ROOT / "tests" / "adversarial" / "forgery"


def workloads() -> dict[str, tuple[list[str], list[HiddenTests | None]]]:
    corpus = [extract_rust(p.read_text()) for p in sorted((ROOT / "benchmarks" / "corpus").glob("*.md"))]
    add = HiddenTests((FORGERY / "hidden" / "unit.rs").read_text(), shape="unit",
                      reference=(FORGERY / "honest_right.rs").read_text().split("\n", 1)[1],
                      prompt=(FORGERY / "task.md").read_text())
    integrity = [p.read_text() for p in sorted((ROOT / "tests" / "adversarial" / "integrity").glob("*.rs"))]
    return {"bench corpus (mutants of the completion)": (corpus, [None] * len(corpus)),
            "integrity corpus, add task (reference + wrong mutant)": (integrity, [add] * len(integrity))}


def timed(codes: list[str], hidden: list[HiddenTests | None], workers: int, variants: bool) -> float:
    original = single.task_variants
    if not variants:
        single.task_variants = batch.task_variants = lambda *args, **kwargs: ()
    try:
        verifier = Verifier(VerifierConfig(), workers=workers)
        start = time.perf_counter()
        verifier.verify_many(codes, hidden, raw_code=True)
        seconds = time.perf_counter() - start
        verifier.close()
    finally:
        single.task_variants = batch.task_variants = original
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    loads = workloads()
    _codes, hidden = loads["integrity corpus, add task (reference + wrong mutant)"]
    start = time.perf_counter()
    reference.wrong_variant(hidden[0], VerifierConfig(), 0, single.verify_code)
    print(f"wrong mutant of the add reference chosen once: {time.perf_counter() - start:.2f} s")
    for name, (codes, hidden) in loads.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeats):
            for variants in (False, True):
                times[variants].append(timed(codes, hidden, args.workers, variants))
        without, with_ = (statistics.median(times[v]) / len(codes) for v in (False, True))
        print(f"{name}: {len(codes)} completions, {args.workers} workers; per completion: "
              f"{without * 1000:.0f} ms without the variants, {with_ * 1000:.0f} ms with them "
              f"({with_ / without:.2f}x)")


if __name__ == "__main__":
    main()
