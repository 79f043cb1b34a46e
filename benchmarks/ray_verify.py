"""Verification through Ray vs local, side by side on the same GRPO-shaped batch, in one run.

    .venv/bin/python benchmarks/ray_verify.py [--repeats 3] [--cpus N] [--cpus-per-worker 2]

Local: a ``Verifier`` with ``--cpus`` workers. Ray: a ``Verifier`` over a ``RayExecutor`` on a local Ray instance of
``--cpus`` CPUs (started here), actors of ``--cpus-per-worker`` CPUs. Each repeat uses fresh caches and already
started actors; the two run interleaved and medians are compared. Prints both throughputs, the overhead per batch
and the ratio, and whether every verdict agrees.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rust_rewards.cpus import usable_cpus  # noqa: E402
from rust_rewards.verify.bench import DEFAULT_CORPUS, grpo_batch, load_corpus, report_verdict  # noqa: E402
from rust_rewards.verify.ray import RayExecutor  # noqa: E402
from rust_rewards.verify.verifier import Verifier  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=usable_cpus())
    parser.add_argument("--cpus-per-worker", type=int, default=2)
    args = parser.parse_args(argv)
    batch = [text for _, text in grpo_batch(load_corpus(DEFAULT_CORPUS))]
    times: dict[str, list[float]] = {"local": [], "ray": []}
    verdicts: dict[str, list] = {}
    batches = 0
    for _ in range(args.repeats):
        for name in times:
            if name == "ray":
                remote = RayExecutor(address="local", local_cpus=args.cpus,
                                     cpus_per_worker=min(args.cpus_per_worker, args.cpus))
                remote.worker_pids()  # actors started before the clock
                verifier = Verifier(executor=remote)
            else:
                verifier = Verifier(workers=args.cpus)
            began = time.perf_counter()
            reports = verifier.verify_many(batch)
            times[name].append(time.perf_counter() - began)
            verdicts.setdefault(name, [report_verdict(r) for r in reports])
            batches = verifier.stats.get("batches", batches)
            verifier.close()
    local, ray = statistics.median(times["local"]), statistics.median(times["ray"])
    distinct = len(set(batch))
    print(f"GRPO-shaped batch: {len(batch)} completions ({distinct} distinct), {args.cpus} CPUs, "
          f"{args.repeats} interleaved repeats, medians")
    print(f"local: {local:.2f} s, {len(batch) / local:.2f} completions/s")
    print(f"ray:   {ray:.2f} s, {len(batch) / ray:.2f} completions/s ({batches} actor calls, actors of "
          f"{min(args.cpus_per_worker, args.cpus)} CPUs)")
    print(f"ray / local time: {ray / local:.2f}x; overhead {ray - local:+.2f} s per batch "
          f"({(ray - local) / max(batches, 1) * 1000:+.0f} ms per actor call)")
    same = verdicts["local"] == verdicts["ray"]
    print(f"verdicts identical: {same} ({len(batch)} completions)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
