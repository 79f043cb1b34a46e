"""Throughput benchmark: the naive published way of scoring completions vs this verifier, side by side.

Naive (as the published Rust-GRPO projects do it): for each completion and each of the three cargo-based
reward functions, a fresh temporary crate and one cold ``cargo build`` / ``cargo clippy`` / ``cargo test``,
one after another, no cache, no sandbox. It uses the same crate layout as ours so that verdicts compare.

Ours: one ``Verifier`` (all cores, fresh cache, sandbox on) over the same completions, in today's ``direct``
mode and in ``batch`` mode (a batch's completions compiled together, ``rust_rewards.verify.batch``), with how many
completions batch mode verified one by one and why.

Two workloads: every completion of the corpus once (all distinct), and a GRPO-shaped batch of 4 prompts x 8
completions where a quarter of each group repeats another member exactly. Prints the three throughputs, the
ratios, and whether every verdict agrees.

    python -m rust_rewards bench [--corpus benchmarks/corpus] [--workers N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rust_rewards.report import Report
from rust_rewards.rust.extract import extract_rust
from rust_rewards.rust.lexer import count_test_fns
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.crate import write_crate
from rust_rewards.verify.diagnostics import parse_compiler, parse_libtest
from rust_rewards.verify.toolchain import find_toolchain
from rust_rewards.verify.verifier import Verifier

DEFAULT_CORPUS = Path(__file__).with_name("corpus")
"""The benchmark corpus shipped with the package (``benchmarks/corpus`` in a checkout)."""
Verdict = tuple


def load_corpus(folder: Path) -> list[tuple[str, str]]:
    """(name, completion text) for every file in ``folder``, sorted by name; a ``.rs`` file is Rust source (as
    ``check`` reads it), given to every scorer as a completion holding that one block."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if not files:
        raise SystemExit(f"no completion files in {folder}")
    texts = [p.read_text(encoding="utf-8") for p in files]
    return [(p.name, f"```rust\n{t}\n```" if p.suffix == ".rs" else t) for p, t in zip(files, texts, strict=True)]


def grpo_batch(corpus: list[tuple[str, str]], prompts: int = 4, group: int = 8) -> list[tuple[str, str]]:
    """``prompts`` groups of ``group`` completions; the last quarter of each group repeats earlier members."""
    distinct = group - group // 4
    batch = []
    for g in range(prompts):
        members = [corpus[(g * distinct + i) % len(corpus)] for i in range(distinct)]
        batch += members + members[: group - distinct]
    return batch


def _cargo(cargo: str, crate: Path, args: list[str], timeout: float) -> tuple[int, str]:
    proc = subprocess.Popen([cargo, args[0], "--offline", *args[1:]], cwd=crate, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -9, out
    return proc.returncode, out


def naive_verdict(text: str, timeout: float = 60.0) -> Verdict:
    """Score one completion the published way: three fresh crates, three cold cargo commands."""
    code = extract_rust(text)
    if not code.strip():
        return verdict_tuple(False, False, (), None)
    cargo = str(find_toolchain().cargo)
    results = {}
    for reward, args in (("build", ["build", "--message-format=json"]),
                         ("clippy", ["clippy", "--message-format=json"]),
                         ("test", ["test", "--no-fail-fast", "--", "--test-threads=1"])):
        root = Path(tempfile.mkdtemp(prefix="rr-naive-"))
        try:
            write_crate(root, code, None)
            (root / "src" / "lib.rs").write_text(code)  # as published: the code as it is, no seals
            results[reward] = _cargo(cargo, root, args, timeout)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    build_ok = results["build"][0] == 0
    lints = tuple(sorted(lint.removeprefix("clippy::") for lint in parse_compiler(results["clippy"][1]).clippy_lints))
    tests = None
    if build_ok and count_test_fns(code):
        run = parse_libtest(results["test"][1])
        tests = (run.passed, run.failed, run.summary_seen)
    return verdict_tuple(True, build_ok, lints, tests)


def verdict_tuple(has_code: bool, build_ok: bool, lints: tuple[str, ...], tests) -> Verdict:
    return (has_code, build_ok, build_ok and not lints, lints if build_ok else (), tests)


def report_verdict(r: Report) -> Verdict:
    tests = None
    if r.build_ok and r.source.test_fns:
        tests = (r.own_tests.passed, r.own_tests.failed, r.own_tests.summary_seen)
    return verdict_tuple(r.has_code, r.build_ok, tuple(sorted(r.clippy_warnings)), tests)


def _verify(items: list[tuple[str, str]], workers: int | None, mode: str) -> tuple[float, list[Report], Verifier]:
    verifier = Verifier(VerifierConfig(mode=mode), workers=workers)
    start = time.perf_counter()
    reports = verifier.verify_many([text for _name, text in items])
    seconds = time.perf_counter() - start
    verifier.close()
    return seconds, reports, verifier


def _measure(items: list[tuple[str, str]], workers: int | None, repeats: int) -> dict:
    """Naive, direct and batch alternately, ``repeats`` times each; medians of the wall-clock times."""
    times: dict[str, list[float]] = {"naive": [], "ours": [], "batch": []}
    for _ in range(repeats):
        start = time.perf_counter()
        naive = [naive_verdict(text) for _name, text in items]
        times["naive"].append(time.perf_counter() - start)
        seconds, reports, _ = _verify(items, workers, "direct")
        times["ours"].append(seconds)
        seconds, batch_reports, batch = _verify(items, workers, "batch")
        times["batch"].append(seconds)
    ours = [report_verdict(r) for r in reports]
    batched = [report_verdict(r) for r in batch_reports]
    median = {label: statistics.median(values) for label, values in times.items()}
    pairs = list(zip(items, naive, ours, batched, strict=True))
    return {
        "completions": len(items),
        "repeats": repeats,
        **{f"{label}_s": seconds for label, seconds in median.items()},
        **{f"{label}_per_s": len(items) / seconds for label, seconds in median.items()},
        "ratio": median["naive"] / median["ours"],
        "batch_ratio": median["naive"] / median["batch"],
        "verdicts_agree": all(a == b == c for _, a, b, c in pairs),
        "batch_matches_direct": all(r.verdict() == b.verdict() for r, b in zip(reports, batch_reports, strict=True)),
        "batch_combined": batch.stats["combined"],
        "batch_fallbacks": dict(batch.fallback_reasons),
        "details": {name: {"naive": a, "ours": b, "batch": c} for (name, _), a, b, c in pairs if not a == b == c},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_rewards bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder of completion files")
    parser.add_argument("--workers", type=int, default=None, help="verifier workers (default: all cores)")
    parser.add_argument("--prompts", type=int, default=4, help="GRPO-shaped batch: number of prompts")
    parser.add_argument("--group", type=int, default=8, help="GRPO-shaped batch: completions per prompt")
    parser.add_argument("--repeats", type=int, default=1, help="alternate naive/direct/batch this many times (medians)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    corpus = load_corpus(args.corpus)
    print(f"machine: {os.cpu_count()} cores, {find_toolchain().version}, corpus {args.corpus} "
          f"({len(corpus)} completions)", flush=True)
    results = {}
    workloads = (("distinct", corpus),
                 (f"grpo_{args.prompts}x{args.group}", grpo_batch(corpus, args.prompts, args.group)))
    for label, items in workloads:
        res = _measure(items, args.workers, args.repeats)
        results[label] = res
        print(f"{label:9s} n={res['completions']:3d}  naive {res['naive_per_s']:.2f}/s ({res['naive_s']:.2f} s)  "
              f"direct {res['ours_per_s']:.2f}/s ({res['ours_s']:.2f} s) ratio {res['ratio']:.2f}x  "
              f"batch {res['batch_per_s']:.2f}/s ({res['batch_s']:.2f} s) ratio {res['batch_ratio']:.2f}x  "
              f"verdicts agree: {res['verdicts_agree'] and res['batch_matches_direct']}", flush=True)
        fallbacks = sum(res["batch_fallbacks"].values())
        print(f"{'':9s} batch: {res['batch_combined']} combined, {fallbacks} one by one "
              f"{res['batch_fallbacks'] or ''}", flush=True)
        for name, d in res["details"].items():
            print(f"  DISAGREE {name}: naive={d['naive']} direct={d['ours']} batch={d['batch']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=list))
    return 0 if all(r["verdicts_agree"] and r["batch_matches_direct"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
