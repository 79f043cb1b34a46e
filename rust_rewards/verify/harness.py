"""What the single and batch paths share: a crate's job in the sandbox, the compiler passes of a test harness, the
test runs judged by seals, and the ``Report`` they make.

**Test verdicts come from seals, not from output** (``crate.seal_tests``): each test runs in its own process
(``--exact NAME``) and passed only when that process exited 0 and printed the test's nonce, which only the test's
own guard knows. Hidden and variant sources are deleted and the binaries made unreadable before any test binary
starts; test runs get no ``/proc``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rust_rewards.report import HIDDEN_OUTPUT, OwnTestChecks, Report, TestCounts
from rust_rewards.rust.lexer import _items, test_regions, tokenize
from rust_rewards.rust.rules import CLIPPY_VIEW, MACRO_DEFINITION
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.crate import CrateLayout, SealedTest, remove_sources, rewrite_lib, strip_seals
from rust_rewards.verify.diagnostics import CompileOutcome, parse_compiler
from rust_rewards.verify.observe import ReferenceNotes, notes_in, without_notes
from rust_rewards.verify.sandbox import Limits
from rust_rewards.verify.toolchain import Toolchain

_TEXT_CAP = 20_000


DEV = ["-C", "debuginfo=0"]


RELEASE = ["-C", "opt-level=3", "-C", "debug-assertions=off", "-C", "overflow-checks=off"]


@dataclass
class Job:
    layout: CrateLayout
    tc: Toolchain
    config: VerifierConfig
    slot: int
    logs: Path
    durations: dict[str, float] = field(default_factory=dict)
    timed_out: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    expected_notes: ReferenceNotes | None = None
    """What the reference's run noted per hidden test (``observe``; keys ``observation_key``): a hidden test passes
    only with the same notes, and none where the reference failed its own run. None: judged by the seals alone."""
    note_runs: int = 1
    """How often each hidden test runs (the reference's run: 3, to keep only the tests whose notes agree)."""
    observed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """After ``run_tests`` with ``note_runs`` > 1: the notes of each hidden test that passed every run with the same
    notes."""
    hidden_failures: list[str] = field(default_factory=list)
    """After ``run_tests``: each hidden test that ran and did not pass, ``name: why`` (``TestCounts.failures``)."""

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
            **({"output_cap": COMPILE_OUTPUT_CAP} if writable else {}),
        )
        for name, result in results.items():
            self._account(name.split(":")[0], result)
        return results

    def _account(self, phase: str, result: sandbox.RunResult) -> None:
        self.durations[phase] = self.durations.get(phase, 0.0) + result.seconds
        if result.timed_out and phase not in self.timed_out:
            self.timed_out.append(phase)


def job_report(job: Job, facts, build_ok: bool, outcome: CompileOutcome, own: TestCounts,
            hidden: TestCounts | None, checks: OwnTestChecks | None = None) -> Report:
    return Report(
        has_code=True,
        build_ok=build_ok,
        clippy_ok=(build_ok and not outcome.clippy_lints and not {"build", "clippy"} & set(job.timed_out)
                   and CLIPPY_VIEW not in facts.forbidden and MACRO_DEFINITION not in facts.forbidden),
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


def skipped_hidden(layout: CrateLayout) -> TestCounts | None:
    return None if layout.hidden is None else TestCounts(expected=layout.hidden_expected)


@dataclass(frozen=True)
class TestPlan:
    """Which compiled tests to run: the model's own (in ``own_binary``, when it compiled with them), the hidden
    tests per binary, and the variants' copies of the own tests (in ``own_binary``, when they compiled)."""

    own_binary: str = ""
    own: tuple[SealedTest, ...] = ()
    hidden: tuple[tuple[str, tuple[SealedTest, ...]], ...] = ()
    variants: bool = False


def _steps(group: str, binary: str, tests: tuple[SealedTest, ...], *, hidden: bool,
           after: dict[str, str] | None = None, while_ok: str = "",
           unless_failed: dict[str, str] | None = None) -> list[sandbox.Step]:
    """One process per test, by exact name (hidden tests include ``#[ignore]``d ones; own ignored tests do not
    run). Timeout groups: the own tests, each variant's copies of them, the hidden tests.
    ``after``: for a variant's copies, the step each one repeats (``Step.after``: a copy runs only when the test
    passed there, with a time limit from the time it took there); ``while_ok`` and ``unless_failed`` (per test
    key): ``Step``'s."""
    extra = ["--include-ignored"] if hidden else []
    return [sandbox.Step(f"{group}:{i}", [binary, "--exact", *filter(None, (t.warm_up, t.name)), "--test-threads=1",
                                          *extra],
                         group="hidden" if hidden else group, model_controlled=True,
                         after=(after or {}).get(t.key, ""), while_ok=while_ok,
                         unless_failed=(unless_failed or {}).get(t.key, ""))
            for i, t in enumerate(tests) if (hidden or not t.ignored) and (after is None or t.key in after)]


def _variant_steps(plan: TestPlan, variants: tuple) -> list[sandbox.Step]:
    """The variants' copies of the own tests, in a run whose reward can still depend on them. A copy runs after its
    test passed at home (or ran out of time there); on the reference (trusted code) with the full time limit the
    test had at home, so an honest test of a fast answer meets it on a slower reference; on a mutant of the
    reference with ``sandbox.BASELINE_FACTOR`` x the reference copy's time; without a reference, with that factor x
    the home time; with a reference, a mutant's copy only after the reference's copy passed (a test that fails
    on the reference is not valid, so whether it kills the mutant counts for nothing); a copy on a mutant only when
    the test did not kill the mutant before it (one kill makes a test discriminating); and only while every hidden
    test passes (a solution that fails one earns neither ``test_reward`` nor ``assertion_reward``; with hidden
    tests that did not compile, ``run_tests`` plans no copy at all)."""
    if not plan.own:
        return []
    home = {t.key: f"test:{i}" for i, t in enumerate(plan.own) if not t.ignored}
    reference = next((k for k, v in enumerate(variants) if v.kind == "reference"), None)
    steps: list[sandbox.Step] = []
    killed_by: dict[str, str] = {}  # per test: its copy on the previous mutant
    for k, v in enumerate(variants):
        after = home
        if v.kind == "reference":  # trusted code: its copy gets the full time limit, as the test had at home
            steps += _steps(f"variant{k}", plan.own_binary, v.tests, hidden=False,
                            while_ok="hidden" if plan.hidden else "", unless_failed=home)
            continue
        if v.kind == "mutant" and reference is not None:
            after = {t.key: f"variant{reference}:{i}" for i, t in enumerate(variants[reference].tests)
                     if t.key in home}
        steps += _steps(f"variant{k}", plan.own_binary, v.tests, hidden=False, after=after,
                        while_ok="hidden" if plan.hidden else "", unless_failed=killed_by)
        if v.kind == "mutant":
            killed_by = {t.key: f"variant{k}:{i}" for i, t in enumerate(v.tests) if t.key in after}
    return steps


def _outcomes(results: dict[str, sandbox.RunResult], group: str, tests: tuple[SealedTest, ...]) -> list[str]:
    """Per test: ``passed`` (its process exited 0 in time and printed the test's nonce), ``failed`` (it ran to its end
    in time without the nonce: a kill of a variant) or ``none`` (not run, skipped, timed out, or exited non-zero
    after its nonce). A copy that spins on a variant proves nothing about it."""
    out = []
    for i, t in enumerate(tests):
        r = results.get(f"{group}:{i}")
        if r is None or r.returncode == sandbox.SKIPPED or r.timed_out:
            out.append("none")
        elif f"\n{t.nonce}\n" not in r.stdout:
            out.append("failed")
        else:
            out.append("passed" if r.returncode == 0 else "none")
    return out


def _passed(results: dict[str, sandbox.RunResult], group: str, tests: tuple[SealedTest, ...]) -> list[bool]:
    return [o == "passed" for o in _outcomes(results, group, tests)]


_FILTERED = re.compile(r"\d+ filtered out; ")
"""How many other tests the binary holds: it differs between a crate of its own and a shared one."""


_FIRST_HIDDEN_RUN = re.compile(r"hidden\d+:\d+")
"""A hidden test's step in the first run (the reference's repeat runs are ``hidden{i}.{run}:{j}``)."""


@dataclass(frozen=True)
class TestResults:
    own: TestCounts
    hidden: TestCounts | None
    checks: OwnTestChecks


def run_tests(job: Job, plan: TestPlan, *, own_expected: int, hidden_compiled: bool) -> TestResults:
    """Delete every source, make the binaries unreadable, run each planned test in its own
    process (one sandbox call) and judge it by its seal."""
    layout = job.layout
    tree = layout.tree
    remove_sources(layout)
    steps: list[sandbox.Step] = []
    if plan.own:
        steps += _steps("test", plan.own_binary, plan.own, hidden=False)
    for i, (binary, tests) in enumerate(plan.hidden):
        steps += _steps(f"hidden{i}", binary, tests, hidden=True)
    variants = tree.variants if tree is not None and plan.variants else ()
    decided = layout.hidden is not None and not (hidden_compiled and plan.hidden)
    steps += [] if decided else _variant_steps(plan, variants)
    for binary in {plan.own_binary, *(b for b, _ in plan.hidden)} - {""}:
        path = layout.root / binary
        if path.exists():
            path.chmod(0o111)
    results = job.run_steps("run", steps, limits=job.config.run_limits, writable=False) if steps else {}
    for run in range(1, job.note_runs):  # the reference's runs again, each a sandbox call of its own (argv size)
        again = [step for i, (binary, tests) in enumerate(plan.hidden)
                 for step in _steps(f"hidden{i}.{run}", binary, tests, hidden=True)]
        results |= job.run_steps("run", again, limits=job.config.run_limits, writable=False) if again else {}
    nonces = [t.nonce for t in (*plan.own, *(t for _, ts in plan.hidden for t in ts))]
    tags = {t.note_tag for _, ts in plan.hidden for t in ts} - {""}
    for prefix in ("test:", "hidden"):  # own tests' output first: feedback shows it up to HIDDEN_OUTPUT
        if prefix == "hidden" and any(name.startswith(prefix) for name in results):
            job.outputs.append(HIDDEN_OUTPUT)
        for name, result in results.items():
            if name.startswith(prefix) and "." not in name.split(":")[0]:
                text = _FILTERED.sub("", result.stdout)
                for tag in tags:
                    text = without_notes(text, tag)
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
        passed = sum(sum(_hidden_passed(job, results, i, tests)) for i, (_, tests) in enumerate(plan.hidden))
        ran = hidden_compiled and bool(plan.hidden)
        hidden = TestCounts(passed=passed, failed=layout.hidden_expected - passed if ran else 0,
                            expected=layout.hidden_expected, summary_seen=ran,
                            timed_out=any(g.startswith("hidden") for g in timed), failures=tuple(job.hidden_failures))
    decided = decided or any(r.returncode != 0 for name, r in results.items() if _FIRST_HIDDEN_RUN.fullmatch(name))
    return TestResults(own, hidden, _checks(layout, plan, results, own_ok, decided))


def observation_key(binary: int, test: int) -> str:
    """A hidden test's place (its binary's, its own among that binary's tests): the same for the reference's crate
    and a completion's, whatever random module names each has."""
    return f"{binary}:{test}"


def _hidden_passed(job: Job, results: dict[str, sandbox.RunResult], i: int,
                   tests: tuple[SealedTest, ...]) -> list[bool]:
    """Per hidden test of binary ``i``: passed by its seal and, where the reference's notes are known, with the same
    notes (``observe``). With ``job.note_runs`` > 1, records in ``job.observed`` the notes of every test that passed
    each run alike."""
    runs = [f"hidden{i}" + (f".{run}" if run else "") for run in range(job.note_runs)]
    sealed = [_passed(results, group, tests) for group in runs]
    notes = [[notes_in(results[f"{group}:{j}"].stdout, t.note_tag) if f"{group}:{j}" in results else None
              for j, t in enumerate(tests)] for group in runs]
    expected = job.expected_notes.notes if job.expected_notes is not None else {}
    broken = job.expected_notes.broken if job.expected_notes is not None else ""
    out = []
    for j, t in enumerate(tests):
        key = observation_key(i, j)
        ok = sealed[0][j] and not broken and (key not in expected or notes[0][j] == expected[key])
        out.append(ok)
        result = results.get(f"{runs[0]}:{j}")
        if not ok and result is not None and result.returncode != sandbox.SKIPPED:
            why = ("timed out" if result.timed_out else _panic_line(result.stdout + result.stderr) if not sealed[0][j]
                   else f"the task's reference fails its own run ({broken})" if broken
                   else "notes differ from the reference's")
            job.hidden_failures.append(f"{t.key}: {why}")
        if job.note_runs > 1 and t.note_tag and all(s[j] for s in sealed) and len({n[j] for n in notes}) == 1:
            job.observed[key] = notes[0][j]
    return out


def _panic_line(output: str) -> str:
    """``failed``, with what the test printed where it panicked (its first line, capped), when it did.

    >>> _panic_line("---- t stdout ----\\nthread 't' panicked at src/x.rs:3:5:\\nassertion failed: x\\n")
    'failed: assertion failed: x'
    """
    lines = output.splitlines()
    at = next((k for k, line in enumerate(lines) if " panicked at " in line), None)
    return "failed" if at is None or at + 1 >= len(lines) else f"failed: {lines[at + 1].strip()[:200]}"


def _checks(layout: CrateLayout, plan: TestPlan, results: dict[str, sandbox.RunResult],
            own_ok: list[bool], decided: bool) -> OwnTestChecks:
    """How the own tests that passed fared on the variants (see ``OwnTestChecks``); ``decided``: the solution
    failed a hidden test (or they did not compile), so the copies were not run."""
    kinds = tuple(kind for kind, _ in layout.variant_codes)
    if not plan.own or not any(own_ok):
        return OwnTestChecks(kinds)
    compiled = layout.tree.variants if layout.tree is not None and plan.variants else ()
    if not compiled and kinds:
        return OwnTestChecks(kinds, compiled=False)
    if decided and compiled:
        return OwnTestChecks(kinds, compiled=True, ran=False)
    on = {v.kind: dict(zip((t.key for t in v.tests), _passed(results, f"variant{k}", v.tests), strict=True))
          for k, v in enumerate(compiled) if v.kind == "reference"}
    killed = [{t.key: o == "failed" for t, o in zip(v.tests, _outcomes(results, f"variant{k}", v.tests), strict=True)}
              for k, v in enumerate(compiled) if v.kind == "mutant"]
    valid = discriminating = dropped = 0
    for t, ok in zip(plan.own, own_ok, strict=True):
        if ok and not t.ignored and t.key in layout.dropped:
            dropped += 1
            continue
        if not ok or t.ignored or ("reference" in on and not on["reference"].get(t.key, False)):
            continue
        valid += 1
        # without a reference, a #[should_panic] test "kills" a mutant of a wrong answer that stops panicking
        if not (t.should_panic and "reference" not in on):
            discriminating += any(k.get(t.key, False) for k in killed)
    return OwnTestChecks(kinds, compiled=True, valid=valid, discriminating=discriminating, dropped=dropped)


TLS_COPIES = 2
"""Thread-local blocks a test process maps: its main thread's and the thread libtest runs the test on."""


def loaded_size(path: Path) -> int:
    """Bytes an ELF binary maps when it starts and runs one test: the ``PT_LOAD`` segments' memory sizes (code,
    data and zeroed statics) and ``TLS_COPIES`` copies of its thread-local storage (``PT_TLS``: each thread gets
    one, so a ``thread_local!`` array costs its size per thread); 0 when it is not a 64-bit little-endian ELF
    file."""
    with path.open("rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:6] != b"\x7fELF\x02\x01":
            return 0
        phoff = int.from_bytes(head[0x20:0x28], "little")
        size, count = int.from_bytes(head[0x36:0x38], "little"), int.from_bytes(head[0x38:0x3A], "little")
        f.seek(phoff)
        table = f.read(size * count)
    copies = {1: 1, 7: TLS_COPIES}  # PT_LOAD, PT_TLS
    headers = (table[k * size : (k + 1) * size] for k in range(count))
    return sum(copies.get(int.from_bytes(h[:4], "little"), 0) * int.from_bytes(h[0x28:0x30], "little")
               for h in headers)


def rustc_base(job: Job, tool: Path, src: str) -> list[str]:
    return [str(tool), "--edition", job.layout.edition, src, "--error-format=json"]


CLIPPY_FORCED = ("clippy::correctness", "clippy::style", "clippy::complexity", "clippy::perf", "clippy::suspicious")
"""clippy's default groups (``clippy::all``). They are passed with ``--force-warn``, which no lint attribute in the
code can lower (``allow``, ``expect``, ``cfg_attr``, at item, module or crate level): ``#[allow(clippy::all)]`` or
``#[allow(clippy::eq_op)]`` does not earn the clippy reward. The deny-by-default ``clippy::correctness`` lints are
warnings then, as every other lint: the code builds, and earns no clippy reward. What no lint level reaches, clippy's
own view of the code (``cfg(clippy)``, ``clippy::msrv``), is refused by ``rules.clippy_view_reasons``."""
FORCE_WARN = tuple(arg for group in CLIPPY_FORCED for arg in ("--force-warn", group))


COMPILE_OUTPUT_CAP = 16 << 20
"""Characters of a compiler pass's output read back (a test run's: ``sandbox.run_steps``' default). A shared test
harness lints every member's tests and their copies: 32 members with a few lints each write a few hundred KB of
JSON, and a message cut out of the middle is a lint or an error nobody sees (``sandbox.was_cut``)."""


def clippy_base(job: Job, src: str) -> list[str]:
    """``clippy-driver`` on ``src`` as ``rustc_base`` runs it, with ``FORCE_WARN``."""
    return [*rustc_base(job, job.tc.clippy_driver, src), *FORCE_WARN]


def harness_step(job: Job, profile: list[str], output: str, eager: list[str] = (), step: str = "test_compile"
                  ) -> sandbox.Step:
    """The test harness compile, through clippy-driver (``clippy_base``): the model's test code is linted as its
    library code is (``lints_in_test_code``), at no measurable cost over rustc's own compile."""
    name = job.layout.lib_name
    return sandbox.Step(step, [
        *clippy_base(job, "src/lib.rs"), "--test", "--crate-name", name, *profile, *eager,
        *job.layout.std_link(), "-o", output,
    ])


def settle_harness(job: Job, first: sandbox.RunResult, *, own: bool, hidden: bool,
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
    outcome = shown = harness_outcome(text(result), job.layout)
    ok = result.returncode == 0 and not result.timed_out
    for _ in range(3):
        if ok:
            break
        errors = set(harness_outcome(text(result), job.layout, keep_variants=True).error_files)
        before = (own, hidden, variants, job.layout.dropped)
        if variants and errors & set(job.layout.variant_files):
            # each own test that does not compile against a variant drops its own copies, not its neighbours'
            failing = copies_not_compiling(text(result), job.layout)
            kept = {t.key for t in job.layout.tree.own} - job.layout.dropped - (failing or set())
            if failing and kept:
                job.layout = replace(job.layout, dropped=job.layout.dropped | failing)
            else:
                variants = False
        if hidden and job.layout.hidden_file in errors:
            hidden = False
        if own and ("src/lib.rs" in errors or before == (own, hidden, variants, job.layout.dropped)):
            own = variants = False
            shown = outcome
        if (own, hidden, variants, job.layout.dropped) == before or not (own or hidden):
            break
        job.layout = rewrite_lib(job.layout, own_tests=own, with_hidden=hidden, with_variants=variants)
        result = recompile("test_compile" if own else "hidden_compile")
        results.append(result)
        outcome = harness_outcome(text(result), job.layout)
        ok = result.returncode == 0 and not result.timed_out
    if not ok:
        own = hidden = variants = False
    return (shown if shown is not outcome and not own else outcome), (own, hidden, variants), results


def copies_not_compiling(stderr: str, layout: CrateLayout) -> frozenset[str] | None:
    """The own tests (``SealedTest.key``) whose copies in a variant's file hold an error of the harness compile, and
    the completion's helpers compiled there (``crate.home_items`` keys) that do: each is left out of the copies, and
    a test that needs a helper left out fails its own compile next; None when an error lies elsewhere in a variant's
    file (an import: every copy goes)."""
    variants = layout.tree.variants if layout.tree is not None else ()
    spans = {v.file: {**_test_lines(layout.tree.files[v.file.removeprefix("src/")]),
                      **{key: (lo, hi) for key, lo, hi in v.helpers}} for v in variants}
    found: set[str] = set()
    for line in stderr.splitlines():
        msg = _json_message(line)
        if msg is None or msg.get("level") != "error":
            continue
        span = next((sp for sp in msg.get("spans") or [] if isinstance(sp, dict) and sp.get("is_primary")), None)
        if span is None or span.get("file_name") not in spans:
            continue
        at = span.get("line_start")
        key = next((k for k, (lo, hi) in spans[span["file_name"]].items() if lo <= at <= hi), None)
        if key is None:
            return None
        found.add(key)
    return frozenset(found)


def _test_lines(text: str) -> dict[str, tuple[int, int]]:
    """Each test function of ``text`` by its path in the file (``tests::adds``), with its first and last line."""
    tokens = tokenize(text)
    mods = [it for it in _items(tokens) if it.kind == "mod"]
    out = {}
    for fn in test_regions(tokens).test_fns:
        outer = sorted((m for m in mods if m.start < fn.start and fn.end <= m.end), key=lambda m: m.start)
        out["::".join([*(m.name for m in outer), fn.name])] = (
            text.count("\n", 0, tokens[fn.start].start) + 1, text.count("\n", 0, tokens[fn.end].end) + 1)
    return out


def _json_message(line: str) -> dict | None:
    """A rustc JSON message (cargo's ``compiler-message`` unwrapped), or None."""
    if not line.startswith("{"):
        return None
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        return None
    msg = msg.get("message") if isinstance(msg, dict) and msg.get("reason") == "compiler-message" else msg
    return msg if isinstance(msg, dict) else None


def lints_in_test_code(harness: str, library: str, files: frozenset[str]) -> CompileOutcome:
    """Clippy's findings in a test harness compile (``harness``, clippy-driver's messages) located in ``files``
    (the completion's own sources, not its hidden tests' file or a variant's copies) that the library pass
    (``library``) did not report at the same place: its test code's lints, once each.

    >>> msg = '{"level": "warning", "code": {"code": "clippy::len_zero"}, "message": "len", "rendered": "r", '
    >>> span = '"spans": [{"file_name": "%s", "line_start": %d, "column_start": 1, "is_primary": true}]}'
    >>> at = lambda f, n: msg + span % (f, n)
    >>> harness = "\\n".join([at("src/lib.rs", 3), at("src/lib.rs", 9), at("src/lib.rs", 9), at("src/v.rs", 9)])
    >>> lints_in_test_code(harness, at("src/lib.rs", 3), frozenset({"src/lib.rs"})).clippy_lints
    ('clippy::len_zero',)
    """
    if sandbox.was_cut(harness):
        return CompileOutcome(clippy_lints=("clippy::output_cut",))  # what was cut is not known to be clean
    seen = {place for line in library.splitlines() if (place := _lint_place(line))}
    kept = []
    for line in harness.splitlines():
        place = _lint_place(line)
        if place is not None and place[1] in files and place not in seen:
            seen.add(place)
            kept.append(line)
    return parse_compiler("\n".join(kept))


def _lint_place(line: str) -> tuple[str, str, int, int] | None:
    """A clippy message's lint and primary span (file, line, column), or None for any other line."""
    msg = _json_message(line)
    code = ((msg.get("code") or {}).get("code") or "") if msg is not None else ""
    if not code.startswith("clippy::"):
        return None
    span = next((sp for sp in msg.get("spans") or [] if isinstance(sp, dict) and sp.get("is_primary")), {})
    return code, span.get("file_name", ""), span.get("line_start", 0), span.get("column_start", 0)


def harness_outcome(stderr: str, layout: CrateLayout, keep_variants: bool = False) -> CompileOutcome:
    """The harness compile's messages; those located in a variant's file are dropped (they quote the reference,
    which the model never sees) unless ``keep_variants``."""
    files = set() if keep_variants else set(layout.variant_files)
    lines = [line for line in stderr.splitlines() if not files or primary_file(line) not in files]
    return parse_compiler("\n".join(lines), clippy_pass=False)


def primary_file(line: str) -> str | None:
    """The file of a JSON message's primary span (rustc's, or cargo's wrapped ``compiler-message``)."""
    msg = _json_message(line)
    spans = (msg.get("spans") or []) if msg is not None else []
    return next((sp.get("file_name") for sp in spans if isinstance(sp, dict) and sp.get("is_primary")), None)
