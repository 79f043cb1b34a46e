"""What the static required-item check costs (``rust_rewards.rust.signatures.check_items``, run on every completion
before it is compiled): cold, with a new completion, and cached, side by side.

    .venv/bin/python benchmarks/signatures.py [--rounds 3] [--calls 20] [--min-lines 40] [--max-lines 70]

For each bundled task whose reference solution has ``--min-lines`` to ``--max-lines`` lines, with two specs (the
reference itself, and the task's prompt as prose): ``cold``, both caches emptied before each call (a new task);
``new code``, the spec's requirements cached and the completion new (the reference with a numbered comment: a GRPO
step's case); ``cached``, the same call again. Each is the best of ``--rounds`` rounds of ``--calls`` calls, per
call; the table holds their median and maximum over the tasks, and the ratios to ``cached``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rust_rewards.rust.signatures as signatures  # noqa: E402
from rust_rewards.data.bundled import BUNDLED_TASKS  # noqa: E402

CASES = ("cold", "new code", "cached")


def per_call(call: Callable[[int], object], rounds: int, calls: int, before: Callable[[], None] = lambda: None
             ) -> float:
    """The best over ``rounds`` of the mean seconds of ``calls`` calls ``call(i)``, ``before()`` untimed ahead of
    each."""
    best = float("inf")
    for r in range(rounds):
        total = 0.0
        for i in range(calls):
            before()
            start = time.perf_counter()
            call(r * calls + i)
            total += time.perf_counter() - start
        best = min(best, total / calls)
    return best


def clear_caches() -> None:
    for cached in (signatures._spec, signatures._scan, signatures._norm):
        cached.cache_clear()


def timings(code: str, spec: str, rounds: int, calls: int) -> dict[str, float]:
    """Seconds per ``check_items(code, spec)`` call in each of ``CASES``."""
    signatures.check_items(code, spec)
    return {
        "cold": per_call(lambda i: signatures.check_items(f"{code}\n// {i}\n", spec), rounds, calls, clear_caches),
        "new code": per_call(lambda i: signatures.check_items(f"{code}\n// {i}\n", spec), rounds, calls),
        "cached": per_call(lambda i: signatures.check_items(code, spec), rounds, calls),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--min-lines", type=int, default=40)
    parser.add_argument("--max-lines", type=int, default=70)
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in Path(BUNDLED_TASKS).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if args.min_lines <= len(r["reference_code"].splitlines()) <= args.max_lines]
    if not rows:
        parser.error(f"no bundled task has a reference of {args.min_lines} to {args.max_lines} lines")
    print(f"check_items on {len(rows)} bundled tasks (references of {args.min_lines}-{args.max_lines} lines), "
          f"time per call: best of {args.rounds} rounds of {args.calls}; median (max) over the tasks\n")
    print("| spec | " + " | ".join(f"{case} ms" for case in CASES) + " | cold / cached | new code / cached |")
    print("|---|" + "---|" * (len(CASES) + 2))
    for label, spec_of in (("reference", "reference_code"), ("prompt", "prompt")):
        each = [timings(r["reference_code"], r[spec_of], args.rounds, args.calls) for r in rows]
        cells = [f"{statistics.median(t[c] for t in each) * 1e3:.3f} ({max(t[c] for t in each) * 1e3:.3f})"
                 for c in CASES]
        ratios = [statistics.median(t[c] / t["cached"] for t in each) for c in ("cold", "new code")]
        print(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(f"{x:.0f}x" for x in ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
