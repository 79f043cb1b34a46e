"""Parse what the compiler and libtest print: rustc/cargo JSON diagnostics, and libtest output for the naive
baseline and for feedback (never for a verdict: the verifier judges tests by their seals)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_SUMMARY = re.compile(
    r"^test result: (ok|FAILED)\. (\d{1,9}) passed; (\d{1,9}) failed; (\d{1,9}) ignored; (\d+) measured; "
    r"(\d+) filtered out",
    re.MULTILINE,
)
_TEST_LINE = re.compile(r"^test (\S+)(?: - should panic)? \.\.\. (ok|FAILED|ignored)\b", re.MULTILINE)


@dataclass(frozen=True)
class CompileOutcome:
    """The diagnostics of one or more compiler passes."""

    error_codes: tuple[str, ...] = ()
    hard_errors: int = 0
    clippy_lints: tuple[str, ...] = ()
    clippy_errors: int = 0
    rustc_warnings: int = 0
    rendered: str = ""
    error_files: tuple[str, ...] = ()

    def merged(self, other: CompileOutcome) -> CompileOutcome:
        return CompileOutcome(
            error_codes=self.error_codes + tuple(c for c in other.error_codes if c not in self.error_codes),
            hard_errors=self.hard_errors + other.hard_errors,
            clippy_lints=self.clippy_lints + other.clippy_lints,
            clippy_errors=self.clippy_errors + other.clippy_errors,
            rustc_warnings=self.rustc_warnings + other.rustc_warnings,
            rendered=(self.rendered + other.rendered),
            error_files=self.error_files + tuple(f for f in other.error_files if f not in self.error_files),
        )


def _diagnostics(text: str):
    """Yield diagnostic dicts from rustc's ``--error-format=json`` or cargo's ``--message-format=json``."""
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if obj.get("reason") == "compiler-message":
            obj = obj.get("message") or {}
        if "level" in obj and "message" in obj:
            yield obj


def parse_compiler(text: str, *, clippy_pass: bool = True) -> CompileOutcome:
    """Classify compiler diagnostics.

    ``clippy::`` lints (warnings or deny-level errors) are clippy findings, never build errors. With
    ``clippy_pass=False`` they are ignored (a plain rustc pass cannot produce them).
    """
    codes: list[str] = []
    hard = 0
    lints: list[str] = []
    clippy_errors = 0
    warnings = 0
    rendered: list[str] = []
    files: list[str] = []
    for diag in _diagnostics(text):
        level = diag.get("level", "")
        code = (diag.get("code") or {}).get("code") or ""
        message = diag.get("message", "")
        if code.startswith("clippy::"):
            if clippy_pass:
                lints.append(code)
                clippy_errors += level == "error"
                rendered.append(diag.get("rendered") or message)
            continue
        if level in ("error", "error: internal compiler error"):
            if message.startswith("aborting due to"):
                continue
            hard += 1
            if code and code not in codes:
                codes.append(code)
            for span in diag.get("spans") or []:
                if span.get("is_primary") and span.get("file_name") not in files:
                    files.append(span.get("file_name"))
            rendered.append(diag.get("rendered") or message)
        elif level == "warning" and not message.endswith("warning emitted") and "warnings emitted" not in message:
            warnings += 1
    return CompileOutcome(tuple(codes), hard, tuple(lints), clippy_errors, warnings, "".join(rendered), tuple(files))


@dataclass(frozen=True)
class TestRun:
    """libtest's counts from one or more test binaries' stdout."""

    passed: int = 0
    failed: int = 0
    ignored: int = 0
    summary_seen: bool = False


def parse_libtest(stdout: str, *, binaries: int = 1) -> TestRun:
    """Counts from libtest output as the published naive scorers read it (``bench``'s baseline), trusting them
    only when they look genuine (counts of more than 9 digits are not counts).

    Each binary must print exactly one ``test result:`` line and the per-test ``ok`` lines must add up to
    the passed counts; otherwise ``summary_seen`` is False (a binary that exited early, or printed a fake
    summary, has not passed).

    >>> parse_libtest("test a ... ok\\n\\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; "
    ...               "0 filtered out; finished in 0.00s\\n")
    TestRun(passed=1, failed=0, ignored=0, summary_seen=True)
    """
    summaries = _SUMMARY.findall(stdout)
    passed = sum(int(s[1]) for s in summaries)
    failed = sum(int(s[2]) for s in summaries)
    ignored = sum(int(s[3]) for s in summaries)
    lines = _TEST_LINE.findall(stdout)
    ok_lines = sum(1 for _name, status in lines if status == "ok")
    genuine = len(summaries) == binaries and ok_lines == passed
    return TestRun(passed, failed, ignored, genuine)


_RENDERED_HEAD = re.compile(r"^(error|warning)(?:\[([A-Za-z0-9_:]+)\])?: (.*)$", re.MULTILINE)
_LOCATION = re.compile(r"^\s*--> (.+?):(\d+):(\d+)\s*$", re.MULTILINE)
_GUTTER = re.compile(r"^\s*(\d+)?\s*\|")
_SUGGESTION = re.compile(r"^\s*\d+ [|+-] |^\s*\|\s*[+~-]+\s*$")
_CLIPPY_URL = re.compile(r"rust-clippy/[^\s#]*#([a-z0-9_]+)")
_FAILURE_HEAD = re.compile(r"^---- (\S+) stdout ----$", re.MULTILINE)
_FAILED_LINE = re.compile(r"^test (\S+)(?: - should panic)? \.\.\. FAILED\b", re.MULTILINE)


@dataclass(frozen=True)
class RenderedDiagnostic:
    """One compiler message as ``Report.diagnostics`` stores it (rustc's rendered text), split into parts.

    ``code`` is ``E0308``-style for rustc errors, ``clippy::lint`` for clippy findings, else empty; ``file``,
    ``line``, ``column`` are the primary span (empty/0 when the message has none); ``snippet`` holds the first
    run of source/label lines under the span; ``notes`` the top-level ``= help:``/``help:``/``note:`` lines.
    """

    level: str
    code: str
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    snippet: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    text: str = ""


def split_rendered(rendered: str) -> list[RenderedDiagnostic]:
    """Split concatenated rendered diagnostics into messages, in order, exact duplicates dropped.

    >>> d = split_rendered("error[E0308]: mismatched types\\n --> src/lib.rs:2:5\\n  |\\n2 |     \\"x\\"\\n"
    ...                    "  |     ^^^ expected `i32`, found `&str`\\n\\n")[0]
    >>> d.code, d.file, d.line, d.column, d.snippet
    ('E0308', 'src/lib.rs', 2, 5, ('2 |     "x"', '  |     ^^^ expected `i32`, found `&str`'))
    """
    heads = list(_RENDERED_HEAD.finditer(rendered))
    found: list[RenderedDiagnostic] = []
    seen: set[str] = set()
    for i, head in enumerate(heads):
        text = rendered[head.start() : heads[i + 1].start() if i + 1 < len(heads) else len(rendered)].rstrip()
        if text in seen:
            continue
        seen.add(text)
        lint = _CLIPPY_URL.search(text)
        code = head.group(2) or (f"clippy::{lint.group(1)}" if lint else "")
        where = _LOCATION.search(text)
        body = text[where.end() :].splitlines() if where else []
        snippet: list[str] = []
        for line in body:
            if not _GUTTER.match(line):
                if snippet:
                    break
                continue
            snippet.append(line.rstrip())
        while snippet and snippet[0].strip() == "|":
            snippet.pop(0)
        while snippet and snippet[-1].strip() == "|":
            snippet.pop()
        found.append(RenderedDiagnostic(
            level=head.group(1), code=code, message=head.group(3).strip(),
            file=where.group(1) if where else "", line=int(where.group(2)) if where else 0,
            column=int(where.group(3)) if where else 0, snippet=tuple(snippet), notes=_notes(body), text=text,
        ))
    return found


def _notes(body: list[str]) -> tuple[str, ...]:
    """``= help:``/``= note:`` lines and ``help:``/``note:`` sections; a section keeps its suggested edit."""
    notes: list[str] = []
    current: list[str] | None = None
    for line in body:
        if re.match(r"^\s*(= )?(help|note): ", line):
            if current:
                notes.append("\n".join(current))
            current = [line.strip()]
        elif current is not None and _SUGGESTION.match(line) and len(current) < 5:
            current.append(line.rstrip())
        elif current is not None and not _GUTTER.match(line):
            notes.append("\n".join(current))
            current = None
    if current:
        notes.append("\n".join(current))
    return tuple(notes)


@dataclass(frozen=True)
class TestFailure:
    """One failed libtest test: its name and what it printed (panic message included)."""

    name: str
    output: str


def libtest_failures(stdout: str) -> list[TestFailure]:
    """The failed tests of ONE libtest run's stdout, in the order libtest reported them.

    >>> out = ("test t::a ... FAILED\\n\\nfailures:\\n\\n---- t::a stdout ----\\n\\nthread 't::a' (4) panicked at "
    ...        "src/lib.rs:3:9:\\nboom\\n\\n\\nfailures:\\n    t::a\\n")
    >>> libtest_failures(out)
    [TestFailure(name='t::a', output="thread 't::a' (4) panicked at src/lib.rs:3:9:\\nboom")]
    """
    sections: dict[str, str] = {}
    heads = list(_FAILURE_HEAD.finditer(stdout))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(stdout)
        body = stdout[head.end() : end]
        body = re.split(r"^failures:$", body, maxsplit=1, flags=re.MULTILINE)[0]
        sections.setdefault(head.group(1), body.strip("\n"))
    names = list(dict.fromkeys(_FAILED_LINE.findall(stdout)))
    return [TestFailure(name, sections.get(name, "")) for name in names]
