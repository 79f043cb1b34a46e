"""Honest-code corpus: the 95 Exercism reference solutions (human-written code nobody here wrote), each with its own
test file appended as the completion's own tests, must keep every reward an honest answer earns.

Each completion is the task's ``reference_solution`` plus ``// honest`` (so it is not the reference text, which the
verifier judges by its own run) and a ``#[cfg(test)] mod tests { use super::*; ... }`` holding the task's main
test file: its ``crate_ident::`` paths and ``use crate_ident ...`` imports become ``super::`` paths (one ``super``
per module level, so nested test modules reach the crate root), its ``#[ignore]`` attributes are removed (an
ignored own test earns nothing), any inner attribute ``#![...]`` is dropped and inner doc comments (``//!``) become
plain comments. Only the main test file is used: the other test files (``doubly-linked-list``'s leak tests,
``forth``'s allocation attack) define a ``#[global_allocator]``, which cannot live in a child module; they stay in
the hidden tests.

Every completion is verified against the task's hidden tests (raw code, rewards from ``rewards_from_report``); each
must keep the full hidden reward (2.0), get no internal error and no hack reason but those its reference needs
(``REFERENCE_NEEDS``), and the full test reward where its own tests tell it from a mutant. The normal suite checks
the ``QUICK`` tasks in direct mode and the two with a policy (``REFERENCE_NEEDS``) in batch mode, and ``QUICK`` with
``SAMPLE`` in direct mode
(``slow``); the whole corpus in direct mode is a measurement, run on demand (178-385 s on 2 cores: CI's 15 minutes
cannot hold it)::

    .venv/bin/python -m pytest -s tests/verify/test_honest_code.py --corpora all

Every Exercism answer falls back to the direct path in batch mode, so the whole corpus in batch mode would repeat
it. Each run prints its counts, the answers below the full test reward and why, and every answer that loses hidden
reward, has a hack reason, an internal error or a doubt about its own tests, with the line that triggered each
reason (``pytest -s`` shows them on success too). The data is read from ``../shared/benchmarks`` (never copied
here); the tests skip when it is absent.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from conftest import ROOT

from rust_rewards.data.importers import load_tasks
from rust_rewards.report import Report
from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.lexer import tokenize
from rust_rewards.tasks import Task
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
EXERCISM = BENCHMARKS / "exercism_rust.jsonl"

MACRO_DEFINITION = "defines macros (macro_rules!), which hide the items they make from every rule reading the source"
REFERENCE_NEEDS: dict[str, frozenset[str]] = {
    "doubly-linked-list": frozenset({"unsafe code"}),  # its reference is built on raw pointers
    "macros": frozenset({MACRO_DEFINITION}),  # the exercise is to write `hashmap!`
}
"""Hack reasons a task's reference needs itself (by slug): the only ones an honest answer of that task may get."""

def _slug(task: Task) -> str:
    return task.task_id.rsplit("/", 1)[-1]


def own_tests_module(tests: str, crate: str) -> str:
    """An Exercism integration test file (``use crate::*;``, ``crate::f(..)``) as the body of a child module of the
    crate root: the crate's name in a path becomes ``super`` (``super::super`` one ``mod`` further in, and so on),
    ``#[ignore]``/``#[ignore = ".."]`` and inner attributes ``#![...]`` are removed, and inner doc comments
    (``//!``, ``/*!``, which must open their module) become plain comments."""
    tokens = tokenize(tests)  # no whitespace or comment tokens
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the original text
    for lo, hi in zip([0, *(t.end for t in tokens)], [*(t.start for t in tokens), len(tests)], strict=True):
        edits.extend((lo + m.start() + 2, lo + m.start() + 3, "") for m in re.finditer(r"//!|/\*!", tests[lo:hi]))
    braces: list[bool] = []  # one entry per open `{`: whether it opens a `mod` block
    depth = 1  # the module the text goes into is one level below the crate root
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.text == "#" and tok.kind == "punct":
            inner = i + 1 < len(tokens) and tokens[i + 1].text == "!"
            k = i + 1 + inner
            if k < len(tokens) and tokens[k].text == "[":
                end, level = k, 0
                while end < len(tokens):  # the attribute's closing `]`
                    level += tokens[end].kind == "punct" and tokens[end].text in "([{"
                    level -= tokens[end].kind == "punct" and tokens[end].text in ")]}"
                    if level == 0:
                        break
                    end += 1
                if inner or tokens[k + 1].text == "ignore":
                    edits.append((tok.start, tokens[end].end, ""))
                i = end + 1
                continue
        if tok.kind == "punct" and tok.text == "{":
            opens_mod = i >= 2 and tokens[i - 1].kind == "ident" and tokens[i - 2].text == "mod"
            braces.append(opens_mod)
            depth += opens_mod
        elif tok.kind == "punct" and tok.text == "}":
            depth -= braces.pop() if braces else False
        elif tok.kind == "ident" and tok.text == crate:
            before = tokens[i - 1].text if i else ""
            after = tokens[i + 1].text if i + 1 < len(tokens) else ""
            in_path = after == "::" and before not in ("::", ".")
            renamed = after == "as" and before == "use"  # `use crate as alias;`
            if in_path or renamed:
                edits.append((tok.start, tok.end, "::".join(["super"] * depth)))
        i += 1
    out = tests
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return out


def honest_completion(task: Task) -> str:
    """The task's reference with its main test file as its own tests, marked so it is not the reference text."""
    body = own_tests_module(task.reference_tests, task.crate_name)  # not indented: string literals span lines
    return (f"{task.reference_code.rstrip()}\n\n// honest\n#[cfg(test)]\nmod tests {{\nuse super::*;\n\n"
            f"{body.rstrip()}\n}}\n")


def test_own_tests_module_rewrites_paths_per_module_level() -> None:
    tests = ("//! Tests\n#![allow(x)]\nuse demo::*;\nuse demo as d;\nmod inner {\n    use demo::{f, g};\n"
             "    #[test]\n    #[ignore]\n"
             "    fn demo() { assert_eq!(demo::f(), d::g()); let demo = 1; x.demo::<u8>(); }\n}\n"
             "#[test]\n#[ignore = \"slow\"]\nfn t() { fn demo() {} }\n")
    assert own_tests_module(tests, "demo") == (
        "// Tests\n\nuse super::*;\nuse super as d;\nmod inner {\n    use super::super::{f, g};\n    #[test]\n    \n"
        "    fn demo() { assert_eq!(super::super::f(), d::g()); let demo = 1; x.demo::<u8>(); }\n}\n"
        "#[test]\n\nfn t() { fn demo() {} }\n")


QUICK = ("doubly-linked-list", "forth", "macros", "paasio", "wordy")
"""The tasks whose answers need a policy of their reference's (``REFERENCE_NEEDS``) or touch a rule an honest answer
has tripped (shadowed names, soundness shapes, own tests reading files): the normal suite's share of the corpus."""


SAMPLE = ("custom-set", "parallel-letter-frequency", "react", "simple-linked-list", "xorcism")
"""Answers the suite adds to ``QUICK`` (``--corpora sample``, the default), chosen for the Rust they are written in:
generic types and trait impls on std types, threads, closures kept in a struct, a Box-linked list, lifetimes and
generic iterators."""


def _corpus(only: tuple[str, ...] = ()) -> tuple[list[Task], list[str], list]:
    if not EXERCISM.exists():
        pytest.skip(f"benchmark file {EXERCISM} is absent")
    tasks = [t for t in load_tasks(EXERCISM) if t.reference_code.strip()]
    assert len(tasks) == 95
    if only:
        tasks = [t for t in tasks if _slug(t) in only]
        assert len(tasks) == len(only)
    return tasks, [honest_completion(t) for t in tasks], [t.hidden_tests() for t in tasks]


def _trigger(code: str, reason: str) -> str:
    """The first line of ``code`` that shows what ``reason`` names, comments aside (for the failure message; a
    heuristic: a shadowed name where it is declared, a soundness hole by a lifetime-laden reference or fn type)."""
    last = reason.split()[-1].rstrip("!")
    if reason.startswith("soundness hole"):
        pattern = r"&'\w+[^;{]*'\w+|\bfn\s*\(|\?Sized"
    elif reason.startswith("shadows built-in name"):
        pattern = rf"\b(?:mod|struct|enum|union|type|trait|fn|const|static|as|macro_rules!)\s+{re.escape(last)}\b"
    else:
        words = [w.strip() for group in re.findall(r"\(([^)]*)\)", reason) for w in group.split(",")]
        words += re.findall(r"`([^`]*)`", reason) + [w for w in ("unsafe", "macro_rules") if w in reason]
        if reason.startswith("redefines"):
            words.append(last)
        words = [w for w in words if re.fullmatch(r"[\w:]+", w)]
        if not words:
            return ""
        pattern = r"\b(?:" + "|".join(map(re.escape, words)) + r")\b"
    for number, line in enumerate(code.splitlines(), 1):
        if re.search(pattern, re.sub(r"//.*", "", line)):
            return f"line {number}: {line.strip()}"
    return ""


def _summary(mode: str, tasks: list[Task], codes: list[str], reports: list[Report], took: float) -> tuple[str, list]:
    """Counts per reward, then every answer that loses hidden reward, has a hack reason, an internal error or a
    doubt about its own tests (with the line that triggered each reason); and the answers the test fails on."""
    rewards = [rewards_from_report(r) for r in reports]

    def count(ok: Callable[[int], bool]) -> int:
        return sum(ok(i) for i in range(len(tasks)))

    lines = [
        f"{mode}: {len(tasks)} honest Exercism answers in {took:.1f} s: "
        f"hidden 2.0 {count(lambda i: rewards[i]['hidden_test_reward'] == 2.0)}, "
        f"any hack reason {count(lambda i: bool(reports[i].hack_reasons))}, "
        f"test reward 2.0 {count(lambda i: rewards[i]['test_reward'] == 2.0)}, "
        f"assertion reward > 0 {count(lambda i: (rewards[i]['assertion_reward'] or 0) > 0)} "
        f"(1.0: {count(lambda i: rewards[i]['assertion_reward'] == 1.0)}), "
        f"clippy ok {count(lambda i: reports[i].clippy_ok)}, "
        f"own tests ran {count(lambda i: reports[i].own_tests.summary_seen)} "
        f"(all passed {count(lambda i: reports[i].own_tests.ok)}), "
        f"own-test doubts {count(lambda i: bool(reports[i].source.test_doubts))}, "
        f"internal errors {count(lambda i: bool(reports[i].internal_error))}"]
    short = [f"{_slug(t)} ({'; '.join(r.hack_reasons) or _own_checks(r)})" for t, r, w in zip(tasks, reports, rewards,
                                                                                        strict=True)
             if w["test_reward"] != 2.0]
    lines.append(f"  test reward below 2.0: {', '.join(short) or 'none'}")
    bad = []
    for i, (task, report) in enumerate(zip(tasks, reports, strict=True)):
        unexpected = sorted(set(report.hack_reasons) - REFERENCE_NEEDS.get(_slug(task), frozenset()))
        hidden = rewards[i]["hidden_test_reward"]
        doubts = report.source.test_doubts
        if hidden != 2.0 or report.hack_reasons or report.internal_error or doubts:
            failures = list(report.hidden_tests.failures)[:3] if report.hidden_tests else None
            lines.append(f"  {task.task_id}: hidden {hidden}, hack reasons {list(report.hack_reasons)}, "
                         f"own-test doubts {list(doubts)}, hidden failures {failures}"
                         + (f", internal error {report.internal_error[:200]}" if report.internal_error else ""))
            lines.extend(f"      {reason!r} <- {_trigger(codes[i], reason)}" for reason in (*report.hack_reasons,
                                                                                          *doubts))
        lost_tests = (rewards[i]["test_reward"] != 2.0 and not report.hack_reasons
                      and report.own_checks.discriminating > 0)  # its tests tell it from a mutant: full reward
        if hidden != 2.0 or unexpected or report.internal_error or lost_tests:
            bad.append((task.task_id, hidden, unexpected, report.internal_error[:80], lost_tests))
    return "\n".join(lines), bad


def _own_checks(report: Report) -> str:
    own, checks = report.own_tests, report.own_checks
    return (f"own tests {own.passed}/{own.expected} passed, checks compiled {checks.compiled}, "
            f"discriminating {checks.discriminating}")


@pytest.fixture(scope="module")
def verifiers():
    """One verifier per mode for the module: the whole corpus's direct run reads the ``QUICK`` answers' reports from
    its cache instead of verifying them again."""
    made: dict[str, Verifier] = {}
    yield lambda mode: made.setdefault(mode, Verifier(VerifierConfig(mode=mode), workers=2))
    for verifier in made.values():
        verifier.close()


def _check(verifier: Verifier, only: tuple[str, ...] = ()) -> None:
    tasks, codes, hidden = _corpus(only)
    start = time.perf_counter()
    reports = verifier.verify_many(codes, hidden, raw_code=True)
    mode = verifier.config.mode
    summary, bad = _summary(mode, tasks, codes, reports, time.perf_counter() - start)
    print(summary)
    assert not bad, ("honest answers that lose hidden reward, get a hack reason or an internal error, or lose the "
                     f"test reward their tests earn:\n{summary}")


def test_honest_exercism_answers_of_policy_tasks_keep_their_rewards(verifiers) -> None:
    """The ``QUICK`` tasks' honest answers, direct mode: full hidden reward, no hack reason but their reference's."""
    _check(verifiers("direct"), QUICK)


def test_honest_exercism_answers_of_policy_tasks_keep_their_rewards_in_batch_mode(verifiers) -> None:
    """Two ``QUICK`` tasks (an ``unsafe`` and a macro policy) in batch mode, which sends every Exercism answer to the
    direct path (integration-shaped hidden tests): the whole corpus in batch mode repeats the direct run below
    (measured 2026-12-02: 95 of 95 with hidden 2.0, no hack reason, 311 s), so the suite runs it on these only."""
    _check(verifiers("batch"), ("doubly-linked-list", "macros"))


@pytest.mark.slow
def test_honest_exercism_answers_keep_their_rewards(verifiers, whole_corpora) -> None:
    """Each honest answer (``QUICK`` and ``SAMPLE``; all 95 with ``--corpora all``) keeps the full hidden reward (2.0)
    and gets no hack reason but those its reference needs, direct mode (the ``QUICK`` ones from the verifier's cache
    when their test ran before)."""
    _check(verifiers("direct"), () if whole_corpora else QUICK + SAMPLE)
