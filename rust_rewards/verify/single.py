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
import json
import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from rust_rewards.report import Report, SourceFacts, TestCounts
from rust_rewards.rust.facts import analyse
from rust_rewards.rust.lexer import tokenize
from rust_rewards.rust.mutants import body_mutants, mutants
from rust_rewards.rust.names import top_level
from rust_rewards.rust.rules import macro_definitions
from rust_rewards.rust.signatures import check_items, forged_comparisons, required_items, shadowing_methods
from rust_rewards.rust.soundness import soundness_holes
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig, check_workdir, code_hash
from rust_rewards.verify.crate import hidden_expected, write_crate
from rust_rewards.verify.diagnostics import parse_compiler
from rust_rewards.verify.harness import (
    DEV,
    FORCE_WARN,
    RELEASE,
    Job,
    TestPlan,
    clippy_base,
    harness_step,
    job_report,
    lints_in_test_code,
    run_tests,
    rustc_base,
    settle_harness,
    skipped_hidden,
)
from rust_rewards.verify.observe import ReferenceNotes, observable
from rust_rewards.verify.sandbox import Limits
from rust_rewards.verify.toolchain import find_toolchain, shared_toolchain

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
    verdict, _ = _in_crate(code, hidden, config, slot, facts, first,
                           expected_notes=notes_to_match(code, hidden, config, slot))
    return task_checked(replace(verdict, code_hash=key), code, hidden)


def _in_crate(code: str, hidden: HiddenTests | None, config: VerifierConfig, slot: int, facts,
              first: sandbox.RunResult | None = None, *, expected_notes: ReferenceNotes | None = None,
              note_runs: int = 1) -> tuple[Report, dict[str, tuple[str, ...]]]:
    """Write ``code``'s crate, verify it (``config.mode`` cargo or direct) and remove it: the report and what the hidden
    tests noted (``Job.observed``, with ``note_runs`` > 1)."""
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
        job = Job(layout, tc, config, slot, base / "logs", expected_notes=expected_notes, note_runs=note_runs)
        verdict = (_verify_cargo(job, code, facts) if config.mode == "cargo"
                   else _verify_direct(job, code, facts, first))
        return replace(verdict, isolation=iso.layers), job.observed
    finally:
        shutil.rmtree(base, ignore_errors=True)


NOTE_RUNS = 3
"""Runs of the reference's hidden tests: a test is judged by its notes only when all three noted the same."""


def reference_observations(hidden: HiddenTests, config: VerifierConfig, slot: int = 0) -> ReferenceNotes | None:
    """What each hidden test's assertions compare with the task's reference as the solution; None when the task has
    no reference. Computed once per task and process (in ``direct`` mode when ``config`` is batch mode's). A reference
    that does not build or fails a hidden test is ``ReferenceNotes.broken``: no completion passes a hidden test of
    that task. One whose hidden run timed out raises ``SandboxError`` (an internal error, never a pass; not cached:
    the next call runs it again)."""
    if not observable(hidden.reference):
        return None
    own = replace(config, mode="cargo" if config.mode == "cargo" else "direct")
    key = (hidden, own.fingerprint())  # batch mode's notes are direct mode's: one run serves both
    with _OBSERVED_LOCK:
        task_lock = _OBSERVING.setdefault(key, threading.Lock())
    with task_lock:  # one run per task: the other workers wait for it rather than repeat it
        if key in _OBSERVED:
            return _OBSERVED[key]
        report, observed = _in_crate(hidden.reference, hidden, own, slot, task_facts(hidden.reference, hidden),
                                     note_runs=NOTE_RUNS)
        counts = report.hidden_tests
        if report.timed_out or (counts is not None and counts.timed_out):
            raise sandbox.SandboxError(f"the task's reference ran out of time in its own run "
                                       f"({', '.join(report.timed_out) or 'hidden tests'}): run again")
        tests = counts.expected if counts is not None else 0
        broken = ("did not build" if not report.build_ok or counts is None else
                  f"passed {counts.passed} of {tests}: {'; '.join(counts.failures)}"[:300]
                  if counts.passed != tests else "")
        _OBSERVED[key] = ReferenceNotes(observed if not broken else {}, tests, broken)
        return _OBSERVED[key]


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


def task_variants(code: str, hidden: HiddenTests | None, config: VerifierConfig,
                  slot: int = 0) -> tuple[tuple[str, str], ...]:
    """The other solutions the model's own tests run against: the reference and a wrong mutant of it, or, without
    a reference (or without a usable mutant of it), two mutants of the completion itself."""
    body, tokens = body_mutants(code), mutants(code, limit=OWN_MUTANTS)
    order = dict.fromkeys([*body[:1], *tokens[:2], *body[1:], *tokens[2:]])
    own = tuple(("mutant", m) for m in list(order)[:OWN_MUTANTS])
    if hidden is not None and hidden.reference.strip():
        wrong = wrong_variant(hidden, config, slot)
        return (("reference", hidden.reference), *((("mutant", wrong),) if wrong else own))
    return own


_check_items = functools.lru_cache(maxsize=4096)(check_items)
_shadowing_methods = functools.lru_cache(maxsize=4096)(shadowing_methods)


_WRONG: dict[tuple[HiddenTests, str], str | None] = {}


_WRONG_LOCK = threading.Lock()
_OBSERVED: dict[tuple, ReferenceNotes] = {}
_OBSERVED_LOCK = threading.Lock()
_OBSERVING: dict[tuple, threading.Lock] = {}


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
    quick = replace(config, run_limits=replace(config.run_limits, wall_seconds=min(config.run_limits.wall_seconds,
                                                                                   SEARCH_TEST_SECONDS)))
    for candidate in mutants(hidden.reference, limit=MUTANTS_TRIED):
        r = verify_code(candidate, plain, quick, slot)
        if (r.build_ok and r.hidden_tests is not None and r.hidden_tests.passed < r.hidden_tests.expected
                and not r.timed_out and "panicked at src/lib.rs" not in r.test_output):
            found = candidate
            break
    with _WRONG_LOCK:
        _WRONG[key] = found
    return found


# ---- direct mode -------------------------------------------------------------------------------------------


def _codegen_step(job: Job) -> sandbox.Step:
    name = job.layout.lib_name
    return sandbox.Step("build_codegen", [
        *rustc_base(job, job.tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
        "--emit=link", *DEV, "-o", f"target/lib{name}.rlib",
    ])


def _verify_direct(job: Job, code: str, facts, first: sandbox.RunResult | None = None) -> Report:
    layout, limits = job.layout, job.config.compile_limits
    name = layout.lib_name
    own_expected = len(facts.test_fns)
    harness = bool(own_expected or layout.hidden_in_lib)
    profile = RELEASE if layout.hidden is not None and layout.hidden.release else DEV
    # When a test harness is compiled anyway, clippy only needs analysis (as `cargo clippy` does) and the
    # harness compile, with `-C link-dead-code`, monomorphizes every item as the library build would.
    emit = "metadata" if harness and not layout.integration_tests else "link"
    eager = ["-C", "link-dead-code"] if emit == "metadata" else []
    build_step = sandbox.Step("build", [
        *clippy_base(job, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
        f"--emit={emit}", *DEV, "-o", f"target/lib{name}.r{'meta' if emit == 'metadata' else 'lib'}",
    ], stop_unless_ok=True)
    test_step = harness_step(job, profile, f"target/{name}-test", eager)
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
        return job_report(job, facts, False, outcome, TestCounts(expected=own_expected), skipped_hidden(layout))
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
                return job_report(job, facts, False, outcome.merged(parse_compiler(codegen.stderr, clippy_pass=False)),
                               TestCounts(expected=own_expected), skipped_hidden(layout))
        test_outcome, (own_ok, hidden_ok_compile, variants_ok), results = settle_harness(
            job, test, own=bool(own_expected), hidden=layout.hidden_in_lib,
            recompile=lambda phase: job.run(phase, harness_step(job, profile, binary).argv, limits=limits))
        outcome = outcome.merged(test_outcome)
        if own_ok:
            outcome = outcome.merged(lints_in_test_code(results[-1].stderr, lib.stderr, frozenset({"src/lib.rs"})))
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
    return job_report(job, facts, True, outcome, ran.own, ran.hidden, ran.checks)


def _integration_compile_steps(job: Job, profile: list[str]) -> list[sandbox.Step]:
    """Compile steps for integration-shaped hidden tests (they link the library rlib by name)."""
    layout, tc = job.layout, job.tc
    if not layout.integration_tests:
        return []
    name = layout.lib_name
    rlib = f"target/lib{name}.rlib"
    steps = []
    if profile is RELEASE:
        rlib = f"target/release/lib{name}.rlib"
        steps.append(sandbox.Step("hidden_compile:lib", [
            *rustc_base(job, tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name, *profile,
            "-o", rlib,
        ]))
    for i, rel in enumerate(layout.integration_tests):
        stem = Path(rel).stem
        steps.append(sandbox.Step(f"hidden_compile:{i}", [
            *rustc_base(job, tc.rustc, rel), "--test", "--crate-name", stem, "--extern", f"{name}={rlib}",
            "-L", "dependency=target", *profile, *layout.std_link(rel), "-o", f"target/{stem}-itest",
        ]))
    return steps


# ---- cargo mode (reference) --------------------------------------------------------------------------------


def _cargo(job: Job, phase: str, args: list[str], *, limits: Limits, tool_args: tuple[str, ...] = ()
           ) -> sandbox.RunResult:
    return job.run(phase, [str(job.tc.cargo), *args, "--offline", "--message-format=json", "--quiet",
                           *(("--", *tool_args) if tool_args else ())], limits=limits)


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


def _verify_cargo(job: Job, code: str, facts) -> Report:
    """``cargo build``, ``cargo clippy`` and ``cargo test --no-run``; the test binaries cargo built then run
    one test per process, after the hidden sources are deleted (cargo would rebuild without them)."""
    layout, limits = job.layout, job.config.compile_limits
    build = _cargo(job, "build", ["build"], limits=limits)
    outcome = parse_compiler(build.stdout, clippy_pass=False)
    build_ok = build.returncode == 0 and not build.timed_out
    # every target: the model's test module is linted too (only its own file's lints count, each once)
    clippy = _cargo(job, "clippy", ["clippy", "--all-targets", "--keep-going"], limits=limits, tool_args=FORCE_WARN)
    clippy_outcome = lints_in_test_code(clippy.stdout, "", frozenset({"src/lib.rs"}))
    outcome = replace(outcome, clippy_lints=clippy_outcome.clippy_lints,
                      rendered=outcome.rendered + "".join(
                          r for r in [clippy_outcome.rendered] if clippy_outcome.clippy_lints))
    if not build_ok:
        return job_report(job, facts, False, outcome, TestCounts(expected=len(facts.test_fns)), skipped_hidden(layout))
    release = ["--release"] if layout.hidden is not None and layout.hidden.release else []
    own_expected = len(facts.test_fns)
    own_ok = hidden_ok = variants_ok = False
    binaries: dict[str, str] = {}
    if own_expected or layout.hidden_in_lib:
        no_run = ["test", "--lib", "--no-run", *release]
        compile_ = _cargo(job, "test_compile", no_run, limits=limits)
        test_outcome, (own_ok, hidden_ok, variants_ok), results = settle_harness(
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
    return job_report(job, facts, True, outcome, ran.own, ran.hidden, ran.checks)
