"""Verify a batch together: completions that can share a crate compile as modules of ONE crate.

One clippy pass and one test harness for all of them instead of one each (``direct`` mode pays a rustc
start-up, a std metadata load and a link per completion). Each completion keeps what makes its verdict its
own:

- its code is ``src/<module>.rs``, byte for byte the ``src/lib.rs`` the direct path writes (hidden-test hook
  included), so line numbers are its own; its hidden tests are a child module with their own random name;
- compiler messages are split by the file of their primary span, the file name put back to ``src/lib.rs`` and
  rustc's once-per-compilation lint notes put back where a crate of its own shows them, then parsed exactly as
  the direct path parses its own passes (same flags: the passes mirror ``verify._verify_direct``);
- its tests run in their own sandbox call, one process per test by exact name, judged by their seals (as on the
  direct path), after all sources are deleted: a panic, endless loop, exit or memory blow-up of one cannot reach
  another, and nothing it prints is parsed;
- its module tree is the direct path's: seals, hidden module, variants with copies of its own tests, and
  ``forbid(unsafe_code)`` on its file, so a member with linker, section or export attributes never compiles into
  the shared binary.

Combining is only an optimisation. A completion takes the direct path (``verify_code``) when anything could make its
verdict depend on the crate it shares (``blocker``: inner attributes, ``extern``, ``crate::`` or ``super::`` paths
out of its module, exported macros, ``fn main``, trait impls for types it does not define, code that can see its
module path, thread, executable or files at run time, banned constructs, hidden tests other than unit-shaped or in
the release profile), when a combined pass reports an error in its files or a message that names the shared crate
(the others are compiled again without it, up to ``MAX_ROUNDS`` times; after a lexer or parser error, which stops
rustc at the first such file, rustfmt screens every file first). A message
that belongs to no completion, or a compile timeout, sends the whole group to the direct path. Errors only in its
hidden tests' file, when it has tests of its own, keep it in the crate: as on the direct path, it is compiled again
without its hidden tests and judged on its own tests alone.

With ``own_first`` (chosen by ``Verifier`` while most completions do not build) the shared clippy pass is replaced
by each member's own: the direct path's first pass with the member's file as the crate root, all in one sandbox
call. Members that do not build are settled by it; the others share the test harness as above, and any left to the
direct path go on from their first pass.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from rust_rewards.report import Report, SourceFacts, TestCounts
from rust_rewards.rust.lexer import HIDDEN_PREFIX, Token, tokenize
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig, check_workdir, code_hash
from rust_rewards.verify.crate import CrateLayout, ModuleTree, counts_allocations, module_tree
from rust_rewards.verify.diagnostics import CompileOutcome, parse_compiler
from rust_rewards.verify.harness import (
    DEV,
    Job,
    TestPlan,
    clippy_base,
    job_report,
    lints_in_test_code,
    loaded_size,
    primary_file,
    run_tests,
    skipped_hidden,
)
from rust_rewards.verify.reference import notes_to_match, task_checked, task_facts, task_variants
from rust_rewards.verify.sandbox import Limits
from rust_rewards.verify.single import verify_code
from rust_rewards.verify.toolchain import find_toolchain, shared_toolchain

MAX_ROUNDS = 3
"""Combined compiles per group before the completions still failing take the direct path."""

_RUNTIME_SENSITIVE = frozenset({
    "unsafe", "asm", "global_asm", "fs", "File", "OpenOptions", "Path", "PathBuf", "read_dir",
    "current_exe", "args", "args_os", "env", "os", "net", "process", "Command", "thread", "module_path",
    "type_name", "type_name_of_val", "TypeId", "type_id", "caller", "track_caller", "Backtrace", "set_hook",
    "take_hook", "stdout", "stderr",
})
"""Identifiers through which code can observe its module path, thread name, executable, files or process:
their results differ between a crate of its own and a shared one."""
_CRATE_MACROS = frozenset({"macro_export", "macro_use"})
_TYPE_KEYWORDS = frozenset({"struct", "enum", "union", "type", "trait"})
_NOT_SELF_TYPE = frozenset({"&", "mut", "dyn", "(", "[", "*", "const"})


@dataclass(frozen=True)
class BatchResult:
    """Reports in input order, how many were verified in a shared crate, why the others were not, and (with
    ``own_first``) how many were settled by their own first pass (they do not build)."""

    reports: list[Report | None]
    combined: int
    fallbacks: Counter[str] = field(default_factory=Counter)
    settled: int = 0
    deferred: dict[int, sandbox.RunResult | None] = field(default_factory=dict)
    """With ``defer``: the completions left to the direct path (their reports are None), with their first pass."""
    runs: dict[int, PendingRun] = field(default_factory=dict)
    """With ``defer``: the compiled members whose tests are still to run (their reports are None)."""


class _SharedCrate:
    """A compiled shared crate whose members' test runs were left to the caller: its folder goes with the last."""

    def __init__(self, base: Path, runs: int):
        self.base = base
        self._left = runs
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            shutil.rmtree(self.base, ignore_errors=True)


@dataclass(frozen=True, eq=False)
class PendingRun:
    """One member of a compiled shared crate whose tests are still to run (``verify_batch(defer=True)``): called
    with any free worker slot, it runs them in their own sandbox call (as ``verify_batch`` would) and returns the
    member's report. Every pending run must be called once: the last one removes the crate's folder."""

    job: Job
    member: _Member
    outcome: CompileOutcome
    size: int
    layers: tuple[str, ...]
    crate: _SharedCrate

    def __call__(self, slot: int) -> Report:
        try:
            report = _run_member(self.job, self.member, self.outcome, self.size, self.layers, slot)
        finally:
            self.crate.release()
        return task_checked(report, self.member.code, self.member.hidden)


@dataclass(frozen=True, eq=False)
class _Member:
    index: int
    code: str
    hidden: HiddenTests | None
    facts: SourceFacts
    module: str
    hidden_module: str
    variants: tuple[tuple[str, str], ...]
    tree: ModuleTree
    hidden_names: tuple[str, ...] = ()
    """Its hidden tests' names in its module tree (kept when they are compiled out)."""
    hidden_compiles: bool = True
    """False once its hidden tests failed to compile against its code: like the direct path, it is then compiled
    without them and judged on its own tests alone."""

    def without_hidden(self) -> _Member:
        return replace(self, hidden_compiles=False, tree=module_tree(
            self.code, self.hidden, self.variants, with_hidden=False, hidden_module=self.hidden_module))

    @property
    def file(self) -> str:
        return f"src/{self.module}.rs"

    @property
    def hidden_file(self) -> str:
        return f"src/{self.hidden_module}.rs"

    @property
    def with_hidden(self) -> bool:
        return self.hidden is not None and self.hidden_compiles

    @property
    def files(self) -> tuple[str, ...]:
        """Its module file and the files beside it (hidden tests, variants)."""
        return (self.file, *(f"src/{rel}" for rel in self.tree.files))


def blocker(code: str, hidden: HiddenTests | None, facts: SourceFacts | None = None) -> str | None:
    """Why this completion must not share a crate (``None``: it may)."""
    facts = facts if facts is not None else task_facts(code, hidden)
    if not code.strip():
        return "no code"
    if facts.forbidden:
        return "banned construct"
    if hidden is not None:
        if hidden.shape != "unit":
            return f"{hidden.shape}-shaped hidden tests"
        if hidden.extra_files:
            return "extra crate files"
        if hidden.edition == "2015":
            return "edition 2015"
        if hidden.release:
            return "release profile"  # optimised code generation may differ with the crate around it
        if counts_allocations(hidden.text):
            return "a global allocator in the hidden tests"  # it would count the neighbours' allocations
    for text, depth in ((code, 0), *(((hidden.text, 1),) if hidden is not None else ())):
        reason = _source_blocker(tokenize(text), depth)
        if reason:
            return reason
    return None


def _source_blocker(tokens: list[Token], depth: int) -> str | None:
    """What in these tokens could depend on the crate around them; ``depth``: modules above the source's own."""
    local = {tokens[i + 1].text for i, t in enumerate(tokens[:-1]) if t.text in _TYPE_KEYWORDS}
    mods: list[bool] = []
    in_use = False
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1].text if i else ""
        nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
        in_use = tok.text == "use" or (in_use and tok.text != ";")
        if tok.text == "{":
            mods.append(i >= 2 and tokens[i - 2].text == "mod")
        elif tok.text == "}" and mods:
            mods.pop()
        elif tok.text == "#" and nxt == "!":
            return "inner attribute"
        elif tok.kind != "ident":
            continue
        elif tok.text == "crate":
            return "crate path"
        elif tok.text == "extern":
            return "extern crate or block"
        elif tok.text in _CRATE_MACROS:
            return "exported macro"
        elif tok.text == "main" and prev == "fn":
            return "fn main"
        elif tok.text in _RUNTIME_SENSITIVE or (tok.text in ("file", "line", "column") and nxt == "!"):
            return "run-time introspection"
        elif tok.text == "super" and ((in_use and prev in ("{", ","))
                                      or (prev == "::" and tokens[i - 2].text != "super")
                                      or (prev != "::" and _super_chain(tokens, i) > depth + sum(mods))):
            return "super path out of its module"  # climbs above its own module, or not only from the start
        elif tok.text == "impl" and prev in ("", ";", "{", "}", "]") and not _impl_for_local(tokens, i, local):
            return "trait impl for a type it does not define"
    return None


def _super_chain(tokens: list[Token], i: int) -> int:
    """How many ``super`` segments the path starting at ``i`` climbs."""
    count = 0
    while i < len(tokens) and tokens[i].text == "super":
        count += 1
        if i + 2 < len(tokens) and tokens[i + 1].text == "::":
            i += 2
        else:
            break
    return count


def _impl_for_local(tokens: list[Token], i: int, local: set[str]) -> bool:
    """Whether the impl block at ``i`` is inherent or implements a trait for a type defined in this source."""
    angle = 0
    for j in range(i + 1, len(tokens)):
        text = tokens[j].text
        if angle == 0 and text in ("{", ";", "where"):
            return True
        angle += (text == "<") - (text == ">")
        if angle == 0 and text == "for" and j + 1 < len(tokens) and tokens[j + 1].text != "<":
            k = j + 1
            while k < len(tokens) and (tokens[k].text in _NOT_SELF_TYPE or tokens[k].kind == "lifetime"):
                k += 1
            return k < len(tokens) and tokens[k].text in local
    return True


def _group_key(member: _Member) -> tuple:
    """Completions compiled together must need the same passes with the same flags."""
    hidden = member.hidden
    return (hidden.crate_name if hidden else "solution", hidden.edition if hidden else "2021",
            bool(member.facts.test_fns or hidden))


def verify_batch(items: list[tuple[str, HiddenTests | None]], config: VerifierConfig, slot: int = 0,
                 own_first: bool = False, defer: bool = False) -> BatchResult:
    """Verify ``(code, hidden)`` pairs (extracted, distinct): combined where safe, else one by one (``defer``:
    left to the caller, e.g. a pool that spreads them over its workers).

    ``defer`` also leaves each compiled member's test run to the caller (``BatchResult.runs``), so that a share's
    runs, one slow test among them, can spread over every free worker.

    ``own_first``: each completion that needs a test harness gets the direct path's first pass (clippy, which
    gives the build verdict) on its own, all in one sandbox call; only the ones that build share the harness
    compile. Cheaper than one shared clippy pass when many completions do not build (a shared pass with errors is
    wasted and compiled again), dearer when most do.
    """
    prefix = f"{HIDDEN_PREFIX}_m{secrets.token_hex(6)}"
    reports: dict[int, Report] = {}
    fallback: dict[int, str] = {}
    groups: dict[tuple, list[_Member]] = {}
    for index, (code, hidden) in enumerate(items):
        facts = task_facts(code, hidden)
        reason = blocker(code, hidden, facts)
        if reason:
            fallback[index] = reason
            continue
        hidden_module = f"{HIDDEN_PREFIX}_hidden_{secrets.token_hex(8)}"
        variants = task_variants(code, hidden, facts, config, slot, verify_code)
        tree = module_tree(code, hidden, variants, hidden_module=hidden_module)
        member = _Member(index, code, hidden, facts, f"{prefix}_{index}", hidden_module, variants, tree,
                         tuple(t.name for t in tree.hidden))
        groups.setdefault(_group_key(member), []).append(member)
    settled = 0
    firsts: dict[int, sandbox.RunResult] = {}
    runs: dict[int, PendingRun] = {}
    for key, members in groups.items():
        done, failed, first, pending = _combine(members, prefix, config, slot, own_first and key[2], defer)
        reports.update(done)
        runs.update(pending)
        fallback.update(failed)
        firsts.update(first)
        settled += sum(i in first and not done[i].build_ok for i in done)  # the others shared the harness
    for index in () if defer else fallback:
        code, hidden = items[index]
        reports[index] = verify_code(code, hidden, config, slot, first=firsts.get(index))
    reports = {i: task_checked(r, *items[i]) for i, r in reports.items()}
    counted = Counter(reason for reason in fallback.values() if reason != "no code")
    return BatchResult([reports.get(i) for i in range(len(items))], len(items) - len(fallback) - settled, counted,
                       settled, {i: firsts.get(i) for i in fallback} if defer else {}, runs)


def _combine(members: list[_Member], prefix: str, config: VerifierConfig, slot: int, own_first: bool,
             defer: bool = False) -> tuple[dict[int, Report], dict[int, str], dict[int, sandbox.RunResult],
                                           dict[int, PendingRun]]:
    """Compile ``members`` together (dropping the ones a pass rejects) and run each one's tests on its own
    (``defer``: leave the runs to the caller); the reports, the members left to the direct path with why,
    (``own_first``) each member's own first pass (final for the reports of members that do not build; the direct
    path goes on from it for the others), and the pending runs."""
    failed: dict[int, str] = {}
    tc = find_toolchain()
    iso = sandbox.detect_isolation()
    if iso.drop_uid:
        tc = shared_toolchain(tc)
        check_workdir(config.workdir or tempfile.gettempdir())
    settled: dict[int, Report] = {}
    firsts: dict[int, sandbox.RunResult] | None = None
    if own_first and len(members) > 1:
        base = Path(tempfile.mkdtemp(prefix="rr-batch-", dir=config.workdir))
        try:
            base.chmod(0o755)
            settled, firsts, bad = _first_passes(_compile_job(base, members, tc, config, slot), members, iso.layers)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        failed.update(bad)
        members = [m for m in members if m.index in firsts and m.index not in settled]
    screen = False
    for _round in range(MAX_ROUNDS):
        if len(members) < 2:
            reason = "alone"
            break
        base = Path(tempfile.mkdtemp(prefix="rr-batch-", dir=config.workdir))
        try:
            base.chmod(0o755)
            job = _compile_job(base, members, tc, config, slot)
            if screen:
                # The last round failed to parse somewhere: drop every file that does not parse before compiling.
                unparsed = _syntax_screen(job, members)
                failed.update((m.index, "syntax error") for m in members if m.file in unparsed)
                members = [m for m in members if m.file not in unparsed]
                if len(members) < 2:
                    reason = "alone"
                    break
                _write_lib(job.layout.root, members)
            compiled = _compile(job, members, prefix, firsts)
            if isinstance(compiled, str):
                failed.update((m.index, compiled) for m in members)
                return settled, failed, firsts or {}, {}
            rejected = {m.index: outcome for m, outcome in compiled.items() if isinstance(outcome, str)}
            if not rejected:
                shutil.rmtree(job.layout.root / "src")
                if defer:
                    crate = _SharedCrate(base, len(members))
                    base = None  # removed by the last pending run
                    return settled, failed, firsts or {}, {
                        m.index: PendingRun(job, m, compiled[m], len(members), iso.layers, crate) for m in members}
                reports = {m.index: _run_member(job, m, compiled[m], len(members), iso.layers, slot)
                           for m in members}
                return settled | reports, failed, firsts or {}, {}
            # Hidden tests that do not compile against code with its own tests: the direct path judges those tests
            # alone (hidden errors not reported), so the member stays, compiled without its hidden module.
            alone = {m.index for m in members if rejected.get(m.index) == _HIDDEN_ONLY and m.facts.test_fns}
            members = [m.without_hidden() if m.index in alone else m for m in members]
            rejected = {i: reason for i, reason in rejected.items() if i not in alone}
            failed.update(rejected)
            if 2 * len(rejected) > len(members):
                reason = "most of its share failed to compile"  # another round would likely be wasted
                members = [m for m in members if m.index not in rejected]
                break
            members = [m for m in members if m.index not in rejected]
            screen = "syntax error" in rejected.values()
        finally:
            if base is not None:
                shutil.rmtree(base, ignore_errors=True)
    else:
        reason = f"still rejecting after {MAX_ROUNDS} combined compiles"
    failed.update((m.index, reason) for m in members)
    return settled, failed, firsts or {}, {}


def _first_passes(job: Job, members: list[_Member], layers: tuple[str, ...]
                  ) -> tuple[dict[int, Report], dict[int, sandbox.RunResult], dict[int, str]]:
    """Each member's own first pass, exactly the direct path's (its file as the crate root), in one sandbox call.

    Returns the reports of the members that do not build (final: the direct path stops there too), every
    pass's result as the direct path would see it (file renamed to ``src/lib.rs``), and the members left to
    the direct path from the start."""
    name = job.layout.lib_name
    steps = [sandbox.Step(f"build:{i}", [
        *clippy_base(job, m.file), "--crate-type", "lib", "--crate-name", name,
        "--emit=metadata", *DEV, "-o", f"target/{m.module}.rmeta",
    ]) for i, m in enumerate(members)]
    results = job.run_steps("first", steps, limits=job.config.compile_limits)
    settled: dict[int, Report] = {}
    firsts: dict[int, sandbox.RunResult] = {}
    failed: dict[int, str] = {}
    for i, m in enumerate(members):
        result = results.get(f"build:{i}")
        if result is None or result.timed_out:
            failed[m.index] = "compile timeout"
            continue
        result = replace(result, stderr=result.stderr.replace(m.file, "src/lib.rs"))
        if m.module in result.stderr:
            failed[m.index] = "message names the shared crate"
            continue
        firsts[m.index] = result
        outcome = parse_compiler(result.stderr)
        if outcome.hard_errors == 0 and (result.returncode == 0 or outcome.clippy_errors > 0):
            continue
        mine = _member_job(job, m, {"build": result.seconds})
        report = job_report(mine, m.facts, False, outcome, TestCounts(expected=len(m.facts.test_fns)),
                         skipped_hidden(mine.layout))
        settled[m.index] = replace(report, code_hash=code_hash(m.code, m.hidden, job.config), isolation=layers)
    return settled, firsts, failed


def _compile_job(base: Path, members: list[_Member], tc, config: VerifierConfig, slot: int) -> Job:
    """Write the shared crate: ``src/lib.rs`` declares one public module per member."""
    root = base / "crate"
    src = root / "src"
    src.mkdir(parents=True)
    (root / "target").mkdir()
    for m in members:
        (src / f"{m.module}.rs").write_text(m.tree.root)
        for rel, text in m.tree.files.items():
            (src / rel).write_text(text)
    _write_lib(root, members)
    hidden = members[0].hidden
    name = (hidden.crate_name if hidden else "solution").replace("-", "_")
    layout = CrateLayout(root, name, name, hidden.edition if hidden else "2021", None, (), "", ())
    sandbox.prepare_dir(root, slot)
    return Job(layout, tc, config, slot, base / "logs")


def _write_lib(root: Path, members: list[_Member]) -> None:
    (root / "src" / "lib.rs").write_text("".join(f"pub mod {m.module};\n" for m in members))


def _compile(job: Job, members: list[_Member], prefix: str,
             firsts: dict[int, sandbox.RunResult] | None = None) -> str | dict[_Member, CompileOutcome | str]:
    """The shared clippy pass (and test harness): each member's outcome, or why it was rejected; a string
    alone when the group cannot be judged (a timeout, a message or failure that belongs to no member).
    ``prefix`` starts every member's module name: a message that still names one after the member's own
    file is renamed depends on the shared crate (e.g. a type printed with its module path). ``firsts``: each
    member's own first pass (``_first_passes``), which replaces the shared clippy pass."""
    name = job.layout.lib_name
    harness = _group_key(members[0])[2]
    emit = "metadata" if harness else "link"
    build = sandbox.Step("build", [
        *clippy_base(job, "src/lib.rs"), "--crate-type", "lib", "--crate-name", name,
        f"--emit={emit}", *DEV, "-o", f"target/lib{name}.r{'meta' if harness else 'lib'}",
    ])
    test = sandbox.Step("test_compile", [
        *clippy_base(job, "src/lib.rs"), "--test", "--crate-name", name, *DEV,
        "-C", "link-dead-code", "-C", "prefer-dynamic", "-o", f"target/{name}-test",
    ], stop_unless_ok=True)
    # The harness first: it meets the library's hard errors as well as the tests', so a failing round ends there.
    steps = [test] if firsts is not None else [test, build] if harness else [build]
    results = job.run_steps("compile", steps, limits=shared_limits(job.config.compile_limits))
    if any(r.timed_out for r in results.values()):
        return "compile timeout"
    if any(sandbox.was_cut(r.stderr) for r in results.values()):
        return "compiler output cut"
    binary = job.layout.root / "target" / f"{name}-test"
    if results.get("test_compile") is not None and binary.exists() and loaded_size(binary) > SHARED_LOAD_LIMIT:
        return "shared test binary too large"
    passes: dict[str, dict[_Member, list[str]]] = {}
    for step, result in results.items():
        split = _split_diagnostics(result.stderr, members)
        if split is None:
            return "message outside every completion"
        notes = {code: note for lines in split.values() for line in lines
                 for note, default, forced in _LINT_NOTE.findall(json.loads(line).get("rendered") or "")
                 for code in [default or forced.replace("-", "_")]}
        passes[step] = {m: _once_notes(lines, notes) for m, lines in split.items()}
    outcomes: dict[_Member, CompileOutcome | str] = {}
    for m in members:
        lines = [line for split in passes.values() for line in split[m]]
        errors = {kind for line in lines if (kind := _error_kind(line))}
        if errors and m.with_hidden and all(primary_file(line) == m.hidden_file for line in lines
                                            if _error_kind(line)):
            outcomes[m] = _HIDDEN_ONLY
        elif errors:
            outcomes[m] = "syntax error" if "syntax error" in errors else "compile error"
        elif any(prefix in line for line in lines):
            outcomes[m] = "message names the shared crate"
        elif "build" not in passes and firsts is None:
            outcomes[m] = CompileOutcome()  # the harness failed elsewhere: this round is compiled again
        else:  # as the direct path merges them: the library pass, then the harness
            library = (firsts[m.index].stderr.replace(m.file, "src/lib.rs") if firsts is not None
                       else "\n".join(passes["build"][m]))
            outcome = parse_compiler(library)
            if "test_compile" in passes:
                tested = "\n".join(passes["test_compile"][m])
                outcome = outcome.merged(parse_compiler(tested, clippy_pass=False))
                if m.tree.own:
                    outcome = outcome.merged(lints_in_test_code(tested, library, frozenset({"src/lib.rs"})))
            outcomes[m] = outcome
    lint_failed = any(o.clippy_errors for o in outcomes.values() if not isinstance(o, str))
    failed = [name for name, r in results.items() if r.returncode != 0 and not (name == "build" and lint_failed)]
    if failed and not {"compile error", "syntax error", _HIDDEN_ONLY} & set(outcomes.values()):
        return "compile failed without a message"
    return outcomes


SHARED_COMPILE_SECONDS = 20
"""Wall-clock limit of a shared compile (honest shares take a second or two): a member whose constant evaluation or
monomorphisation runs long costs its neighbours this much before the share falls back, not the full compile
limit."""


def shared_limits(limits: Limits) -> Limits:
    return replace(limits, wall_seconds=min(limits.wall_seconds, SHARED_COMPILE_SECONDS),
                   cpu_seconds=min(limits.cpu_seconds, SHARED_COMPILE_SECONDS))


SHARED_LOAD_LIMIT = 64 << 20
"""Bytes a shared test binary may map at start-up (``harness.loaded_size``; honest shares map a few MB). Beyond it,
statics of one member (say four 512 MiB zeroed arrays) would eat the address space its neighbours' tests run in,
so the share is verified one by one instead."""
_HIDDEN_ONLY = "hidden tests do not compile"
"""Every error of a member is in its hidden tests' file."""
_LEXER_ERRORS = frozenset({"E0748", "E0758", "E0762", "E0763", "E0765", "E0766"})
"""Unterminated raw strings, comments, characters, byte literals, strings and byte strings."""
_SYNTAX_ERROR = re.compile(r"^error(?:\[\w+\])?: .*\n\s*--> (?:\S*/)?(src/[^:\s/]+\.rs):", re.MULTILINE)


def _note_regex(lint: str, dashed: str) -> str:
    """rustc's once-per-compilation note on a lint's first message, for the lint matched by ``lint`` (``clippy::x_y``)
    or, in the form a forced group gives it (``harness.FORCE_WARN``), by ``dashed`` (``clippy::x-y``)."""
    return (rf"  = note: (?:`#\[\w+\({lint}\)\]` on by default|`--force-warn {dashed}` "
            rf"implied by `--force-warn clippy::\w+`)")


_LINT_NOTE = re.compile("^(" + _note_regex(r"(clippy::\w+)", r"(clippy::[\w-]+)") + ")$", re.MULTILINE)
"""Any lint's note line: the line, the lint as its default level names it, the lint as a forced group names it."""


def _note_pattern(code: str) -> str:
    """The note line of lint ``code`` (``clippy::x_y``), in either form."""
    return "^" + _note_regex(re.escape(code), re.escape(code.replace("_", "-"))) + "\n"


def _once_notes(lines: list[str], notes: dict[str, str]) -> list[str]:
    """Put back rustc's once-per-compilation note (``_LINT_NOTE``) as a crate of the
    member's own would show it: on the first message of each lint, never on a later one. ``notes``: each
    lint's note line, as seen in the shared compilation."""
    seen: set[str] = set()
    fixed = []
    for line in lines:
        diag = json.loads(line)
        code = (diag.get("code") or {}).get("code") or ""
        rendered = diag.get("rendered") or ""
        if code in notes:
            own = re.sub(_note_pattern(code), "", rendered, flags=re.MULTILINE)
            if code not in seen and "the lint level is defined here" not in own:
                url = re.search(rf"^  = help: for further information visit \S+#{code.removeprefix('clippy::')}\n",
                                own, flags=re.MULTILINE)
                if url is None:
                    return [*lines, '{"level": "error", "message": "lint note out of place"}']
                own = own[: url.end()] + notes[code] + "\n" + own[url.end() :]
            seen.add(code)
            line = json.dumps({**diag, "rendered": own})
        fixed.append(line)
    return fixed


def _error_kind(line: str) -> str | None:
    """``syntax error`` (no error code, or a lexer one: rustc may have stopped at the first such file),
    ``compile error``, or ``None`` for anything else (warnings; deny-level clippy lints do not fail the build)."""
    diag = json.loads(line)
    code = (diag.get("code") or {}).get("code") or ""
    if not diag.get("level", "").startswith("error") or code.startswith("clippy::"):
        return None
    return "syntax error" if not code or code in _LEXER_ERRORS else "compile error"


def _syntax_screen(job: Job, members: list[_Member]) -> set[str]:
    """The member files that rustfmt cannot parse (one process each: it also stops at the first such file)."""
    rustfmt = job.tc.bin_dir / "rustfmt"
    if not rustfmt.exists():
        return set()
    steps = [sandbox.Step(f"syntax:{i}", [str(rustfmt), "--check", "--edition", job.layout.edition, "--color",
                                          "never", m.file]) for i, m in enumerate(members)]
    results = job.run_steps("syntax", steps, limits=job.config.compile_limits)
    return {file for r in results.values() if not r.timed_out for file in _SYNTAX_ERROR.findall(r.stderr)}


def _split_diagnostics(stderr: str, members: list[_Member]) -> dict[_Member, list[str]] | None:
    """A pass's JSON messages by the member whose file holds the primary span, the member's module file
    renamed to ``src/lib.rs`` (as the direct path sees it); ``None`` when a message belongs to no member."""
    owner = {file: m for m in members for file in m.files}
    split: dict[_Member, list[str]] = {m: [] for m in members}
    for line in stderr.splitlines():
        if not line.startswith("{"):
            continue
        try:
            diag = json.loads(line)
        except json.JSONDecodeError:
            continue
        message = diag.get("message", "")
        if not diag.get("spans") and (diag.get("level") not in ("error", "warning")
                                      or message.startswith("aborting due to") or message.endswith("emitted")):
            continue  # summaries and notes, as the direct path's parser skips them
        member = owner.get(primary_file(line))
        if member is None:
            return None
        split[member].append(line.replace(member.file, "src/lib.rs"))
    return split


def _member_job(job: Job, m: _Member, durations: dict[str, float], slot: int | None = None) -> Job:
    """A job for one member of the shared crate: its tests under their exact names in that crate (run in worker
    slot ``slot``, by default the compile's)."""
    slot = job.slot if slot is None else slot
    tree = m.tree.under(m.module)
    names = (tuple(f"{m.module}::{name}" for name in m.hidden_names),) if m.hidden is not None else ()
    layout = replace(job.layout, hidden=m.hidden, hidden_module=f"{m.module}::{m.hidden_module}",
                     hidden_names=names, tree=tree, seals=(tree.hidden,), variant_codes=m.variants)
    return Job(layout, job.tc, job.config, slot, job.logs / m.module, durations=durations,
               expected_notes=notes_to_match(m.code, m.hidden, job.config, slot))


def _run_member(job: Job, m: _Member, outcome: CompileOutcome, size: int, layers: tuple[str, ...],
                slot: int) -> Report:
    """Run one member's own and hidden tests in its own sandbox call in worker slot ``slot`` (sources already
    deleted; the crate is read-only to every slot); its report."""
    mine = _member_job(job, m, {k: v / size for k, v in job.durations.items()}, slot)
    layout = mine.layout
    binary = f"target/{layout.lib_name}-test"
    plan = TestPlan(binary, layout.tree.own, ((binary, layout.tree.hidden),) if m.with_hidden else (),
                    bool(layout.tree.variants))
    ran = run_tests(mine, plan, own_expected=len(m.facts.test_fns), hidden_compiled=m.with_hidden)
    mine.outputs = [out.replace(f"{m.module}::", "").replace(m.file, "src/lib.rs") for out in mine.outputs]
    report = job_report(mine, m.facts, True, outcome, ran.own, ran.hidden, ran.checks)
    return replace(report, code_hash=code_hash(m.code, m.hidden, job.config), isolation=layers)
