"""Command line: ``python -m rust_rewards check FILE...`` prints one JSON object per file.

A ``.rs`` file is scored as Rust source; any other file as a model completion (its ```rust blocks). With
``--mode batch`` the files are verified as one batch, as training verifies a step's completions (how many were
combined is printed to stderr).
``python -m rust_rewards bench`` runs the throughput benchmark (see ``rust_rewards.verify.bench``).
``python -m rust_rewards notes`` counts, per shipped task set (or ``--tasks`` file), the hidden tests judged by std
values (see ``rust_rewards.verify.observe``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rust_rewards.rewards import rewards_from_report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import MODES, VerifierConfig
from rust_rewards.verify.toolchain import ToolchainError
from rust_rewards.verify.verifier import Verifier


def check_record(path: str, report) -> dict:
    """The JSON line the ``check`` command prints for one file."""
    return {
        "path": path,
        "has_code": report.has_code,
        "build_ok": report.build_ok,
        "clippy_ok": report.clippy_ok,
        "clippy_warnings": list(report.clippy_warnings),
        "tests_passed": report.own_tests.passed,
        "tests_failed": report.own_tests.failed,
        "tests_ignored": report.own_tests.ignored,
        "tests_ok": report.tests_ok,
        "hidden_passed": None if report.hidden_tests is None else report.hidden_tests.passed,
        "hidden_total": None if report.hidden_tests is None else report.hidden_tests.expected,
        "hidden_failures": [] if report.hidden_tests is None else list(report.hidden_tests.failures),
        "timed_out": list(report.timed_out),
        "error_codes": list(report.error_codes),
        "forbidden": list(report.source.forbidden),
        "hack_reasons": list(report.hack_reasons),
        "off_task": list(report.off_task),
        "own_tests_valid": report.own_checks.valid if report.own_checks.ran else None,
        "own_tests_discriminating": report.own_checks.discriminating if report.own_checks.ran else None,
        "rewards": rewards_from_report(report),
        "durations": report.durations,
        "isolation": list(report.isolation),
        "diagnostics": report.diagnostics,
        "internal_error": report.internal_error,
    }


def _check(args: argparse.Namespace) -> int:
    hidden = None
    if args.hidden_tests:
        hidden = HiddenTests(Path(args.hidden_tests).read_text(), shape=args.test_shape, crate_name=args.crate_name,
                             reference=Path(args.reference).read_text() if args.reference else "",
                             prompt=Path(args.prompt).read_text() if args.prompt else "")
    verifier = Verifier(VerifierConfig(mode=args.mode), workers=args.workers)
    texts, raw = [], []
    for name in args.files:
        path = Path(name)
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: cannot read {name}: {exc}", file=sys.stderr)
            return 2
        raw.append(path.suffix == ".rs")
    if args.mode == "batch":
        reports = [None] * len(texts)
        for as_raw in (True, False):  # verify_many takes one kind of text per call
            picked = [i for i, r in enumerate(raw) if r == as_raw]
            for i, report in zip(picked, verifier.verify_many([texts[i] for i in picked], [hidden] * len(picked),
                                                              raw_code=as_raw), strict=True):
                reports[i] = report
        stats = verifier.stats
        print(f"batch: {stats['combined']} of {len(texts)} files verified combined in one crate, "
              f"{stats['fallback']} alone ({dict(verifier.fallback_reasons)})", file=sys.stderr)
    else:
        futures = [verifier.submit(t, hidden, raw_code=r) for t, r in zip(texts, raw, strict=True)]
        reports = [f.result() for f in futures]
    for name, report in zip(args.files, reports, strict=True):
        record = check_record(name, report)
        if not args.diagnostics:
            record.pop("diagnostics")
        print(json.dumps(record), flush=True)
    verifier.close()
    return 0


def _notes(args: argparse.Namespace) -> int:
    from rust_rewards.data.bundled import BUNDLED_TASKS, EASY_TASKS, LOOP_TASKS, MEDIUM_TASKS
    from rust_rewards.data.importers import TaskSourceError, load_tasks
    from rust_rewards.verify.coverage import note_coverage

    files = [Path(f) for f in args.tasks] or [BUNDLED_TASKS, EASY_TASKS, LOOP_TASKS, MEDIUM_TASKS]
    sets = {}
    for path in files:  # every file read before any is run
        try:
            sets[path] = load_tasks(str(path))
        except (OSError, ValueError, TaskSourceError) as exc:
            print(f"error: --tasks {path}: {exc}", file=sys.stderr)
            return 2
    for path, tasks in sets.items():
        counts = note_coverage([t.hidden_tests() for t in tasks], VerifierConfig(), workers=args.workers)
        total = {k: sum(getattr(c, k) for c in counts) for k in ("tests", "judged", "opaque", "silent", "unstable")}
        errors = sum(bool(c.error) for c in counts)
        print(f"{path.name}: {len(tasks)} tasks, {total['tests']} hidden tests: {total['judged']} judged by std "
              f"values; by their seal alone: {total['opaque']} comparing a value of the solution's type, "
              f"{total['silent']} comparing nothing, {total['unstable']} noted differently by the reference's own "
              f"runs; {errors} tasks whose reference failed its run")
        for task, c in zip(tasks, counts, strict=True):
            if c.error or c.judged < c.tests:
                why = f"{c.opaque} opaque, {c.silent} silent, {c.unstable} unstable"
                print(f"  {task.task_id}: " + (c.error or f"{c.judged} of {c.tests} judged by std values ({why})"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rust_rewards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="score Rust files or completion text files")
    check.add_argument("files", nargs="+")
    check.add_argument("--mode", choices=MODES, default="direct")
    check.add_argument("--workers", type=int, default=None)
    check.add_argument("--hidden-tests", help="a file of reference tests to run against every file")
    check.add_argument("--test-shape", default="unit", choices=("unit", "integration", "main"))
    check.add_argument("--crate-name", default="solution")
    check.add_argument("--reference", help="the task's reference solution (required items, signatures, and what "
                                           "the files' own tests are checked against); needs --hidden-tests")
    check.add_argument("--prompt", help="the task prompt (required signatures when there is no --reference)")
    check.add_argument("--diagnostics", action="store_true", help="include the compiler's rendered messages")
    sub.add_parser("bench", help="benchmark: naive published scoring vs this verifier", add_help=False)
    notes = sub.add_parser("notes", help="count the hidden tests judged by std values, per task set")
    notes.add_argument("--tasks", nargs="*", default=[], help="task files (default: the four shipped sets)")
    notes.add_argument("--workers", type=int, default=2)
    args, rest = parser.parse_known_args(argv)
    try:
        if args.command == "bench":
            from rust_rewards.verify.bench import main as bench_main

            return bench_main(rest)
        if rest:
            parser.error(f"unrecognised arguments: {' '.join(rest)}")
        return _notes(args) if args.command == "notes" else _check(args)
    except ToolchainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
