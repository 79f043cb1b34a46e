"""The task's side of a verdict: what a completion of this task is judged by, apart from its own build and runs.

- **Source facts** (``task_facts``): ``facts.analyse`` with the names the task's hidden tests may use, where a
  hole, a macro definition or ``unsafe`` the reference uses itself is no hack reason.
- **Task checks** (``task_checked``): the required public items, checked against the reference or the prompt.
- **The reference's notes** (``reference_observations``): what each hidden test compares when the reference is
  the solution; a completion's hidden test passes only when it writes the same notes (``observe``).
- **Other solutions for the own tests** (``task_variants``): a copy of the model's own tests runs against the
  reference (a test failing there earns nothing) and against a wrong, non-panicking mutant of it
  (``wrong_variant``: a test passing there proves nothing; ``OwnTestChecks.discriminating`` counts the ones that
  fail on it). Without a reference, mutants of the completion itself play the wrong variants.

The reference's notes and its wrong mutant cost verifications of their own: each is computed once per task and
process (``TASK_MEMO``) and serves every completion of the task, in every mode and worker thread. The wrong
mutant's search verifies candidates with the caller's ``verify`` (``single.verify_code``), so this room sits below
the entry point without importing it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from rust_rewards.report import Report, SourceFacts
from rust_rewards.rust.facts import analyse
from rust_rewards.rust.lexer import tokenize
from rust_rewards.rust.mutants import body_mutants, mutants
from rust_rewards.rust.names import top_level
from rust_rewards.rust.rules import macro_definitions
from rust_rewards.rust.signatures import check_items, forged_comparisons, required_items, shadowing_methods
from rust_rewards.rust.soundness import soundness_holes
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.observe import ReferenceNotes, observable
from rust_rewards.verify.passes import in_crate

OWN_MUTANTS = 4
"""Mutants of the completion itself its own tests run against when the task has no reference (or no usable
mutant of it): its first ``body_mutants``, its first two token mutants, then the others. A test counts as
discriminating when it fails on any of them, so an equivalent mutant (``>`` to ``>=`` in a max) does not zero
honest tests."""
SEARCH_TEST_SECONDS = 2.0
"""Test time limit while searching for a wrong variant: a mutant that loops is rejected anyway, after 2 s, not
the full test limit (10 s)."""
MUTANTS_TRIED = 6
"""Mutants of a reference tried, in order, for a wrong variant (each costs one verification, once per task)."""
NOTE_RUNS = 3
"""Runs of the reference's hidden tests: a test is judged by its notes only when all three noted the same."""

Verify = Callable[[str, HiddenTests | None, VerifierConfig, int], Report]
"""A completion's whole verification (``single.verify_code``'s shape): what the wrong mutant's search runs."""


class TaskMemo:
    """Task-level judgments computed once per key and process: concurrent callers of a key wait for the first
    one's result rather than compute it again; a computation that raises stores nothing (the next call retries)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._values:
                self._values[key] = compute()
            return self._values[key]

    def clear(self) -> None:
        """Forget every value (benchmarks that time a task's first verification)."""
        with self._lock:
            self._values.clear()
            self._locks.clear()


TASK_MEMO = TaskMemo()
"""The process's one memo of the reference's notes and wrong mutant, keyed by kind, task and verifier setup."""


def reference_observations(hidden: HiddenTests, config: VerifierConfig, slot: int = 0) -> ReferenceNotes | None:
    """What each hidden test's assertions compare with the task's reference as the solution; None when the task has
    no reference. Computed once per task and process (in ``direct`` mode when ``config`` is batch mode's). A reference
    that does not build or fails a hidden test is ``ReferenceNotes.broken``: no completion passes a hidden test of
    that task. One whose hidden run timed out raises ``SandboxError`` (an internal error, never a pass; not cached:
    the next call runs it again)."""
    if not observable(hidden.reference):
        return None
    own = replace(config, mode="cargo" if config.mode == "cargo" else "direct")

    def run() -> ReferenceNotes:
        code = hidden.reference
        facts = task_facts(code, hidden)
        report, observed = in_crate(code, hidden, own, slot, facts, (), note_runs=NOTE_RUNS)
        counts = report.hidden_tests
        if report.timed_out or (counts is not None and counts.timed_out):
            raise sandbox.SandboxError(f"the task's reference ran out of time in its own run "
                                       f"({', '.join(report.timed_out) or 'hidden tests'}): run again")
        tests = counts.expected if counts is not None else 0
        broken = ("did not build" if not report.build_ok or counts is None else
                  f"passed {counts.passed} of {tests}: {'; '.join(counts.failures)}"[:300]
                  if counts.passed != tests else "")
        lints = report.clippy_warnings if report.build_ok else ()
        return ReferenceNotes(observed if not broken else {}, tests, broken, lints)

    return TASK_MEMO.get(("notes", hidden, own.fingerprint()), run)  # batch mode's notes are direct mode's


def notes_to_match(code: str, hidden: HiddenTests | None, config: VerifierConfig,
                   slot: int = 0) -> ReferenceNotes | None:
    """The reference's notes ``code``'s hidden tests must write to pass; None without a reference, and for the
    reference itself (process_data checks it): its own run is its verdict, its notes could only equal themselves."""
    if hidden is None or code.strip() == hidden.reference.strip():
        return None
    return reference_observations(hidden, config, slot)


def task_facts(code: str, hidden: HiddenTests | None) -> SourceFacts:
    """``facts.analyse(code)``, where a soundness-hole shape (``soundness.soundness_holes``), a macro definition
    (``rules.macro_definitions``) or ``unsafe`` that the task's reference uses itself is no hack reason; files
    are a doubt about the own tests only where this machine's test runs share them (no bwrap)."""
    shared = sandbox.detect_isolation().bwrap is None
    if hidden is None:
        return analyse(code, files_shared=shared)
    facts = analyse(code, _required_names(hidden.reference, hidden.prompt), shared)
    allowed = _reference_holes(hidden.reference) + (("unsafe code",) if hidden.allows_unsafe else ())
    forbidden = tuple(r for r in facts.forbidden if r not in allowed)
    return replace(facts, forbidden=forbidden) if forbidden != facts.forbidden else facts


@functools.lru_cache(maxsize=256)
def _required_names(reference: str, prompt: str) -> frozenset[str] | None:
    """The names a task's hidden tests may use: what its reference binds at its top level, else the prompt's
    required fns; None when the task names none."""
    if reference.strip():
        return top_level(reference).names()
    names = frozenset(item.name.split("::")[0] for item in required_items(prompt)) if prompt.strip() else frozenset()
    return names or None


@functools.lru_cache(maxsize=256)
def _reference_holes(reference: str) -> tuple[str, ...]:
    if not reference.strip():
        return ()
    tokens = tokenize(reference)
    return soundness_holes(reference, tokens) + macro_definitions(tokens)


def wants_variants(code: str, hidden: HiddenTests | None, facts: SourceFacts) -> bool:
    """Whether the own tests' checks could pay anything: the code has tests, no hack reason and answers the task
    (otherwise ``test_reward`` and ``assertion_reward`` are 0 whatever the variants say, so none is compiled)."""
    if not facts.test_fns or facts.forbidden or facts.test_doubts:
        return False
    checked = task_checked(Report(has_code=True), code, hidden)
    return checked.on_task and not checked.hack_reasons


def task_checked(report: Report, code: str, hidden: HiddenTests | None) -> Report:
    """``report`` with the task's required public items checked (``signatures.check_items``) against the
    reference, or else the prompt's signatures: missing items make it ``off_task``, differing ones ``mismatched``.
    With neither, only hand-made comparisons of its own types with other types (``forged_comparisons``)."""
    if not report.has_code:
        return report
    spec = hidden.reference or hidden.prompt if hidden is not None else ""
    if not spec.strip():
        return replace(report, mismatched=forged_comparisons(code))
    found = _check_items(code, spec)
    tests = "\n".join([hidden.text, *(text for rel, text in hidden.extra_files if rel.endswith(".rs"))])
    takeovers = _shadowing_methods(code, hidden.reference, tests)
    return replace(report, off_task=found.missing, mismatched=found.mismatched + takeovers)


_check_items = functools.lru_cache(maxsize=4096)(check_items)
_shadowing_methods = functools.lru_cache(maxsize=4096)(shadowing_methods)


def task_variants(code: str, hidden: HiddenTests | None, facts: SourceFacts, config: VerifierConfig, slot: int,
                  verify: Verify) -> tuple[tuple[str, str], ...]:
    """The other solutions the model's own tests run against: the reference and a wrong mutant of it (searched
    with ``verify``), or, without a reference (or without a usable mutant of it), mutants of the completion; none
    when the checks could pay nothing (``wants_variants``)."""
    if not wants_variants(code, hidden, facts):
        return ()
    body, tokens = body_mutants(code), mutants(code, limit=OWN_MUTANTS)
    order = dict.fromkeys([*body[:1], *tokens[:2], *body[1:], *tokens[2:]])
    own = tuple(("mutant", m) for m in list(order)[:OWN_MUTANTS])
    if hidden is not None and hidden.reference.strip():
        wrong = wrong_variant(hidden, config, slot, verify)
        return (("reference", hidden.reference), *((("mutant", wrong),) if wrong else own))
    return own


def tests_alone(hidden: HiddenTests) -> HiddenTests:
    """``hidden`` without the task's reference and prompt: a solution is judged by the tests' own assertions (no
    reference notes, no task checks, no variants), as the wrong-variant search judges its candidates."""
    return replace(hidden, reference="", prompt="")


def wrong_variant(hidden: HiddenTests, config: VerifierConfig, slot: int, verify: Verify) -> str | None:
    """The first mutant of the reference (``mutants.mutants``) that builds, fails a hidden test by assertion (not
    by a panic in its own code, not by a timeout); ``None`` when none of the first ``MUTANTS_TRIED`` does.
    Computed once per task and process; each candidate is verified by ``verify`` against the hidden tests alone
    (no reference: no variants of its own beyond its mutants, no notes)."""
    def search() -> str | None:
        plain = tests_alone(hidden)
        quick = replace(config, run_limits=replace(config.run_limits, wall_seconds=min(
            config.run_limits.wall_seconds, SEARCH_TEST_SECONDS)))
        for candidate in mutants(hidden.reference, limit=MUTANTS_TRIED):
            r = verify(candidate, plain, quick, slot)
            if (r.build_ok and r.hidden_tests is not None and r.hidden_tests.passed < r.hidden_tests.expected
                    and not r.timed_out and "panicked at src/lib.rs" not in r.test_output):
                return candidate
        return None

    return TASK_MEMO.get(("wrong", hidden, config.fingerprint()), search)
