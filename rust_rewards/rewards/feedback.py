"""Repair-round feedback: what a failed completion's ``Report`` may tell the model, compactly.

A repair round shows the model only what its own code produced: the compiler errors and clippy lints whose primary
span lies in its code (``src/lib.rs``), banned constructs found in its source, and its own tests' verdicts,
names and panic messages. The hidden reference tests never reach the message, by construction: ``visible_view``
is the only reader of the report, and it

- keeps a rendered diagnostic only when its primary span is in the model's file and it does not name the
  verifier's hidden module (so compile errors inside the hidden tests, which quote their source, are dropped);
- reads test output only when the own tests ran (``own_tests.summary_seen``), and only the own tests' runs, which
  come first in ``Report.test_output``, up to the ``HIDDEN_OUTPUT`` line; hidden runs come after it and are
  never read;
- never reads ``hidden_tests``, ``error_codes`` (they include hidden compile errors) or the hidden phases'
  timeouts.

The message is capped at ``max_tokens`` tokens as counted by ``count_tokens`` (inference passes the model
tokenizer's count; the default ``approx_tokens`` counts one token per 3 characters, an over-estimate for code):
findings are added in priority order (compile errors, failing tests, banned constructs, clippy lints) while the
whole message fits, and a last line says how many were left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rust_rewards.report import HIDDEN_OUTPUT, Report, TestCounts
from rust_rewards.rust.lexer import HIDDEN_PREFIX
from rust_rewards.verify.diagnostics import (
    RenderedDiagnostic,
    TestFailure,
    libtest_failures,
    split_rendered,
)

MODEL_FILE = "src/lib.rs"
"""The crate file that holds the model's code (line numbers in it are the lines of the extracted code)."""

DEFAULT_MAX_TOKENS = 384

VISIBLE_PHASES = {"build": "compiling your code", "clippy": "running clippy", "build_codegen": "compiling your code",
                  "test": "running your tests"}
"""Verifier phases whose timeouts the model may hear about: not the hidden phases, nor ``test_compile`` (in direct
mode it compiles the hidden tests too)."""

NO_CODE_MESSAGE = ("Your answer contains no ```rust code block, so nothing could be compiled. Answer with the "
                   "complete solution and its `#[cfg(test)] mod tests` in exactly one ```rust code block.")

_MAX_ITEM_LINES = 8
_MAX_LINE_CHARS = 200
_MAX_NOTES = 2
_NOISE = ("for further information visit", "on by default", "implied by `--force-warn", "RUST_BACKTRACE",
          "the lint level is defined here",
          "in this macro invocation", "originates in the macro")
_PANIC = re.compile(r"^thread '.*?'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$")


def approx_tokens(text: str) -> int:
    """A tokenizer-free token count: one token per 3 characters, rounded up.

    >>> approx_tokens("fn main() {}")
    4
    """
    return -(-len(text) // 3)


@dataclass(frozen=True)
class Visible:
    """What a repair round may see of one report: only what the model's own build, clippy and tests produced."""

    has_code: bool
    build_ok: bool
    clippy_ok: bool
    errors: tuple[RenderedDiagnostic, ...]
    lints: tuple[RenderedDiagnostic, ...]
    own_tests: TestCounts
    own_failures: tuple[TestFailure, ...]
    forbidden: tuple[str, ...]
    timed_out: tuple[str, ...]
    tests_asked: bool = True

    @property
    def tests_failed(self) -> bool:
        """Tests were asked for (answer format ``solution+tests``), it builds, and the own tests did not all pass."""
        return self.tests_asked and self.build_ok and not self.own_tests.ok

    @property
    def passed(self) -> bool:
        """Code present, it builds, clippy is clean, the own tests (when asked for) all pass and nothing banned is
        used."""
        return self.has_code and self.build_ok and self.clippy_ok and not self.tests_failed and not self.forbidden


def visible_view(report: Report, tests_asked: bool = True) -> Visible:
    """The model-visible part of ``report`` (see the module docstring for what is left out and why)."""
    own: list[RenderedDiagnostic] = [
        d for d in split_rendered(report.diagnostics) if d.file == MODEL_FILE and HIDDEN_PREFIX not in d.text
    ]
    own_run = report.test_output.split(HIDDEN_OUTPUT)[0] if report.own_tests.summary_seen else ""
    return Visible(
        has_code=report.has_code,
        build_ok=report.build_ok,
        clippy_ok=report.clippy_ok,
        errors=tuple(d for d in own if not d.code.startswith("clippy::")),
        lints=tuple(d for d in own if d.code.startswith("clippy::")),
        own_tests=report.own_tests,
        own_failures=tuple(libtest_failures(own_run)),
        forbidden=report.source.forbidden,
        timed_out=tuple(p for p in report.timed_out if p in VISIBLE_PHASES),
        tests_asked=tests_asked,
    )


def feedback_message(
    report: Report, max_tokens: int = DEFAULT_MAX_TOKENS, count_tokens: Callable[[str], int] = approx_tokens,
    tests_asked: bool = True,
) -> str | None:
    """The follow-up user turn for a completion that failed a check the model may see, else None.

    None when the completion passed build, clippy and its own tests (``tests_asked``: the answer format asked for
    them; else build and clippy alone) (a failure only the hidden tests see is not
    reported: hearing about it would leak their verdict) and when the verifier failed internally (nothing the
    model could fix). The message stays within ``max_tokens`` as ``count_tokens`` counts them; its first
    paragraph (the checks that failed and what to do) is always kept.

    >>> from rust_rewards.report import Report
    >>> untested = Report(has_code=True, build_ok=True, clippy_ok=True)
    >>> print(feedback_message(untested))  # doctest: +ELLIPSIS
    Your answer failed these checks: your tests (there are no #[test] functions). Fix ...
    <BLANKLINE>
    Your tests:
    - no #[test] function found: add a `#[cfg(test)] mod tests` whose tests call your solution
    >>> feedback_message(untested, max_tokens=90).splitlines()[-1]
    '(1 more problem not shown.)'
    >>> feedback_message(Report(has_code=False))[:40]
    'Your answer contains no ```rust code blo'
    """
    if report.internal_error:
        return None
    seen = visible_view(report, tests_asked)
    if seen.passed:
        return None
    if not seen.has_code:
        return NO_CODE_MESSAGE
    sections = _sections(seen)
    head = _headline(seen)
    items = [(title, item) for title, entries in sections for item in entries]
    kept = 0
    while kept < len(items) and count_tokens(_render(head, items[: kept + 1], len(items) - kept - 1)) <= max_tokens:
        kept += 1
    return _render(head, items[:kept], len(items) - kept)


def _headline(seen: Visible) -> str:
    failed: list[str] = []
    if not seen.build_ok:
        failed.append(f"the code does not compile ({_count(len(seen.errors), 'error')})" if seen.errors
                      else "the code does not compile")
    if seen.build_ok and not seen.clippy_ok:
        failed.append(f"clippy ({_count(len(seen.lints), 'lint')})" if seen.lints else "clippy")
    if seen.tests_failed:
        failed.append(f"your tests ({_tests_state(seen)})")
    if seen.forbidden:
        failed.append("banned constructs")
    answer = "(solution and tests)" if seen.tests_asked else "(the solution)"
    return (f"Your answer failed these checks: {', '.join(failed)}. Fix the problems below and answer again with "
            f"the complete corrected code {answer} in one ```rust code block. Line numbers count the "
            "lines of your Rust code.")


def _tests_state(seen: Visible) -> str:
    tests = seen.own_tests
    if tests.expected == 0:
        return "there are no #[test] functions"
    if tests.timed_out:
        return "they did not finish in time"
    if not tests.summary_seen:
        return "they did not compile" if seen.errors else "they did not finish"
    if tests.failed:
        return f"{tests.failed} of {tests.passed + tests.failed + tests.ignored} failed"
    return f"only {tests.passed} of {tests.expected} passed"


def _sections(seen: Visible) -> list[tuple[str, list[str]]]:
    """(title, items) in priority order; a title is printed once, before its first kept item."""
    errors = _diagnostic_items(seen.errors)
    if not seen.build_ok and not errors:
        errors.append("- the build failed without a message located in your code")
    errors += [f"- time limit exceeded while {VISIBLE_PHASES[p]}" for p in seen.timed_out if p != "test"]
    tests: list[str] = []
    if seen.tests_failed:
        if seen.own_tests.expected == 0:
            tests.append("- no #[test] function found: add a `#[cfg(test)] mod tests` whose tests call your solution")
        elif seen.own_tests.timed_out:
            tests.append("- your tests did not finish within the time limit (an endless loop or a very slow test?)")
        elif not seen.own_tests.summary_seen and not seen.errors:
            tests.append("- the test run ended before libtest printed its summary (a crash, abort or exit?)")
        tests += [_failure_item(f) for f in seen.own_failures]
    banned = [f"- {reason}" for reason in seen.forbidden]
    return [("Compiler errors:", errors), ("Your tests:", tests), ("Banned constructs:", banned),
            ("Clippy lints:", _diagnostic_items(seen.lints))]


def _render(head: str, items: list[tuple[str, str]], left_out: int) -> str:
    parts = [head]
    title = None
    for item_title, item in items:
        if item_title != title:
            parts.append(f"\n{item_title}")
            title = item_title
        parts.append(item)
    if left_out:
        parts.append(f"\n({_count(left_out, 'more problem')} not shown.)")
    return "\n".join(parts)


def _diagnostic_items(found: tuple[RenderedDiagnostic, ...]) -> list[str]:
    """One item per message; a repeat of an earlier code and message is one line (its span)."""
    items: list[str] = []
    shown: set[tuple[str, str]] = set()
    for d in found:
        head = f"- {d.code or d.level} at line {d.line}:{d.column}: {d.message}"
        items.append(_clip(f"{head} (as above)") if (d.code, d.message) in shown else _diagnostic_item(head, d))
        shown.add((d.code, d.message))
    return items


def _diagnostic_item(head: str, d: RenderedDiagnostic) -> str:
    lines = [head, *(f"  {s}" for s in d.snippet)]
    lines = lines[:_MAX_ITEM_LINES]
    notes = [n for n in d.notes if not any(x in n.splitlines()[0] for x in _NOISE)][:_MAX_NOTES]
    lines += [f"  {line}" for note in notes for line in note.splitlines()]
    return "\n".join(_clip(line) for line in lines)


def _failure_item(failure: TestFailure) -> str:
    body: list[str] = []
    for line in failure.output.splitlines():
        if not line.strip() or any(x in line for x in _NOISE):
            continue
        panic = _PANIC.match(line)
        if panic:
            path, row, col = panic.groups()
            line = f"panicked at line {row}:{col}:" if path == MODEL_FILE else "panicked in library code:"
        body.append(f"  {line}")
    return "\n".join(_clip(line) for line in [f"- {failure.name} failed", *body][:_MAX_ITEM_LINES])


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE_CHARS else line[: _MAX_LINE_CHARS - 3] + "..."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
