"""Verify one piece of code: crate -> sandboxed compiler passes and test runs -> one ``Report``.

Two modes give the same verdicts:

- ``cargo`` (reference): ``cargo build``, ``cargo clippy``, ``cargo test --no-run`` then ``cargo test``,
  all ``--offline --message-format=json``;
- ``direct`` (default, fast): the passes cargo would run for a std-only crate, without cargo: one fused
  ``clippy-driver --emit=link`` pass gives the build verdict (every non-clippy error) and the clippy lints at
  once, then ``rustc --test`` builds the test harness (std linked dynamically, no debug info) and the test
  binary runs. Code that does not build stops after the first pass.

Hidden tests live in a module (or test target) with an unguessable name and run in their own libtest
invocation that selects exactly the names the verifier wrote (``--exact``, ``--include-ignored``); their sources
are deleted before any test binary starts, and only those exact names count (``diagnostics.parse_hidden``). If
the model's own tests do not compile, the hidden tests are compiled again against the code with the model's
test code stripped, so a broken test module does not hide a correct solution.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from rust_rewards import sandbox
from rust_rewards.crate import CrateLayout, hidden_expected, remove_hidden_sources, rewrite_lib, write_crate
from rust_rewards.diagnostics import CompileOutcome, TestRun, parse_compiler, parse_hidden, parse_libtest
from rust_rewards.report import Report, TestCounts
from rust_rewards.sandbox import COMPILE_LIMITS, RUN_LIMITS, Limits
from rust_rewards.source import analyse, strip_test_code
from rust_rewards.tasks import HiddenTests
from rust_rewards.toolchain import Toolchain, find_toolchain, shared_toolchain

MODES = ("direct", "cargo", "batch")
"""``batch`` verifies ``Verifier.verify_many`` batches together (``rust_rewards.batch``); a single completion,
and every completion that cannot share a crate, takes the ``direct`` path."""
_TEXT_CAP = 20_000
_DEV = ["-C", "debuginfo=0"]
_RELEASE = ["-C", "opt-level=3", "-C", "debug-assertions=off", "-C", "overflow-checks=off"]


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
    forged: tuple[str, ...] = ()

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

        Test runs (``writable=False``) see a minimal file system: system dirs, std's shared library, the crate.
        """
        if writable:
            # bwrap gives the sandbox a private /tmp: a toolchain mirrored there must be bound in explicitly.
            extra = (self.tc.sysroot,) if str(self.tc.sysroot).startswith(tempfile.gettempdir()) else ()
        else:
            extra = (self.tc.std_lib_dir,)
        results = sandbox.run_steps(
            steps, crate=self.layout.root, log_dir=self.logs / group, limits=limits, env=self.env(),
            slot=self.slot, writable=writable, extra_ro=extra, minimal_fs=not writable,
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
    facts = analyse(code)
    key = code_hash(code, hidden, config)
    if not code.strip():
        hidden_counts = None if hidden is None else TestCounts(expected=hidden_expected(hidden))
        return Report(has_code=False, code_hash=key, source=facts, hidden_tests=hidden_counts, mode=config.mode)
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
        layout = write_crate(crate_dir, code, hidden)
        sandbox.prepare_dir(crate_dir, slot)
        job = _Job(layout, tc, config, slot, base / "logs")
        verdict = (_verify_cargo(job, code, facts) if config.mode == "cargo"
                   else _verify_direct(job, code, facts, first))
        return replace(verdict, code_hash=key, isolation=iso.layers)
    finally:
        shutil.rmtree(base, ignore_errors=True)


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


def _counts(run: TestRun | None, expected: int, timed_out: bool) -> TestCounts:
    if run is None:
        return TestCounts(expected=expected, timed_out=timed_out)
    return TestCounts(run.passed, run.failed, run.ignored, expected, run.summary_seen, timed_out)


def _report(job: _Job, facts, build_ok: bool, outcome: CompileOutcome, own: TestCounts,
            hidden: TestCounts | None) -> Report:
    return Report(
        has_code=True,
        build_ok=build_ok,
        clippy_ok=build_ok and not outcome.clippy_lints and not {"build", "clippy"} & set(job.timed_out),
        error_codes=outcome.error_codes,
        clippy_warnings=tuple(lint.removeprefix("clippy::") for lint in outcome.clippy_lints),
        rustc_warnings=outcome.rustc_warnings,
        own_tests=own,
        hidden_tests=hidden,
        source=facts,
        timed_out=tuple(job.timed_out),
        durations={k: round(v, 4) for k, v in job.durations.items()},
        diagnostics=outcome.rendered[:_TEXT_CAP],
        test_output="\n".join(job.outputs)[:_TEXT_CAP],
        mode=job.config.mode,
        forged=job.forged,
    )


def _skipped(layout: CrateLayout) -> TestCounts | None:
    return None if layout.hidden is None else TestCounts(expected=layout.hidden_expected)


def _own_test_args(layout: CrateLayout) -> list[str]:
    return ["--skip", f"{layout.hidden_module}::", "--test-threads=1"]


def _hidden_args(names: tuple[str, ...]) -> list[str]:
    """libtest arguments that run exactly the hidden tests named (no substring match can add others)."""
    return ["--exact", *names, "--include-ignored", "--test-threads=1"]


def _run_tests(job: _Job, own: tuple[str, bool], hidden: list[tuple[str, tuple[str, ...]]],
               own_filter: tuple[str, ...] = ()) -> dict[str, str]:
    """Run the own-test binary (when ``own[1]``, with libtest filters ``own_filter``) and the hidden binaries,
    after deleting the hidden sources.

    Returns each step's stdout by name (``test``, ``hidden:<i>``); a step that did not run is absent.
    """
    remove_hidden_sources(job.layout)
    steps = [sandbox.Step("test", [own[0], *own_filter, *_own_test_args(job.layout)])] if own[1] else []
    steps += [sandbox.Step(f"hidden:{i}", [binary, *_hidden_args(names)])
              for i, (binary, names) in enumerate(hidden) if names]
    results = job.run_steps("run", steps, limits=job.config.run_limits, writable=False) if steps else {}
    for result in results.values():
        job.outputs.append(result.stdout)
    return {name: result.stdout for name, result in results.items()}


def _hidden_counts(job: _Job, stdout: dict[str, str], compiled: bool) -> TestCounts:
    """The hidden tests' counts, by exact name, from the ``hidden:<i>`` runs."""
    layout = job.layout
    timed_out = any(p in job.timed_out for p in ("hidden", "hidden_compile"))
    names = [f"hidden:{i}" for i in range(len(layout.hidden_names))]
    if not compiled or not layout.hidden_expected or any(n not in stdout for n in names):
        return TestCounts(expected=layout.hidden_expected, timed_out=timed_out)
    judged = parse_hidden([stdout[n] for n in names], list(layout.hidden_names))
    job.forged = judged.forged
    return _counts(judged.run, layout.hidden_expected, timed_out)


# ---- direct mode -------------------------------------------------------------------------------------------

def _rustc_base(job: _Job, tool: Path, src: str) -> list[str]:
    return [str(tool), "--edition", job.layout.edition, src, "--error-format=json"]


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
    test_step = sandbox.Step("test_compile", [
        *_rustc_base(job, tc.rustc, "src/lib.rs"), "--test", "--crate-name", name, *profile, *eager,
        "-C", "prefer-dynamic", "-o", f"target/{name}-test",
    ])
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
            sandbox.Step("build_codegen", [
                *_rustc_base(job, tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
                "--emit=link", *_DEV, "-o", f"target/lib{name}.rlib",
            ]),
            *([test_step] if harness else []), *integration_steps,
        ], limits=limits))
    own_binary = hidden_binary = f"target/{name}-test"
    own_ok = hidden_ok_compile = False
    if harness:
        test = compiled["test_compile"]
        harness_ok = test.returncode == 0 and not test.timed_out
        test_outcome = parse_compiler(test.stderr, clippy_pass=False)
        if not harness_ok and eager:
            codegen = job.run("build_codegen", [
                *_rustc_base(job, tc.rustc, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
                "--emit=link", *_DEV, "-o", f"target/lib{name}.rlib",
            ], limits=limits)
            if codegen.returncode != 0 or codegen.timed_out:
                if codegen.timed_out:
                    job.timed_out.append("build")
                return _report(job, facts, False, outcome.merged(parse_compiler(codegen.stderr, clippy_pass=False)),
                               TestCounts(expected=own_expected), _skipped(layout))
        own_ok = hidden_ok_compile = harness_ok
        if not harness_ok and layout.hidden_in_lib:
            if layout.hidden_file in test_outcome.error_files:
                # The reference tests do not compile against this code: judge the model's own tests alone.
                hidden_ok_compile = False
                if own_expected:
                    rewrite_lib(layout, code, hidden_hook=False)
                    alone = job.run("test_compile", [
                        *_rustc_base(job, tc.rustc, "src/lib.rs"), "--test", "--crate-name", name, *profile,
                        "-C", "prefer-dynamic", "-o", f"target/{name}-own",
                    ], limits=limits)
                    own_binary = f"target/{name}-own"
                    own_ok = alone.returncode == 0 and not alone.timed_out
                    test_outcome = parse_compiler(alone.stderr, clippy_pass=False)
            else:
                # The model's own test code does not compile: judge the hidden tests without it.
                rewrite_lib(layout, strip_test_code(code))
                again = job.run("hidden_compile", [
                    *_rustc_base(job, tc.rustc, "src/lib.rs"), "--test", "--crate-name", name, *profile,
                    "-C", "prefer-dynamic", "-o", f"target/{name}-hidden",
                ], limits=limits)
                hidden_binary = f"target/{name}-hidden"
                hidden_ok_compile = again.returncode == 0 and not again.timed_out
        outcome = outcome.merged(test_outcome)
    integration_ok = all(
        (res := compiled.get(step.name)) is not None and res.returncode == 0 and not res.timed_out
        for step in integration_steps
    )
    if layout.hidden_in_lib:
        hidden_ok = hidden_ok_compile
        binaries = [hidden_binary]
    else:
        hidden_ok = integration_ok
        binaries = [f"target/{Path(rel).stem}-itest" for rel in layout.integration_tests]
    ran = _run_tests(job, (own_binary, bool(own_expected and own_ok)),
                     list(zip(binaries, layout.hidden_names, strict=True)) if hidden_ok else [])
    own = _own_counts(ran, own_expected, compiled=own_ok, timed_out="test" in job.timed_out)
    hidden = _hidden_counts(job, ran, hidden_ok) if layout.hidden is not None else None
    return _report(job, facts, True, outcome, own, hidden)


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


def _own_counts(stdout: dict[str, str], expected: int, *, compiled: bool, timed_out: bool) -> TestCounts:
    if not compiled or not expected or "test" not in stdout:
        return TestCounts(expected=expected, timed_out=timed_out)
    return _counts(parse_libtest(stdout["test"]), expected, timed_out)


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
    as ``cargo test`` would run them, after the hidden sources are deleted (cargo would rebuild without them)."""
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
    own_ok = hidden_ok = False
    binaries: dict[str, str] = {}
    if own_expected or layout.hidden_in_lib:
        no_run = ["test", "--lib", "--no-run", *release]
        compile_ = _cargo(job, "test_compile", no_run, limits=limits)
        test_outcome = parse_compiler(compile_.stdout, clippy_pass=False)
        own_ok = hidden_ok = compile_.returncode == 0 and not compile_.timed_out
        binaries.update(_executables(compile_.stdout))
        hidden_broken = not own_ok and layout.hidden_in_lib and layout.hidden_file in test_outcome.error_files
        if hidden_broken:
            # The reference tests do not compile against this code: judge the model's own tests alone.
            hidden_ok = False
            if own_expected:
                rewrite_lib(layout, code, hidden_hook=False)
                alone = _cargo(job, "test_compile", no_run, limits=limits)
                own_ok = alone.returncode == 0 and not alone.timed_out
                test_outcome = parse_compiler(alone.stdout, clippy_pass=False)
                binaries.update(_executables(alone.stdout))
        elif not hidden_ok and layout.hidden_in_lib:
            # The model's own test code does not compile: judge the hidden tests without it.
            rewrite_lib(layout, strip_test_code(code))
            again = _cargo(job, "hidden_compile", no_run, limits=limits)
            hidden_ok = again.returncode == 0 and not again.timed_out
            binaries.update(_executables(again.stdout))
        outcome = outcome.merged(test_outcome)
    hidden_binaries = [binaries.get("lib", "")]
    if layout.integration_tests:
        compile_ = _cargo(job, "hidden_compile", ["test", "--tests", "--no-run", *release], limits=limits)
        hidden_ok = compile_.returncode == 0 and not compile_.timed_out
        built = _executables(compile_.stdout)
        hidden_binaries = [built.get(Path(rel).stem, "") for rel in layout.integration_tests]
        hidden_ok = hidden_ok and all(hidden_binaries)
    hidden_ok = hidden_ok and layout.hidden is not None
    ran = _run_tests(job, (binaries.get("lib", ""), bool(own_expected and own_ok)),
                     list(zip(hidden_binaries, layout.hidden_names, strict=True)) if hidden_ok else [])
    own = _own_counts(ran, own_expected, compiled=own_ok, timed_out="test" in job.timed_out)
    hidden = _hidden_counts(job, ran, hidden_ok) if layout.hidden is not None else None
    return _report(job, facts, True, outcome, own, hidden)
