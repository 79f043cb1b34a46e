"""Verify one piece of code: crate -> sandboxed compiler passes and test runs -> one ``Report``.

Two modes give the same verdicts:

- ``cargo`` (reference): ``cargo build``, ``cargo clippy``, ``cargo test --no-run``, then the test binaries cargo
  built, all ``--offline --message-format=json``;
- ``direct`` (default, fast): the passes cargo would run for a std-only crate, without cargo: one fused
  ``clippy-driver --emit=link`` pass gives the build verdict (every non-clippy error) and the clippy lints at
  once, then ``rustc --test`` builds the test harness (std linked dynamically, no debug info) and the test
  binary runs. Code that does not build stops after the first pass.

The model's code is compiled under ``#![forbid(unsafe_code)]`` (``crate.FORBID``: no ``unsafe``, no linker,
section or export attributes, at any ``cfg_attr`` depth: the compiler decides), and every pass sees only the
system directories, the toolchain and the crate.

**Test verdicts come from seals, not from output** (``crate.seal_tests``): each test runs in its own process
(``--exact NAME``) and passed only when that process exited 0 and printed the test's nonce, which only the test's
own guard knows. Test names, hidden sources and nonces are all fixed before anything runs; hidden and variant
sources are deleted and the binaries made unreadable before any test binary starts; test runs get no ``/proc``.

**Own tests are checked against other solutions** when the task gives a reference: a copy of them runs against
the reference (a test failing there earns nothing) and against a wrong, non-panicking mutant of it (a test
passing there proves nothing: ``OwnTestChecks.discriminating`` counts the ones that fail on it). Without a
reference, two mutants of the completion itself play the wrong variants.

If the model's own tests do not compile, the hidden tests are compiled again against the code with the model's
test code stripped, so a broken test module does not hide a correct solution.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rust_rewards.report import HIDDEN_OUTPUT, OwnTestChecks, Report, SourceFacts, TestCounts
from rust_rewards.rust.lexer import analyse
from rust_rewards.rust.mutants import mutants
from rust_rewards.rust.signatures import check_items, forged_comparisons
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.crate import (
    CrateLayout,
    SealedTest,
    hidden_expected,
    remove_hidden_sources,
    rewrite_lib,
    strip_seals,
    write_crate,
)
from rust_rewards.verify.diagnostics import CompileOutcome, parse_compiler
from rust_rewards.verify.sandbox import COMPILE_LIMITS, RUN_LIMITS, Limits
from rust_rewards.verify.toolchain import Toolchain, find_toolchain, shared_toolchain

MODES = ("direct", "cargo", "batch")
"""``batch`` verifies ``Verifier.verify_many`` batches together (``rust_rewards.verify.batch``); a single completion,
and every completion that cannot share a crate, takes the ``direct`` path."""
_TEXT_CAP = 20_000
_DEV = ["-C", "debuginfo=0"]
_RELEASE = ["-C", "opt-level=3", "-C", "debug-assertions=off", "-C", "overflow-checks=off"]
MUTANTS_TRIED = 6
"""Mutants of a reference tried, in order, for a wrong variant (each costs one verification, once per task)."""


@dataclass(frozen=True)
class VerifierConfig:
    """How code is verified. Part of the cache key: change it and results are recomputed."""

    mode: str = "direct"
    compile_limits: Limits = COMPILE_LIMITS
    run_limits: Limits = RUN_LIMITS
    workdir: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")

    def fingerprint(self) -> str:
        return f"{self.mode}|{self.compile_limits}|{self.run_limits}"


def code_hash(code: str, hidden: HiddenTests | None, config: VerifierConfig) -> str:
    """The cache key of one verification."""
    h = hashlib.sha256()
    for part in (code, repr(hidden), config.fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class _Job:
    layout: CrateLayout
    tc: Toolchain
    config: VerifierConfig
    slot: int
    logs: Path
    durations: dict[str, float] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        root = self.layout.root
        return {
            "PATH": f"{self.tc.bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(root),
            "CARGO_HOME": str(root / ".cargo-home"),
            "CARGO_NET_OFFLINE": "true",
            "CARGO_INCREMENTAL": "0",
            "CARGO_TERM_COLOR": "never",
            "LD_LIBRARY_PATH": str(self.tc.std_lib_dir),
            "MALLOC_ARENA_MAX": "2",
            "RUST_BACKTRACE": "0",
            "RUST_TEST_THREADS": "1",
            "LANG": "C.UTF-8",
        }

    def run(self, phase: str, argv: list[str], *, limits: Limits, writable: bool = True) -> sandbox.RunResult:
        """One phase in its own sandbox call."""
        return self.run_steps(phase, [sandbox.Step(phase, argv)], limits=limits, writable=writable)[phase]

    def run_steps(self, group: str, steps: list[sandbox.Step], *, limits: Limits,
                  writable: bool = True) -> dict[str, sandbox.RunResult]:
        """Several phases in one sandbox call; steps are named after their phase.

        Every call sees a minimal file system: system dirs, the crate, and the toolchain (compiler passes) or
        only std's shared library (test runs, which also get no ``/proc``).
        """
        extra = (self.tc.sysroot,) if writable else (self.tc.std_lib_dir,)
        results = sandbox.run_steps(
            steps, crate=self.layout.root, log_dir=self.logs / group, limits=limits, env=self.env(),
            slot=self.slot, writable=writable, extra_ro=extra, minimal_fs=True,
        )
        for name, result in results.items():
            self._account(name.split(":")[0], result)
        return results

    def _account(self, phase: str, result: sandbox.RunResult) -> None:
        self.durations[phase] = self.durations.get(phase, 0.0) + result.seconds
        if result.timed_out and phase not in self.timed_out:
            self.timed_out.append(phase)


def verify_code(
    code: str, hidden: HiddenTests | None = None, config: VerifierConfig | None = None, slot: int = 0,
    first: sandbox.RunResult | None = None,
) -> Report:
    """Verify Rust source ``code`` (already extracted) against optional hidden tests.

    ``first``: the direct path's first pass (clippy), already run on exactly this code as ``src/lib.rs`` (batch
    mode runs it for many completions in one sandbox call): it is not run again."""
    config = config or VerifierConfig()
    facts = task_facts(code, hidden)
    key = code_hash(code, hidden, config)
    if not code.strip():
        hidden_counts = None if hidden is None else TestCounts(expected=hidden_expected(hidden))
        return task_checked(Report(has_code=False, code_hash=key, source=facts, hidden_tests=hidden_counts,
                                   mode=config.mode), code, hidden)
    tc = find_toolchain()
    iso = sandbox.detect_isolation()
    if iso.drop_uid:
        tc = shared_toolchain(tc)
        check_workdir(config.workdir or tempfile.gettempdir())
    variants = task_variants(code, hidden, config, slot) if wants_variants(code, hidden, facts) else ()
    base = Path(tempfile.mkdtemp(prefix="rr-", dir=config.workdir))
    try:
        base.chmod(0o755)
        crate_dir = base / "crate"
        crate_dir.mkdir()
        layout = write_crate(crate_dir, code, hidden, variants)
        sandbox.prepare_dir(crate_dir, slot)
        job = _Job(layout, tc, config, slot, base / "logs")
        verdict = (_verify_cargo(job, code, facts) if config.mode == "cargo"
                   else _verify_direct(job, code, facts, first))
        return task_checked(replace(verdict, code_hash=key, isolation=iso.layers), code, hidden)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def task_facts(code: str, hidden: HiddenTests | None) -> SourceFacts:
    """``source.analyse(code)``, where ``unsafe`` is no hack reason for a task whose reference uses it."""
    facts = analyse(code)
    if hidden is not None and "unsafe code" in facts.forbidden and hidden.allows_unsafe:
        return replace(facts, forbidden=tuple(r for r in facts.forbidden if r != "unsafe code"))
    return facts


def wants_variants(code: str, hidden: HiddenTests | None, facts: SourceFacts) -> bool:
    """Whether the own tests' checks could pay anything: the code has tests, no hack reason and answers the task
    (otherwise ``test_reward`` and ``assertion_reward`` are 0 whatever the variants say, so none is compiled)."""
    if not facts.test_fns or facts.forbidden:
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
    return replace(report, off_task=found.missing, mismatched=found.mismatched)


def task_variants(code: str, hidden: HiddenTests | None, config: VerifierConfig,
                  slot: int = 0) -> tuple[tuple[str, str], ...]:
    """The other solutions the model's own tests run against: the reference and a wrong mutant of it, or, without
    a reference (or without a usable mutant of it), two mutants of the completion itself."""
    own = tuple(("mutant", m) for m in mutants(code, limit=2))
    if hidden is not None and hidden.reference.strip():
        wrong = wrong_variant(hidden, config, slot)
        return (("reference", hidden.reference), *((("mutant", wrong),) if wrong else own))
    return own


_check_items = functools.lru_cache(maxsize=4096)(check_items)
_WRONG: dict[tuple[HiddenTests, str], str | None] = {}
_WRONG_LOCK = threading.Lock()


def wrong_variant(hidden: HiddenTests, config: VerifierConfig, slot: int = 0) -> str | None:
    """The first mutant of the reference (``mutants.mutants``) that builds, fails a hidden test by assertion (not
    by a panic in its own code, not by a timeout); ``None`` when none of the first ``MUTANTS_TRIED`` does.
    Computed once per task and process."""
    key = (hidden, config.fingerprint())
    with _WRONG_LOCK:
        if key in _WRONG:
            return _WRONG[key]
    found = None
    plain = replace(hidden, reference="", prompt="")
    for candidate in mutants(hidden.reference, limit=MUTANTS_TRIED):
        r = verify_code(candidate, plain, config, slot)
        if (r.build_ok and r.hidden_tests is not None and r.hidden_tests.passed < r.hidden_tests.expected
                and not r.timed_out and "panicked at src/lib.rs" not in r.test_output):
            found = candidate
            break
    with _WRONG_LOCK:
        _WRONG[key] = found
    return found


@functools.cache
def check_workdir(path: str) -> None:
    """The sandbox user must be able to reach the job folders; fail loudly instead of failing every build."""
    if not sandbox.detect_isolation().drop_uid:
        return
    for part in [Path(path), *Path(path).parents]:
        if not part.stat().st_mode & 0o001:
            raise PermissionError(
                f"verifier workdir {path}: {part} is not searchable by other users, so the sandbox user cannot "
                "reach the crates; choose a workdir under a world-searchable folder (e.g. /var/tmp)"
            )


def _report(job: _Job, facts, build_ok: bool, outcome: CompileOutcome, own: TestCounts,
            hidden: TestCounts | None, checks: OwnTestChecks | None = None) -> Report:
    return Report(
        has_code=True,
        build_ok=build_ok,
        clippy_ok=build_ok and not outcome.clippy_lints and not {"build", "clippy"} & set(job.timed_out),
        error_codes=outcome.error_codes,
        clippy_warnings=tuple(lint.removeprefix("clippy::") for lint in outcome.clippy_lints),
        rustc_warnings=outcome.rustc_warnings,
        own_tests=own,
        hidden_tests=hidden,
        own_checks=checks or OwnTestChecks(),
        source=facts,
        timed_out=tuple(job.timed_out),
        durations={k: round(v, 4) for k, v in job.durations.items()},
        diagnostics=strip_seals(outcome.rendered)[:_TEXT_CAP],
        test_output="\n".join(job.outputs)[:_TEXT_CAP],
        mode=job.config.mode,
    )


def _skipped(layout: CrateLayout) -> TestCounts | None:
    return None if layout.hidden is None else TestCounts(expected=layout.hidden_expected)


# ---- test runs ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TestPlan:
    """Which compiled tests to run: the model's own (in ``own_binary``, when it compiled with them), the hidden
    tests per binary, and the variants' copies of the own tests (in ``own_binary``, when they compiled)."""

    own_binary: str = ""
    own: tuple[SealedTest, ...] = ()
    hidden: tuple[tuple[str, tuple[SealedTest, ...]], ...] = ()
    variants: bool = False


def _steps(group: str, binary: str, tests: tuple[SealedTest, ...], *, hidden: bool) -> list[sandbox.Step]:
    """One process per test, by exact name (hidden tests include ``#[ignore]``d ones; own ignored tests do not
    run). The own tests and their copies in the variants are one timeout group, the hidden tests another."""
    extra = ["--include-ignored"] if hidden else []
    return [sandbox.Step(f"{group}:{i}", [binary, "--exact", t.name, "--test-threads=1", *extra],
                         group="hidden" if hidden else "own", model_controlled=True)
            for i, t in enumerate(tests) if hidden or not t.ignored]


def _passed(results: dict[str, sandbox.RunResult], group: str, tests: tuple[SealedTest, ...]) -> list[bool]:
    """Per test: its process exited 0 in time and printed the test's nonce."""
    out = []
    for i, t in enumerate(tests):
        r = results.get(f"{group}:{i}")
        out.append(r is not None and r.returncode == 0 and not r.timed_out and f"\n{t.nonce}\n" in r.stdout)
    return out


_FILTERED = re.compile(r"\d+ filtered out; ")
"""How many other tests the binary holds: it differs between a crate of its own and a shared one."""


@dataclass(frozen=True)
class TestResults:
    own: TestCounts
    hidden: TestCounts | None
    checks: OwnTestChecks


def run_tests(job: _Job, plan: TestPlan, *, own_expected: int, hidden_compiled: bool) -> TestResults:
    """Delete every source but the model's, make the binaries unreadable, run each planned test in its own
    process (one sandbox call) and judge it by its seal."""
    layout = job.layout
    tree = layout.tree
    remove_hidden_sources(layout)
    steps: list[sandbox.Step] = []
    if plan.own:
        steps += _steps("test", plan.own_binary, plan.own, hidden=False)
    variants = tree.variants if tree is not None and plan.variants else ()
    for k, v in enumerate(variants):
        steps += _steps(f"variant{k}", plan.own_binary, v.tests, hidden=False)
    for i, (binary, tests) in enumerate(plan.hidden):
        steps += _steps(f"hidden{i}", binary, tests, hidden=True)
    for binary in {plan.own_binary, *(b for b, _ in plan.hidden)} - {""}:
        path = layout.root / binary
        if path.exists():
            path.chmod(0o111)
    results = job.run_steps("run", steps, limits=job.config.run_limits, writable=False) if steps else {}
    nonces = [t.nonce for t in (*plan.own, *(t for _, ts in plan.hidden for t in ts))]
    for prefix in ("test:", "hidden"):  # own tests' output first: feedback shows it up to HIDDEN_OUTPUT
        if prefix == "hidden" and any(name.startswith(prefix) for name in results):
            job.outputs.append(HIDDEN_OUTPUT)
        for name, result in results.items():
            if name.startswith(prefix):
                text = _FILTERED.sub("", result.stdout)
                for nonce in nonces:
                    text = text.replace(f"\n{nonce}\n", "\n")
                job.outputs.append(text)
    timed = {name.split(":")[0] for name, r in results.items() if r.timed_out}
    own_ran = [t for t in plan.own if not t.ignored]
    own_ok = _passed(results, "test", plan.own)
    own_passed = sum(ok for ok, t in zip(own_ok, plan.own, strict=True) if not t.ignored)
    own = TestCounts(
        passed=own_passed, failed=len(own_ran) - own_passed, ignored=len(plan.own) - len(own_ran),
        expected=len(own_ran), summary_seen=bool(own_ran), timed_out="test" in timed,
    ) if plan.own else TestCounts(expected=own_expected, timed_out=False)
    hidden = None
    if layout.hidden is not None:
        passed = sum(sum(_passed(results, f"hidden{i}", tests)) for i, (_, tests) in enumerate(plan.hidden))
        ran = hidden_compiled and bool(plan.hidden)
        hidden = TestCounts(passed=passed, failed=layout.hidden_expected - passed if ran else 0,
                            expected=layout.hidden_expected, summary_seen=ran,
                            timed_out=any(g.startswith("hidden") for g in timed))
    return TestResults(own, hidden, _checks(layout, plan, results, own_ok))


def _checks(layout: CrateLayout, plan: TestPlan, results: dict[str, sandbox.RunResult],
            own_ok: list[bool]) -> OwnTestChecks:
    """How the own tests that passed fared on the variants (see ``OwnTestChecks``)."""
    kinds = tuple(kind for kind, _ in layout.variant_codes)
    if not plan.own or not any(own_ok):
        return OwnTestChecks(kinds)
    compiled = layout.tree.variants if layout.tree is not None and plan.variants else ()
    if not compiled and kinds:
        return OwnTestChecks(kinds, compiled=False)
    on = {v.kind: dict(zip((t.key for t in v.tests), _passed(results, f"variant{k}", v.tests), strict=True))
          for k, v in enumerate(compiled) if v.kind == "reference"}
    wrong = [dict(zip((t.key for t in v.tests), _passed(results, f"variant{k}", v.tests), strict=True))
             for k, v in enumerate(compiled) if v.kind == "mutant"]
    valid = discriminating = 0
    for t, ok in zip(plan.own, own_ok, strict=True):
        if not ok or t.ignored or ("reference" in on and not on["reference"].get(t.key, False)):
            continue
        valid += 1
        discriminating += any(not w.get(t.key, True) for w in wrong)
    return OwnTestChecks(kinds, compiled=True, valid=valid, discriminating=discriminating)


# ---- direct mode -------------------------------------------------------------------------------------------

def _rustc_base(job: _Job, tool: Path, src: str) -> list[str]:
    return [str(tool), "--edition", job.layout.edition, src, "--error-format=json"]


def _harness_step(job: _Job, profile: list[str], output: str, eager: list[str] = (), step: str = "test_compile"
                  ) -> sandbox.Step:
    name = job.layout.lib_name
    return sandbox.Step(step, [
        *_rustc_base(job, job.tc.rustc, "src/lib.rs"), "--test", "--crate-name", name, *profile, *eager,
        "-C", "prefer-dynamic", "-o", output,
    ])


def _codegen_step(job: _Job) -> sandbox.Step:
    name = job.layout.lib_name
    return sandbox.Step("build_codegen", [
        *_rustc_base(job, job.tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
        "--emit=link", *_DEV, "-o", f"target/lib{name}.rlib",
    ])


def _verify_direct(job: _Job, code: str, facts, first: sandbox.RunResult | None = None) -> Report:
    layout, tc, limits = job.layout, job.tc, job.config.compile_limits
    name = layout.lib_name
    own_expected = len(facts.test_fns)
    harness = bool(own_expected or layout.hidden_in_lib)
    profile = _RELEASE if layout.hidden is not None and layout.hidden.release else _DEV
    # When a test harness is compiled anyway, clippy only needs analysis (as `cargo clippy` does) and the
    # harness compile, with `-C link-dead-code`, monomorphizes every item as the library build would.
    emit = "metadata" if harness and not layout.integration_tests else "link"
    eager = ["-C", "link-dead-code"] if emit == "metadata" else []
    build_step = sandbox.Step("build", [
        *_rustc_base(job, tc.clippy_driver, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
        f"--emit={emit}", *_DEV, "-o", f"target/lib{name}.r{'meta' if emit == 'metadata' else 'lib'}",
    ], stop_unless_ok=True)
    test_step = _harness_step(job, profile, f"target/{name}-test", eager)
    integration_steps = _integration_compile_steps(job, profile)
    steps = [*([test_step] if harness else []), *integration_steps]
    if first is None:
        compiled = job.run_steps("compile", [build_step, *steps], limits=limits)
    else:  # as if ``build_step`` had just run and stopped the sequence unless it succeeded
        job._account("build", first)
        go_on = first.returncode == 0 and not first.timed_out and steps
        compiled = {"build": first, **(job.run_steps("compile", steps, limits=limits) if go_on else {})}
    lib = compiled["build"]
    outcome = parse_compiler(lib.stderr)
    if lib.timed_out:
        job.timed_out.append("clippy")
    build_ok = (not lib.timed_out and outcome.hard_errors == 0
                and (lib.returncode == 0 or outcome.clippy_errors > 0))
    if not build_ok:
        return _report(job, facts, False, outcome, TestCounts(expected=own_expected), _skipped(layout))
    if lib.returncode != 0:
        # Only deny-level clippy lints failed: the build is fine, so run the passes the script skipped.
        compiled.update(job.run_steps("compile_after_clippy", [
            _codegen_step(job), *([test_step] if harness else []), *integration_steps,
        ], limits=limits))
    binary = f"target/{name}-test"
    own_ok = hidden_ok_compile = variants_ok = False
    if harness:
        test = compiled["test_compile"]
        harness_ok = test.returncode == 0 and not test.timed_out
        if not harness_ok and eager:
            codegen = job.run("build_codegen", _codegen_step(job).argv, limits=limits)
            if codegen.returncode != 0 or codegen.timed_out:
                if codegen.timed_out:
                    job.timed_out.append("build")
                return _report(job, facts, False, outcome.merged(parse_compiler(codegen.stderr, clippy_pass=False)),
                               TestCounts(expected=own_expected), _skipped(layout))
        test_outcome, (own_ok, hidden_ok_compile, variants_ok), _ = _settle_harness(
            job, test, own=bool(own_expected), hidden=layout.hidden_in_lib,
            recompile=lambda phase: job.run(phase, _harness_step(job, profile, binary).argv, limits=limits))
        outcome = outcome.merged(test_outcome)
    layout = job.layout
    integration_ok = all(
        (res := compiled.get(step.name)) is not None and res.returncode == 0 and not res.timed_out
        for step in integration_steps
    )
    if layout.hidden_in_lib:
        hidden_ok = hidden_ok_compile
        hidden_runs = ((binary, layout.seals[0]),) if hidden_ok else ()
    else:
        hidden_ok = integration_ok
        hidden_runs = tuple(zip((f"target/{Path(rel).stem}-itest" for rel in layout.integration_tests),
                                layout.seals, strict=True)) if hidden_ok else ()
    tree = layout.tree
    plan = TestPlan(binary, tree.own if own_ok and tree is not None else (), hidden_runs, variants_ok)
    ran = run_tests(job, plan, own_expected=own_expected, hidden_compiled=hidden_ok)
    return _report(job, facts, True, outcome, ran.own, ran.hidden, ran.checks)


def _settle_harness(job: _Job, first: sandbox.RunResult, *, own: bool, hidden: bool,
                    recompile: Callable[[str], sandbox.RunResult], cargo: bool = False
                    ) -> tuple[CompileOutcome, tuple[bool, bool, bool], list[sandbox.RunResult]]:
    """After a failed harness compile, drop what does not compile and compile again (``recompile(phase)``, at most
    3 times): variants the own tests do not compile against, hidden tests that do not compile against the code,
    the model's own test code when it is what fails. Returns the compiler messages to report (those of the
    compile that failed on the model's test code, else of the last one; never a variant's), whether the own
    tests, the hidden tests and the variants are in the binary, and every compile's result."""
    text = (lambda r: r.stdout) if cargo else (lambda r: r.stderr)  # noqa: E731
    variants = bool(job.layout.variant_files)
    result, results = first, [first]
    outcome = shown = _outcome(text(result), job.layout)
    ok = result.returncode == 0 and not result.timed_out
    for _ in range(3):
        if ok:
            break
        errors = set(_outcome(text(result), job.layout, keep_variants=True).error_files)
        before = (own, hidden, variants)
        if variants and errors & set(job.layout.variant_files):
            variants = False
        if hidden and job.layout.hidden_file in errors:
            hidden = False
        if own and ("src/lib.rs" in errors or before == (own, hidden, variants)):
            own = variants = False
            shown = outcome
        if (own, hidden, variants) == before or not (own or hidden):
            break
        job.layout = rewrite_lib(job.layout, own_tests=own, with_hidden=hidden, with_variants=variants)
        result = recompile("test_compile" if own else "hidden_compile")
        results.append(result)
        outcome = _outcome(text(result), job.layout)
        ok = result.returncode == 0 and not result.timed_out
    if not ok:
        own = hidden = variants = False
    return (shown if shown is not outcome and not own else outcome), (own, hidden, variants), results


def _outcome(stderr: str, layout: CrateLayout, keep_variants: bool = False) -> CompileOutcome:
    """The harness compile's messages; those located in a variant's file are dropped (they quote the reference,
    which the model never sees) unless ``keep_variants``."""
    files = set() if keep_variants else set(layout.variant_files)
    lines = [line for line in stderr.splitlines() if not files or _primary_file(line) not in files]
    return parse_compiler("\n".join(lines), clippy_pass=False)


def _primary_file(line: str) -> str | None:
    """The file of a JSON message's primary span (rustc's, or cargo's wrapped ``compiler-message``)."""
    if not line.startswith("{"):
        return None
    try:
        msg = json.loads(line)
        msg = msg.get("message") if msg.get("reason") == "compiler-message" else msg
        spans = msg.get("spans") or []
    except (json.JSONDecodeError, AttributeError):
        return None
    return next((sp.get("file_name") for sp in spans if isinstance(sp, dict) and sp.get("is_primary")), None)


def _integration_compile_steps(job: _Job, profile: list[str]) -> list[sandbox.Step]:
    """Compile steps for integration-shaped hidden tests (they link the library rlib by name)."""
    layout, tc = job.layout, job.tc
    if not layout.integration_tests:
        return []
    name = layout.lib_name
    rlib = f"target/lib{name}.rlib"
    steps = []
    if profile is _RELEASE:
        rlib = f"target/release/lib{name}.rlib"
        steps.append(sandbox.Step("hidden_compile:lib", [
            *_rustc_base(job, tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name, *profile,
            "-o", rlib,
        ]))
    for i, rel in enumerate(layout.integration_tests):
        stem = Path(rel).stem
        steps.append(sandbox.Step(f"hidden_compile:{i}", [
            *_rustc_base(job, tc.rustc, rel), "--test", "--crate-name", stem, "--extern", f"{name}={rlib}",
            "-L", "dependency=target", *profile, "-C", "prefer-dynamic", "-o", f"target/{stem}-itest",
        ]))
    return steps


# ---- cargo mode (reference) --------------------------------------------------------------------------------

def _cargo(job: _Job, phase: str, args: list[str], *, limits: Limits) -> sandbox.RunResult:
    return job.run(phase, [str(job.tc.cargo), *args, "--offline", "--message-format=json", "--quiet"],
                   limits=limits)


def _executables(stdout: str) -> dict[str, str]:
    """Test executables cargo built, by target name (``lib`` for the library's harness), from its JSON."""
    found = {}
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            target = msg.get("target") or {}
            found["lib" if "lib" in (target.get("kind") or []) else target.get("name", "")] = msg["executable"]
    return found


def _verify_cargo(job: _Job, code: str, facts) -> Report:
    """``cargo build``, ``cargo clippy`` and ``cargo test --no-run``; the test binaries cargo built then run
    one test per process, after the hidden sources are deleted (cargo would rebuild without them)."""
    layout, limits = job.layout, job.config.compile_limits
    build = _cargo(job, "build", ["build"], limits=limits)
    outcome = parse_compiler(build.stdout, clippy_pass=False)
    build_ok = build.returncode == 0 and not build.timed_out
    clippy = _cargo(job, "clippy", ["clippy"], limits=limits)
    clippy_outcome = parse_compiler(clippy.stdout)
    outcome = replace(outcome, clippy_lints=clippy_outcome.clippy_lints,
                      rendered=outcome.rendered + "".join(
                          r for r in [clippy_outcome.rendered] if clippy_outcome.clippy_lints))
    if not build_ok:
        return _report(job, facts, False, outcome, TestCounts(expected=len(facts.test_fns)), _skipped(layout))
    release = ["--release"] if layout.hidden is not None and layout.hidden.release else []
    own_expected = len(facts.test_fns)
    own_ok = hidden_ok = variants_ok = False
    binaries: dict[str, str] = {}
    if own_expected or layout.hidden_in_lib:
        no_run = ["test", "--lib", "--no-run", *release]
        compile_ = _cargo(job, "test_compile", no_run, limits=limits)
        test_outcome, (own_ok, hidden_ok, variants_ok), results = _settle_harness(
            job, compile_, own=bool(own_expected), hidden=layout.hidden_in_lib, cargo=True,
            recompile=lambda phase: _cargo(job, phase, no_run, limits=limits))
        for result in results:
            binaries.update(_executables(result.stdout))
        layout = job.layout
        outcome = outcome.merged(test_outcome)
    hidden_binaries = [binaries.get("lib", "")]
    if layout.integration_tests:
        compile_ = _cargo(job, "hidden_compile", ["test", "--tests", "--no-run", *release], limits=limits)
        hidden_ok = compile_.returncode == 0 and not compile_.timed_out
        built = _executables(compile_.stdout)
        hidden_binaries = [built.get(Path(rel).stem, "") for rel in layout.integration_tests]
        hidden_ok = hidden_ok and all(hidden_binaries)
    hidden_ok = hidden_ok and layout.hidden is not None
    hidden_runs = tuple(zip(hidden_binaries, layout.seals, strict=False)) if hidden_ok else ()
    tree = layout.tree
    plan = TestPlan(binaries.get("lib", ""), tree.own if own_ok and tree is not None else (), hidden_runs,
                    variants_ok)
    ran = run_tests(job, plan, own_expected=own_expected, hidden_compiled=hidden_ok)
    return _report(job, facts, True, outcome, ran.own, ran.hidden, ran.checks)
