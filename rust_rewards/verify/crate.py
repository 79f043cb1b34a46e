"""Write extracted code (and optional hidden tests) into a std-only library crate whose tests report through seals.

Layout (``src/lib.rs`` is a library, so a model-written ``fn main`` is just a function and cannot clash):

- ``Cargo.toml``: written by us: edition from the task (2021 by default), no dependencies, no build script,
  no auto-discovered targets, doctests off (examples in doc comments are not tests and would cost one
  compile each);
- ``src/lib.rs``: the model's code (its test functions sealed, below), plus ``#[cfg(test)] #[path = "H.rs"] mod
  H;`` when the hidden tests are unit- or main-shaped, and one such module per variant (below);
- ``src/H.rs``: ``use super::*;`` + unit-shaped tests, or + a ``fn main`` (MultiPL-E) wrapped in a
  ``#[test] fn hidden_main``;
- ``src/V.rs``: a variant: another solution of the task (the reference, or a wrong mutant of it) followed by the
  model's own test code, so the same tests can be run against it;
- ``tests/H.rs`` (+ other ``tests/*.rs``): integration-shaped tests using the crate by name.

``H`` and ``V`` are ``__rr_`` + a random suffix drawn for each crate, so model code cannot name, shadow or include
them; the exact libtest names of every test are known before anything runs, and ``remove_sources`` deletes
every source file before any test binary starts.

**Seals.** Every ``#[test]`` function we compile (hidden, own, and the own tests' copies in variants) gets, as
the first statement of its body and on the same line as its ``{``, a guard value whose ``Drop`` writes a random
nonce (drawn per test, per crate) to stdout when the body ends the way the test expects (normally, or by a panic
for ``#[should_panic]``). A test passed only when its own process exited 0 and printed its nonce: output the
code writes cannot contain a nonce it never saw, and a process ended early (exit, abort, signal) never runs the
guard. The nonce is in the compiled binary only, which test code cannot read (``FORBID`` below, sources
deleted, the binary not readable by the sandbox user).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from pathlib import Path

from rust_rewards.rust.lexer import (
    HIDDEN_PREFIX,
    Item,
    Token,
    _items,
    strip_test_code,
    test_paths,
    test_regions,
    tokenize,
)
from rust_rewards.rust.names import item_sources, test_imports, top_level
from rust_rewards.rust.signatures import required_items
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.observe import observable, observe_assertions

HIDDEN = f"{HIDDEN_PREFIX}_hidden"
"""Prefix of the hidden module / test-target name; each crate appends a random suffix."""
VARIANT = f"{HIDDEN_PREFIX}_variant"
"""Prefix of a variant module's name."""

SHIELD_MACROS = ("assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne", "panic",
                 "vec", "format", "matches", "unreachable", "todo", "unimplemented", "write", "writeln", "print",
                 "println", "eprint", "eprintln", "dbg")


def shield(edition: str) -> str:
    """One line of imports put at the top of every module of the hidden tests: std's macros by explicit import
    (which wins over the completion's ``#[macro_export]`` ones reaching the tests through ``use super::*`` or
    ``use solution::*``) and the edition's prelude as a glob (a completion item with a prelude name, say its own
    ``String`` or ``Option``, is then ambiguous for the tests, a compile error, instead of silently theirs)."""
    return (f"#[allow(unused_imports)] use ::std::{{{', '.join(SHIELD_MACROS)}}}; "
            f"#[allow(unused_imports)] use ::std::prelude::rust_{edition}::*; ")


def shielded(text: str, edition: str) -> str:
    """Hidden test source with ``shield`` after the ``{`` of every inline module (same line: line numbers stay)
    and at its end (for the file's own top level)."""
    tokens = tokenize(text)
    inserts = [tokens[i + 2].end for i in range(len(tokens) - 2)
               if tokens[i].text == "mod" and tokens[i + 1].kind == "ident" and tokens[i + 2].text == "{"]
    line = shield(edition)
    for offset in sorted(inserts, reverse=True):
        text = text[:offset] + line + text[offset:]
    return text.rstrip() + "\n" + line + "\n"


_MAIN_WRAPPER = """
#[test]
fn hidden_main() {
    main();
}
"""
_SEAL = ("let __rr_seal = {{ struct __RrSeal; impl ::core::ops::Drop for __RrSeal {{ fn drop(&mut self) {{ "
         "if {panics}::std::thread::panicking() {{ let mut v: ::std::vec::Vec<u8> = "
         "::std::string::ToString::to_string(&{nonce}u128).into_bytes(); v.insert(0, 10); v.push(10); "
         "let _ = ::std::io::Write::write_all(&mut ::std::io::stdout(), &v); }} }} }} __RrSeal }};")
"""No quote in it: inserted into code with an unterminated string or comment, it changes nothing around it. Clippy
finds nothing in it (the harness compile lints the model's tests, seals included)."""
FORBID = "#![forbid(unsafe_code)] "
"""Put in front of the model's code (and of the variants' files, which hold copies of its tests), on its first
line: no ``unsafe``, ``#[no_mangle]``, ``#[export_name]``, ``#[link_section]`` in the model's code, whatever
``cfg_attr`` nesting spells them (the compiler decides; an ``allow`` of it is an error), so safe code cannot read
memory and no code runs before ``main``. Hidden tests, which are ours, are not restricted; nor is a task whose
reference needs ``unsafe`` itself (``HiddenTests.allows_unsafe``, e.g. Exercism's doubly linked list), where the
static rules flag what the compiler would have refused."""
_SEAL_TEXT = re.compile(r"let __rr_seal = \{ struct __RrSeal; .*?\} __RrSeal \};")


@dataclass(frozen=True)
class SealedTest:
    """One test function: its libtest name (relative to its module tree's root), its nonce, and whether it is
    ``#[ignore]``d (ignored tests are not run and earn nothing)."""

    name: str
    nonce: str
    ignored: bool = False
    local: str = ""
    """The test's name in the model's own code (a variant's copy has the variant's module in front of it)."""
    should_panic: bool = False
    note_tag: str = ""
    """The tag of the notes its assertions write (``observe.observe_assertions``; hidden tests judged by them)."""
    warm_up: str = ""
    """A test that runs before it in its process (``warm_up``), or none."""

    @property
    def key(self) -> str:
        return self.local or self.name

    def under(self, module: str) -> SealedTest:
        """The same test seen from one module up (``module::name``)."""
        return replace(self, name=f"{module}::{self.name}", local=self.key,
                       warm_up=self.warm_up and f"{module}::{self.warm_up}")


@dataclass(frozen=True)
class Variant:
    """Another solution of the task compiled beside the completion, with copies of the model's own tests."""

    module: str
    kind: str
    """``reference`` (a test failing on it earns nothing) or ``mutant`` (a wrong solution: a test passing on it
    proves nothing)."""
    code: str
    tests: tuple[SealedTest, ...]
    helpers: tuple[tuple[str, int, int], ...] = ()
    """The completion's helpers compiled in this variant's file (``home_items``): key, first and last line."""

    @property
    def file(self) -> str:
        return f"src/{self.module}.rs"


def _fn_body_open(tokens: list[Token], fn: Item) -> int | None:
    """Index of the ``{`` that opens the body of test function ``fn``."""
    for i in range(fn.start, fn.end):
        if tokens[i].text == "fn" and tokens[i + 1].text == fn.name:
            for j in range(i + 2, fn.end + 1):
                if tokens[j].text == "{":
                    return j
            return None
    return None


def seal_tests(source: str) -> tuple[str, tuple[SealedTest, ...]]:
    """``source`` with a seal in every ``#[test]`` function, and those tests (names relative to the source's
    module). Line numbers do not change.

    >>> code, (t,) = seal_tests("#[test]\\nfn a() { assert!(true); }")
    >>> t.name, code.splitlines()[1].startswith("fn a() {let __rr_seal"), t.nonce in code
    ('a', True, True)
    """
    tokens = tokenize(source)
    mods = [it for it in _items(tokens) if it.kind == "mod"]
    inserts: list[tuple[int, str]] = []
    sealed: list[SealedTest] = []
    for fn in test_regions(tokens).test_fns:
        body = _fn_body_open(tokens, fn)
        if body is None:
            continue
        flat = {tok for attr in fn.attrs for tok in attr}
        nonce = str(secrets.randbits(128) | 1 << 127)
        outer = sorted((m for m in mods if m.start < fn.start and fn.end <= m.end), key=lambda m: m.start)
        sealed.append(SealedTest("::".join([*(m.name for m in outer), fn.name]), nonce, "ignore" in flat,
                                 should_panic="should_panic" in flat))
        inserts.append((tokens[body].end, _SEAL.format(panics="" if "should_panic" in flat else "!", nonce=nonce)))
    for offset, text in sorted(inserts, reverse=True):
        source = source[:offset] + text + source[offset:]
    return source, tuple(sealed)


def strip_seals(text: str) -> str:
    """Compiler messages as the model's own code would give them: the seals' and ``FORBID``'s text removed (the
    columns of messages on the first line stay shifted by ``len(FORBID)``)."""
    return _SEAL_TEXT.sub("", text).replace(FORBID, "")


def own_test_code(code: str, dropped: frozenset[str] = frozenset()) -> str:
    """The model's test code alone (each test function with its outermost enclosing module), to be compiled
    against another solution: its libtest names there are the same, under the variant's module. The tests named
    in ``dropped`` (``SealedTest.key``: they do not compile against a variant) are left out, each line kept.

    >>> code = "mod t {\\n#[test]\\nfn a() { f(); }\\n#[test]\\nfn b() { g(); }\\n}"
    >>> [line.strip() for line in own_test_code(code, frozenset({"t::a"})).splitlines()[1:4]]
    ['', '', '#[test]']
    """
    tokens = tokenize(code)
    mods = [it for it in _items(tokens) if it.kind == "mod"]
    spans: set[tuple[int, int]] = set()
    blank: list[tuple[int, int]] = []
    for fn in test_regions(tokens).test_fns:
        outer = [m for m in mods if m.start < fn.start and fn.end <= m.end]
        top = min(outer, key=lambda m: m.start) if outer else fn
        spans.add((tokens[top.start].start, tokens[top.end].end))
        path = "::".join([*(m.name for m in sorted(outer, key=lambda m: m.start)), fn.name])
        if path in dropped:
            blank.append((tokens[fn.start].start, tokens[fn.end].end))
    for a, b in blank:  # same length, newlines kept: the spans above still hold
        code = code[:a] + re.sub(r"[^\n]", " ", code[a:b]) + code[b:]
    return "\n\n".join(code[a:b] for a, b in sorted(spans))


def home_items(code: str, other: str, dropped: frozenset[str] = frozenset()) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What a variant's copy of the own tests gets of the completion beside the variant's items: every item the
    completion declares at its top level under a name the variant does not bind (its helper fns, types, traits, and
    the impls whose header names one of them), as ``(key, source)`` to compile anew in the variant's module, and an
    import of the names it binds by ``use`` (std's items). So helpers resolve to the variant's items as they resolve
    to the completion's at home: a helper ``home_add`` that calls ``add`` calls the variant's ``add`` in a copy (a
    test comparing ``add`` with it checks nothing in either place), and an own trait's by-value method that wins
    method resolution at home wins in a copy too. Keys (``helper:NAME``, ``helper:impl#K``) in ``dropped`` (they do
    not compile against the variant) are left out.

    >>> imports, items = home_items("use std::fmt; pub trait Full { fn f(self); } impl Full for i32 { fn f(self) {} }"
    ...                             " pub fn add() {}", "pub fn add() {}")
    >>> imports, [key for key, _ in items]
    ('#[allow(unused_imports)] use super::{fmt};', ['helper:Full', 'helper:impl#1'])
    """
    home, there = top_level(code), top_level(other)
    extra = home.names() - there.names() - home.macros
    items = item_sources(code)
    declared = {it.name for it in items if it.name}
    copied = (extra & declared) - {key.removeprefix("helper:") for key in dropped}
    imports = sorted(extra - declared)
    line = f"#[allow(unused_imports)] use super::{{{', '.join(imports)}}};" if imports else ""
    keyed = [(f"helper:{it.name}" if it.name else f"helper:impl#{k}", it) for k, it in enumerate(items)]
    return line, tuple((key, it.text) for key, it in keyed if key not in dropped
                       and (it.name in copied if it.name else bool(it.header & copied)))


def rehomed(tests: str, module: str) -> str:
    """The own tests' code as a variant's copy: ``crate::`` paths lead to the variant's module, so a copy reaches
    the variant's items by every path its original reaches the completion's (``crate::f`` and ``super::f`` are
    the same function at home and in a copy).

    >>> rehomed("fn t() { crate::f(); pub(crate) fn g() {} }", "v")
    'fn t() { crate::v::f(); pub(crate) fn g() {} }'
    """
    tokens = tokenize(tests)
    for i in reversed(range(len(tokens) - 1)):
        if tokens[i].text == "crate" and tokens[i + 1].text == "::":
            tests = tests[: tokens[i].end] + f"::{module}" + tests[tokens[i].end :]
    return tests


@dataclass(frozen=True)
class ModuleTree:
    """The sources of one completion's module tree: its root file (``src/lib.rs`` of its own crate, or its module
    file in a shared crate) and the files beside it; every test in it by exact name and nonce."""

    root: str
    files: dict[str, str]
    own: tuple[SealedTest, ...]
    hidden_module: str
    hidden: tuple[SealedTest, ...]
    variants: tuple[Variant, ...]

    def under(self, module: str) -> ModuleTree:
        """The same tree as a module ``module`` of a shared crate (test names seen from the crate root)."""
        return replace(self, own=tuple(t.under(module) for t in self.own),
                       hidden=tuple(t.under(module) for t in self.hidden),
                       variants=tuple(replace(v, tests=tuple(t.under(module) for t in v.tests))
                                      for v in self.variants))


def module_tree(code: str, hidden: HiddenTests | None, variants: tuple[tuple[str, str], ...] = (), *,
                own_tests: bool = True, with_hidden: bool = True, with_variants: bool = True,
                hidden_module: str | None = None, dropped: frozenset[str] = frozenset()) -> ModuleTree:
    """Sources for ``code`` with its hidden tests when unit/main-shaped (``with_hidden``), its own tests
    (``own_tests``; else the code without its test code) and ``variants`` (``(kind, code)`` pairs) each holding a
    copy of its own tests but those in ``dropped`` (``with_variants``). File paths are relative to ``src/``."""
    hidden_module = hidden_module or f"{HIDDEN}_{secrets.token_hex(8)}"
    sealed, own = seal_tests(code) if own_tests else (strip_test_code(code), ())
    forbid = "" if hidden is not None and hidden.allows_unsafe else FORBID
    root = forbid + sealed.rstrip() + "\n"
    files: dict[str, str] = {}
    hidden_tests: tuple[SealedTest, ...] = ()
    if hidden is not None and hidden.shape in ("unit", "main") and with_hidden:
        body, hidden_tests = hidden_module_source(hidden, code)
        files[f"{hidden_module}.rs"] = body
        hidden_tests = tuple(t.under(hidden_module) for t in hidden_tests)
        root += _hook(hidden_module)
    made: list[Variant] = []
    tests = own_test_code(code, dropped) if own_tests and with_variants and own else ""
    for kind, other in variants if tests else ():
        module = f"{VARIANT}_{secrets.token_hex(8)}"
        text, copies = seal_tests(rehomed(tests, module))
        # the reference's own warnings are not the model's (and its code is never shown to the model)
        imports, helpers = home_items(code, other, dropped)
        head = forbid + "#![allow(warnings)]\n" + strip_test_code(other).rstrip() + "\n" + imports + "\n"
        spans = []
        for key, helper in helpers:
            first = head.count("\n") + 1
            head += rehomed(helper, module) + "\n"
            spans.append((key, first, head.count("\n")))
        files[f"{module}.rs"] = head + text + "\n"
        made.append(Variant(module, kind, other, tuple(t.under(module) for t in copies), tuple(spans)))
        root += _hook(module)
    return ModuleTree(root, files, own, hidden_module, hidden_tests, tuple(made))


def _hook(module: str) -> str:
    return f'\n#[cfg(test)]\n#[path = "{module}.rs"]\nmod {module};\n'


def hidden_module_source(hidden: HiddenTests, code: str) -> tuple[str, tuple[SealedTest, ...]]:
    """The hidden module's source for unit/main shapes, sealed, and its tests (names inside that module); their
    glob import of the solution is ``solution_imports``."""
    text = hidden.text.rstrip() + "\n" + (_MAIN_WRAPPER if hidden.shape == "main" else "")
    sealed, tests = _observed_seals(_without_glob(text, "super"), hidden)
    if hidden.shape == "main":
        tests = tuple(t for t in tests if t.name == "hidden_main")
    head = "#![allow(unused_imports, dead_code)]\n" + solution_imports(hidden, code, text, "super") + "\n\n"
    return head + shielded(sealed, hidden.edition), tests


def _observed_seals(text: str, hidden: HiddenTests) -> tuple[str, tuple[SealedTest, ...]]:
    """Hidden test source sealed, its assertions noting what they compare when the task's tests can be judged by
    their notes (``observe.observable``), with a warm-up test where it counts allocations (``warm_up``)."""
    if not observable(hidden.reference):
        return warm_up(*seal_tests(text))
    text, tag = observe_assertions(text)
    sealed, tests = seal_tests(text)
    return warm_up(sealed, tuple(replace(t, note_tag=tag) for t in tests))


WARM_UP = "__rr_warm_up"
_WARM_UP_FN = f"\n#[test]\nfn {WARM_UP}() {{ ::std::thread::sleep(::std::time::Duration::from_millis(100)); }}\n"
_GLOBAL_ALLOCATOR = re.compile(r"#\s*\[\s*global_allocator\s*\]")


def counts_allocations(source: str) -> bool:
    """Whether test source defines a ``#[global_allocator]`` (which sees every allocation of its process).

    >>> counts_allocations("#[global_allocator]\\nstatic A: Counter = Counter;"), counts_allocations("fn a() {}")
    (True, False)
    """
    return bool(_GLOBAL_ALLOCATOR.search(source))


def warm_up(source: str, tests: tuple[SealedTest, ...]) -> tuple[str, tuple[SealedTest, ...]]:
    """Hidden tests that define a ``#[global_allocator]`` (Exercism's leak tests count every byte the process
    allocates) get a warm-up test that runs first in each test's process (libtest runs filtered tests sorted by
    name, so only tests named after it get one).

    Why: libtest's main thread, waiting for a test's result, allocates the first time it blocks on its channel
    (its waiting context and the channel's list of waiters, 144 bytes), at a moment the test thread does not
    control: under load, inside a leak test's before/after window, and a correct answer fails. The warm-up
    sleeps until that first wait has happened; later waits reuse both (measured: a test watching 20 ms for other
    threads' allocations saw them in 45 of 100 runs alone, in 0 of 200 after the warm-up).

    >>> text, (t,) = warm_up("#[global_allocator]\\nstatic A: C = C;\\n#[test]\\nfn t() {}", (SealedTest("t", "1"),))
    >>> t.warm_up, WARM_UP in text, warm_up("fn t() {}", (SealedTest("t", "1"),))[1][0].warm_up
    ('__rr_warm_up', True, '')
    """
    if not counts_allocations(source):
        return source, tests
    return source + _WARM_UP_FN, tuple(replace(t, warm_up=WARM_UP) if WARM_UP < t.name else t for t in tests)


def _without_glob(text: str, root: str) -> str:
    """``text`` with its top-level ``use ROOT::*;`` blanked out (same length, so lines and columns stay)."""
    tokens = tokenize(text)
    depth, out = 0, text
    for i, tok in enumerate(tokens):
        depth += tok.text == "{"
        depth -= tok.text == "}"
        words = [t.text for t in tokens[i : i + 5]]
        if depth == 0 and words == ["use", root, "::", "*", ";"]:
            a, b = tok.start, tokens[i + 4].end
            out = out[:a] + " " * (b - a) + out[b:]
    return out


def solution_imports(hidden: HiddenTests, code: str, tests: str, root: str) -> str:
    """What hidden tests see of the solution, in place of their ``use ROOT::*;`` (``names.test_imports``): the
    items the reference (or the prompt's signatures) defines and the reference's std imports, never another name
    the completion declares. Without a reference or prompt signatures, the glob itself."""
    required = frozenset(item.name.split("::")[0] for item in required_items(hidden.prompt)
                         if item.kind == "fn") if hidden.prompt.strip() else frozenset()
    if not hidden.reference.strip() and not required:
        return f"use {root}::*;"
    return test_imports(hidden.reference, code, tests, root=root, public=root != "super", extra=required,
                        taken=frozenset(SHIELD_MACROS))


@dataclass(frozen=True)
class CrateLayout:
    """A written crate. ``hidden_names`` holds, per hidden test binary (the library harness for unit/main
    shapes, else one per ``integration_tests`` file), the exact libtest names of the hidden tests in it;
    ``seals`` the hidden tests per binary with their nonces; ``tree`` the library's module tree."""

    root: Path
    package: str
    lib_name: str
    edition: str
    hidden: HiddenTests | None
    integration_tests: tuple[str, ...]
    hidden_module: str
    hidden_names: tuple[tuple[str, ...], ...]
    code: str = ""
    tree: ModuleTree | None = None
    seals: tuple[tuple[SealedTest, ...], ...] = ()
    variant_codes: tuple[tuple[str, str], ...] = ()
    dropped: frozenset[str] = frozenset()
    """Own tests (``SealedTest.key``) left out of the variants' copies: they did not compile against a variant."""

    @property
    def hidden_in_lib(self) -> bool:
        return self.hidden is not None and self.hidden.shape in ("unit", "main")

    @property
    def hidden_expected(self) -> int:
        return sum(len(names) for names in self.hidden_names)

    @property
    def hidden_file(self) -> str:
        """Crate-relative path of the hidden module inside the library (unit/main shapes)."""
        return f"src/{self.hidden_module}.rs"

    @property
    def variant_files(self) -> tuple[str, ...]:
        return tuple(v.file for v in self.tree.variants) if self.tree else ()

    def std_link(self, rel: str = "") -> list[str]:
        """How a test binary links std (``rel``: an integration test file; empty: the library's harness):
        dynamically, which links faster, except where its hidden tests define a ``#[global_allocator]``: with
        std in a shared library, allocations made by std's shared generic code do not reach it (a leaking answer
        passed Exercism's leak tests so), as under cargo."""
        hidden = self.hidden
        if hidden is None:
            return ["-C", "prefer-dynamic"]
        if not rel:
            text = hidden.text if self.hidden_in_lib else ""
        else:
            text = hidden.text if rel == f"tests/{self.hidden_module}.rs" else dict(hidden.extra_files).get(rel, "")
        return [] if counts_allocations(text) else ["-C", "prefer-dynamic"]


def _is_test_file(rel: str) -> bool:
    return rel.startswith("tests/") and rel.endswith(".rs")


def hidden_expected(hidden: HiddenTests) -> int:
    """How many hidden tests must pass: ``#[test]`` functions, or 1 for a MultiPL-E ``fn main``."""
    count = 1 if hidden.shape == "main" else len(test_paths(hidden.text))
    return count + sum(len(test_paths(text)) for rel, text in hidden.extra_files if _is_test_file(rel))


def _cargo_toml(package: str, lib_name: str, edition: str, tests: tuple[str, ...]) -> str:
    targets = "".join(f'\n[[test]]\nname = "{Path(t).stem}"\npath = "{t}"\n' for t in tests)
    return f"""[package]
name = "{package}"
version = "0.1.0"
edition = "{edition}"
build = false
autobins = false
autoexamples = false
autotests = false
autobenches = false
publish = false

[lib]
name = "{lib_name}"
path = "src/lib.rs"
doctest = false
{targets}
[dependencies]

[profile.dev]
debug = 0
incremental = false

[profile.release]
incremental = false
"""


def write_crate(root: Path, code: str, hidden: HiddenTests | None,
                variants: tuple[tuple[str, str], ...] = ()) -> CrateLayout:
    """Write the crate for ``code`` under ``root`` (which must exist) and describe it; ``variants``: other
    solutions (``(kind, code)``) to run the model's own tests against."""
    package = hidden.crate_name if hidden else "solution"
    lib_name = package.replace("-", "_")
    edition = hidden.edition if hidden else "2021"
    src = root / "src"
    src.mkdir()
    (root / "target" / "release").mkdir(parents=True)
    module = f"{HIDDEN}_{secrets.token_hex(8)}"
    integration: list[str] = []
    seals: list[tuple[SealedTest, ...]] = []
    if hidden is not None:
        files = list(hidden.extra_files)
        if hidden.shape == "integration":
            files.insert(0, (f"tests/{module}.rs", hidden.text))
        for rel, text in files:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if _is_test_file(rel):
                text, tests = _observed_seals(_without_glob(text, lib_name), hidden)
                text = shielded(text, edition) + solution_imports(hidden, code, text, lib_name) + "\n"
                integration.append(rel)
                seals.append(tests)
            path.write_text(text)
    (root / "Cargo.toml").write_text(_cargo_toml(package, lib_name, edition, tuple(integration)))
    layout = CrateLayout(root, package, lib_name, edition, hidden, tuple(integration), module, (), code=code,
                         seals=tuple(seals), variant_codes=variants)
    return rewrite_lib(layout)


def rewrite_lib(layout: CrateLayout, *, own_tests: bool = True, with_hidden: bool = True,
                with_variants: bool = True) -> CrateLayout:
    """(Re)write ``src/lib.rs`` and its module files: with or without the model's test code, the hidden-test
    hook and the variants; returns the layout describing what is there now (fresh nonces each time)."""
    src = layout.root / "src"
    if layout.tree is not None:
        for rel in layout.tree.files:
            (src / rel).unlink(missing_ok=True)
    tree = module_tree(layout.code, layout.hidden, layout.variant_codes, own_tests=own_tests,
                       with_hidden=with_hidden, with_variants=with_variants, hidden_module=layout.hidden_module,
                       dropped=layout.dropped)
    (src / "lib.rs").write_text(tree.root)
    for rel, text in tree.files.items():
        (src / rel).write_text(text)
    if layout.hidden_in_lib:
        names = (tuple(t.name for t in tree.hidden),) if with_hidden else layout.hidden_names
        seals: tuple[tuple[SealedTest, ...], ...] = (tree.hidden,) if with_hidden else ((),)
    else:
        names, seals = tuple(tuple(t.name for t in group) for group in layout.seals), layout.seals
    return replace(layout, tree=tree, seals=seals, hidden_names=names)


def remove_sources(layout: CrateLayout) -> None:
    """Delete every source file of the crate once compiled (the model's own, whose test functions hold their seals'
    nonces, the hidden tests, the variants), so no test binary can read them at run time."""
    for folder in ("src", "tests"):
        for path in sorted((layout.root / folder).rglob("*.rs")) if (layout.root / folder).is_dir() else ():
            path.unlink(missing_ok=True)
