"""One crate through the sandboxed toolchain: compiler passes and test runs -> one ``Report``.

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

If the model's own tests do not compile, the hidden tests are compiled again against the code with the model's
test code stripped, so a broken test module does not hide a correct solution.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from rust_rewards.report import Report, SourceFacts, TestCounts
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig, check_workdir
from rust_rewards.verify.crate import write_crate
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
from rust_rewards.verify.observe import ReferenceNotes
from rust_rewards.verify.sandbox import Limits
from rust_rewards.verify.toolchain import find_toolchain, shared_toolchain


def in_crate(code: str, hidden: HiddenTests | None, config: VerifierConfig, slot: int, facts: SourceFacts,
             variants: tuple[tuple[str, str], ...] = (), first: sandbox.RunResult | None = None, *,
             expected_notes: ReferenceNotes | None = None, note_runs: int = 1,
             ) -> tuple[Report, dict[str, tuple[str, ...]]]:
    """Write ``code``'s crate (with ``variants``, the other solutions its own tests run against), verify it
    (``config.mode`` cargo or direct) and remove it: the report and what the hidden tests noted (``Job.observed``,
    with ``note_runs`` > 1)."""
    tc = find_toolchain()
    iso = sandbox.detect_isolation()
    if iso.drop_uid:
        tc = shared_toolchain(tc)
        check_workdir(config.workdir or tempfile.gettempdir())
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
