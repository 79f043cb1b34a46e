"""The one verdict per completion that every consumer (rewards, eval, viz) reads."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

HIDDEN_OUTPUT = "==== hidden tests ===="
"""The line in ``Report.test_output`` after the own tests' output (one libtest run per test) and before the
hidden tests' (never shown to the model)."""


@dataclass(frozen=True)
class TestCounts:
    """Counts for one group of tests (the model's own, or the hidden reference tests), each test judged by its
    seal (``crate.seal_tests``): its own process exited 0 and printed the test's nonce.

    ``expected``: the tests that must pass (own ``#[ignore]``d tests are not run: counted in ``ignored``);
    ``summary_seen``: the tests were compiled and run.
    """

    passed: int = 0
    failed: int = 0
    ignored: int = 0
    expected: int = 0
    summary_seen: bool = False
    timed_out: bool = False
    failures: tuple[str, ...] = ()
    """Hidden tests only: each test that ran and did not pass, as ``name: why`` (``failed``, ``timed out``, ``notes
    differ from the reference's``): what explains a lost hidden test in eval tables and test messages. Never shown to
    the model (its feedback reads counts and its own tests' output)."""

    @property
    def ok(self) -> bool:
        """At least one test ran, and every test that must pass passed."""
        return (
            self.summary_seen
            and not self.timed_out
            and self.expected > 0
            and self.failed == 0
            and self.passed >= self.expected
        )

    @property
    def fraction_passed(self) -> float:
        """Passed tests over expected tests (0.0 when nothing was expected, the run timed out or was forged)."""
        if self.expected <= 0 or not self.summary_seen or self.timed_out:
            return 0.0
        return min(self.passed, self.expected) / self.expected


@dataclass(frozen=True)
class SourceFacts:
    """What static analysis of the extracted code found (no compiler involved)."""

    code_lines: int = 0
    test_fns: tuple[str, ...] = ()
    assertions: int = 0
    meaningful_assertions: tuple[str, ...] = ()
    trivial_assertions: int = 0
    tests_calling_solution: int = 0
    forbidden: tuple[str, ...] = ()
    test_doubts: tuple[str, ...] = ()
    """Doubts about the own tests alone (what they observe, a copy of the solution, a ``cfg(test)`` helper): they
    cost the own-test rewards, never a passing solution's hidden reward (``forbidden`` costs that)."""

    @property
    def has_test_block(self) -> bool:
        return bool(self.test_fns)


@dataclass(frozen=True)
class OwnTestChecks:
    """The model's own tests, run against other solutions of the task (``verify.reference.task_variants``).

    ``variants``: what they were to run against (``reference``, ``mutant``); ``compiled``: they compiled against
    those; ``valid``: own tests that passed on the completion and on the reference (on the completion alone when
    there is no reference); ``discriminating``: of those, the ones that failed on a wrong variant (a test that
    also passes on a wrong solution proves nothing); ``ran``: False when the copies were not run because the
    solution fails a hidden test, so no reward depends on them (``valid`` and ``discriminating`` stay 0).
    """

    variants: tuple[str, ...] = ()
    compiled: bool = False
    valid: int = 0
    discriminating: int = 0
    ran: bool = True
    dropped: int = 0
    """Own tests that passed but do not compile against a variant (a test of an extra method): left out of the
    checks, each on its own, without costing their neighbours."""


@dataclass(frozen=True)
class Report:
    """Everything the verifier learned about one completion.

    ``build_ok``: the library compiles (clippy-only findings do not count as build errors).
    ``clippy_ok``: it compiles and clippy reports no ``clippy::`` lint at all.
    ``own_tests``: the model's own ``#[test]`` functions; ``hidden_tests``: the task's reference
    tests, ``None`` when the task has none, counted only under the exact names the verifier wrote.
    ``own_checks``: the own tests against the reference and wrong variants.
    ``off_task``: the task's required public items the code does not define (an answer to another task);
    ``mismatched``: required items defined with other signatures than the task's; with ``source.forbidden``
    they make up ``hack_reasons``.
    """

    has_code: bool
    code_hash: str = ""
    build_ok: bool = False
    clippy_ok: bool = False
    error_codes: tuple[str, ...] = ()
    clippy_warnings: tuple[str, ...] = ()
    rustc_warnings: int = 0
    own_tests: TestCounts = field(default_factory=TestCounts)
    hidden_tests: TestCounts | None = None
    own_checks: OwnTestChecks = field(default_factory=OwnTestChecks)
    source: SourceFacts = field(default_factory=SourceFacts)
    timed_out: tuple[str, ...] = ()
    durations: dict[str, float] = field(default_factory=dict)
    diagnostics: str = ""
    test_output: str = ""
    isolation: tuple[str, ...] = ()
    mode: str = "direct"
    internal_error: str = ""
    off_task: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()

    @property
    def hack_reasons(self) -> tuple[str, ...]:
        """Why this completion's test verdicts cannot be trusted (banned constructs, signatures not the task's)."""
        return self.source.forbidden + self.mismatched

    @property
    def on_task(self) -> bool:
        """The code defines every public item the task requires (no answer to another task)."""
        return not self.off_task

    @property
    def tests_ok(self) -> bool:
        """The model's own tests ran, there was at least one, and all passed (and nothing casts doubt on them)."""
        return (self.build_ok and self.own_tests.ok and not self.hack_reasons and not self.source.test_doubts
                and self.on_task)

    @property
    def solution_not_wrong(self) -> bool:
        """No hidden test says the solution is wrong: every hidden test passed, or the task has none."""
        return self.hidden_tests is None or self.hidden_ok

    @property
    def tests_checked(self) -> bool:
        """``tests_ok``, every own test also passes on the reference, at least one fails on a wrong variant, and
        the solution passes the hidden tests (a wrong solution earns nothing for its tests): what
        ``test_reward`` pays for."""
        c = self.own_checks
        return (self.tests_ok and c.compiled and c.valid + c.dropped == self.own_tests.passed
                and c.discriminating >= 1 and self.solution_not_wrong)

    @property
    def hidden_fraction(self) -> float:
        """Share of the hidden tests that passed: 0.0 when the code does not build, a hack reason is flagged,
        it is off task, or there are no hidden tests. ``hidden_test_reward`` is twice this; ``hidden_ok`` is it
        being 1."""
        if self.hidden_tests is None or not self.build_ok or self.hack_reasons or self.off_task:
            return 0.0
        return self.hidden_tests.fraction_passed

    @property
    def hidden_ok(self) -> bool:
        """Every hidden reference test passed (False when there are none)."""
        return self.hidden_tests is not None and self.hidden_fraction == 1.0

    def verdict(self) -> dict[str, Any]:
        """The fields two verifier modes must agree on (durations, texts and isolation excluded)."""
        return {
            "has_code": self.has_code,
            "build_ok": self.build_ok,
            "clippy_ok": self.clippy_ok,
            "error_codes": sorted(set(self.error_codes)),
            "clippy_warnings": sorted(self.clippy_warnings),
            "own_tests": (self.own_tests.passed, self.own_tests.failed, self.own_tests.ignored,
                          self.own_tests.summary_seen),
            "hidden_tests": None if self.hidden_tests is None else (
                self.hidden_tests.passed, self.hidden_tests.failed, self.hidden_tests.summary_seen),
            "own_checks": (self.own_checks.compiled, self.own_checks.ran, self.own_checks.valid,
                           self.own_checks.discriminating, self.own_checks.dropped),
            "timed_out": sorted(self.timed_out),
            "hack_reasons": sorted(self.hack_reasons),
            "test_doubts": sorted(self.source.test_doubts),
            "off_task": sorted(self.off_task),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        kwargs = dict(data)
        kwargs["own_tests"] = TestCounts(**data.get("own_tests") or {})
        hidden = data.get("hidden_tests")
        kwargs["hidden_tests"] = None if hidden is None else TestCounts(
            **{**hidden, "failures": tuple(hidden.get("failures", ()))})
        checks = dict(data.get("own_checks") or {})
        checks["variants"] = tuple(checks.get("variants") or ())
        kwargs["own_checks"] = OwnTestChecks(**checks)
        src = dict(data.get("source") or {})
        for key in ("test_fns", "meaningful_assertions", "forbidden", "test_doubts"):
            src[key] = tuple(src.get(key) or ())
        kwargs["source"] = SourceFacts(**src)
        for f in fields(cls):
            if f.name in kwargs and isinstance(kwargs[f.name], list):
                kwargs[f.name] = tuple(kwargs[f.name])
        return cls(**{k: v for k, v in kwargs.items() if k in {f.name for f in fields(cls)}})

    def flat(self, tests_asked: bool = True) -> dict[str, Any]:
        """One flat row for tables and parquet (what eval and viz read). ``tests_asked=False`` (an answer format
        without a test module): ``tests_ok`` is None, not a failure."""
        hidden = self.hidden_tests
        return {
            "has_code": self.has_code,
            "build_ok": self.build_ok,
            "clippy_ok": self.clippy_ok,
            "tests_ok": self.tests_ok if tests_asked else None,
            "tests_passed": self.own_tests.passed,
            "tests_failed": self.own_tests.failed,
            "tests_ignored": self.own_tests.ignored,
            "test_fns": len(self.source.test_fns),
            "hidden_total": None if hidden is None else hidden.expected,
            "hidden_passed": None if hidden is None else hidden.passed,
            "hidden_ok": self.hidden_ok if hidden is not None else None,
            "hidden_failures": [] if hidden is None else list(hidden.failures),
            "error_codes": list(self.error_codes),
            "clippy_warnings": list(self.clippy_warnings),
            "timed_out": list(self.timed_out),
            "trivial_assertions": self.source.trivial_assertions,
            "meaningful_assertions": len(self.source.meaningful_assertions),
            "tests_calling_solution": self.source.tests_calling_solution,
            "forbidden": list(self.source.forbidden),
            "test_doubts": list(self.source.test_doubts),
            "off_task": list(self.off_task),
            "mismatched": list(self.mismatched),
            "own_tests_valid": self.own_checks.valid if self.own_checks.ran else None,
            "own_tests_discriminating": self.own_checks.discriminating if self.own_checks.ran else None,
            "diagnostics": self.diagnostics,
            "verify_seconds": round(sum(self.durations.values()), 4),
            "internal_error": self.internal_error,
        }
