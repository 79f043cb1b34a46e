"""Static facts about Rust source: a small lexer plus test, assertion and solution analysis.

No compiler is involved; this only sees tokens. It finds every ``#[test]`` function (not just the first),
classifies assertions as meaningful (they reach code from the solution, directly or through a ``let``
binding) or trivial, and flags process-control calls that could forge a test verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rust_rewards.report import SourceFacts

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>b?r(?P<hashes>\#*)")
  | (?P<string>b?"(?:[^"\\]|\\.)*")
  | (?P<char>b?'(?:[^'\\\n]|\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,8}\}|.))')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>r\#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?)
  | (?P<punct>::|=>|->|==|!=|<=|>=|&&|\|\||[^\sA-Za-z0-9_])
    """,
    re.VERBOSE | re.DOTALL,
)

ASSERT_MACROS = frozenset(
    {"assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne"}
)
_DEFINING_KEYWORDS = frozenset({"fn", "struct", "enum", "trait", "type", "const", "static", "union"})
_NOT_SOLUTION = frozenset({"main", "tests", "test", "super", "self", "Self", "crate"})
_OPEN = {"(": ")", "[": "]", "{": "}"}


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


def tokenize(source: str) -> list[Token]:
    """Split Rust source into tokens, dropping whitespace and comments.

    >>> [t.text for t in tokenize('let s = "a // b"; // c')]
    ['let', 's', '=', '"a // b"', ';']
    """
    tokens: list[Token] = []
    pos, n = 0, len(source)
    while pos < n:
        m = _TOKEN.match(source, pos)
        if m is None:
            tokens.append(Token("punct", source[pos], pos, pos + 1))
            pos += 1
            continue
        kind = m.lastgroup if m.lastgroup != "hashes" else "raw_string"
        if m.group("raw_string") is not None:
            kind = "raw_string"
        if kind == "block_comment":
            pos = _skip_block_comment(source, pos)
            continue
        if kind == "raw_string":
            closing = '"' + m.group("hashes")
            end = source.find(closing, m.end())
            end = n if end < 0 else end + len(closing)
            tokens.append(Token("string", source[pos:end], pos, end))
            pos = end
            continue
        if kind not in ("ws", "line_comment"):
            tokens.append(Token(kind, m.group(), pos, m.end()))
        pos = m.end()
    return tokens


def _skip_block_comment(source: str, pos: int) -> int:
    depth, i, n = 0, pos, len(source)
    while i < n:
        if source.startswith("/*", i):
            depth += 1
            i += 2
        elif source.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _match_close(tokens: list[Token], i: int) -> int:
    """Index of the token closing the bracket at ``i`` (or the last index when unbalanced)."""
    opener = tokens[i].text
    closer = _OPEN[opener]
    depth = 0
    for j in range(i, len(tokens)):
        text = tokens[j].text
        if tokens[j].kind != "punct":
            continue
        if text == opener:
            depth += 1
        elif text == closer:
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def _attribute_at(tokens: list[Token], i: int) -> tuple[list[str], int] | None:
    """If an outer attribute ``#[...]`` starts at ``i``, return its inner token texts and the index after it."""
    if tokens[i].text == "#" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
        close = _match_close(tokens, i + 1)
        return [t.text for t in tokens[i + 2 : close]], close + 1
    return None


@dataclass(frozen=True)
class Item:
    """A ``fn`` or ``mod`` found after some attributes, with its token span (inclusive)."""

    kind: str
    name: str
    start: int
    end: int
    attrs: tuple[tuple[str, ...], ...]


def _items(tokens: list[Token]) -> list[Item]:
    """Every fn/mod with a body, with the attributes right in front of it (nested items included)."""
    items: list[Item] = []
    i, n = 0, len(tokens)
    pending: list[tuple[str, ...]] = []
    pending_start = None
    while i < n:
        attr = _attribute_at(tokens, i)
        if attr is not None:
            if pending_start is None:
                pending_start = i
            pending.append(tuple(attr[0]))
            i = attr[1]
            continue
        tok = tokens[i]
        if tok.kind == "ident" and tok.text in ("fn", "mod") and i + 1 < n and tokens[i + 1].kind == "ident":
            j = i + 2
            while j < n and tokens[j].text not in ("{", ";"):
                j += 1
            if j < n and tokens[j].text == "{":
                end = _match_close(tokens, j)
                start = pending_start if pending_start is not None else i
                items.append(Item(tok.text, tokens[i + 1].text, start, end, tuple(pending)))
        if tok.kind != "ident" or tok.text not in ("pub", "async", "unsafe", "const", "extern", "crate"):
            if tok.text not in ("(", ")") or not pending:
                pending, pending_start = [], None
        i += 1
    return items


def _is_test_attr(attr: tuple[str, ...]) -> bool:
    return attr == ("test",) or (len(attr) >= 2 and attr[-1] == "test" and attr[-2] == "::")


def _is_cfg_test(attr: tuple[str, ...]) -> bool:
    return attr[:1] == ("cfg",) and "test" in attr and "not" not in attr


@dataclass(frozen=True)
class TestRegions:
    """Token spans holding test code: ``#[cfg(test)]`` modules and ``#[test]`` functions."""

    test_fns: tuple[Item, ...]
    cfg_test_mods: tuple[Item, ...]

    def contains(self, index: int) -> bool:
        return any(it.start <= index <= it.end for it in (*self.test_fns, *self.cfg_test_mods))


def _is_conditional(attr: tuple[str, ...]) -> bool:
    """A ``cfg`` other than plain ``cfg(test)`` (e.g. a cargo feature, off by default)."""
    return attr[:1] == ("cfg",) and attr != ("cfg", "(", "test", ")")


def test_regions(tokens: list[Token]) -> TestRegions:
    """Test functions (those under a non-``test`` ``cfg``, e.g. a feature, are not expected to run)."""
    items = _items(tokens)
    gated = [it for it in items if any(_is_conditional(a) for a in it.attrs)]
    fns = tuple(
        it for it in items
        if it.kind == "fn" and any(_is_test_attr(a) for a in it.attrs)
        and not any(g.start <= it.start and it.end <= g.end for g in gated)
    )
    mods = tuple(it for it in items if it.kind == "mod" and any(_is_cfg_test(a) for a in it.attrs))
    return TestRegions(fns, mods)


def count_test_fns(source: str) -> int:
    """Number of ``#[test]`` functions in ``source``.

    >>> count_test_fns("#[test]\\nfn a() {}\\n#[test]\\n#[ignore]\\nfn b() {}")
    2
    """
    return len(test_regions(tokenize(source)).test_fns)


def test_paths(source: str) -> tuple[str, ...]:
    """libtest names (``mod::fn`` paths relative to the file's module) of the ``#[test]`` functions in ``source``.

    >>> test_paths("#[test]\\nfn a() {}\\nmod inner {\\n    #[test]\\n    fn b() {}\\n}")
    ('a', 'inner::b')
    """
    tokens = tokenize(source)
    mods = [it for it in _items(tokens) if it.kind == "mod"]
    paths = []
    for fn in test_regions(tokens).test_fns:
        outer = sorted((m for m in mods if m.start < fn.start and fn.end <= m.end), key=lambda m: m.start)
        paths.append("::".join([*(m.name for m in outer), fn.name]))
    return tuple(paths)


def solution_names(tokens: list[Token], regions: TestRegions) -> frozenset[str]:
    """Names the solution defines (fns, types, consts, methods) outside test code."""
    names = set()
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind == "ident" and tok.text in _DEFINING_KEYWORDS and not regions.contains(i):
            nxt = tokens[i + 1]
            if nxt.kind == "ident" and nxt.text not in _NOT_SOLUTION and nxt.text != "_":
                names.add(nxt.text)
    return frozenset(names)


def _split_top_level_commas(tokens: list[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.kind == "punct" and tok.text in "([{":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        if depth == 0 and tok.text == ",":
            parts.append([])
        else:
            parts[-1].append(tok)
    return [p for p in parts if p]


@dataclass(frozen=True)
class _Assertion:
    text: str
    meaningful: bool


def _assertions_in_fn(tokens: list[Token], fn: Item, solution: frozenset[str]) -> tuple[list[_Assertion], bool]:
    """Assertions in one test fn, and whether the fn reaches solution code at all."""
    tainted = set(solution)
    found: list[_Assertion] = []
    calls_solution = False
    i = fn.start
    while i <= fn.end:
        tok = tokens[i]
        if tok.kind == "ident" and tok.text in solution:
            calls_solution = True
        if tok.text == "let":
            j = i + 1
            pattern: list[str] = []
            while j <= fn.end and tokens[j].text not in ("=", ";"):
                if tokens[j].kind == "ident":
                    pattern.append(tokens[j].text)
                if tokens[j].text == ":":
                    while j <= fn.end and tokens[j].text not in ("=", ";"):
                        j += 1
                    break
                j += 1
            if j <= fn.end and tokens[j].text == "=":
                k = j + 1
                depth = 0
                reaches = False
                while k <= fn.end:
                    t = tokens[k]
                    if t.kind == "punct" and t.text in "([{":
                        depth += 1
                    elif t.kind == "punct" and t.text in ")]}":
                        depth -= 1
                    if depth <= 0 and t.text == ";":
                        break
                    if t.kind == "ident" and t.text in tainted:
                        reaches = True
                    k += 1
                if reaches:
                    tainted.update(p for p in pattern if p not in ("mut", "ref"))
        if (
            tok.kind == "ident"
            and tok.text in ASSERT_MACROS
            and i + 2 <= fn.end
            and tokens[i + 1].text == "!"
            and tokens[i + 2].text in _OPEN
        ):
            close = _match_close(tokens, i + 2)
            args = tokens[i + 3 : close]
            calls_solution |= any(t.kind == "ident" and t.text in solution for t in args)
            found.append(_Assertion(_normalise(tok.text, args), _is_meaningful(tok.text, args, tainted)))
            i = close + 1
            continue
        i += 1
    return found, calls_solution


def _normalise(name: str, args: list[Token]) -> str:
    return name + "!(" + " ".join(t.text for t in args) + ")"


def _is_meaningful(name: str, args: list[Token], tainted: set[str]) -> bool:
    parts = _split_top_level_commas(args)
    compared = parts[:2] if name.endswith(("_eq", "_ne")) else parts[:1]
    if len(compared) == 2 and [t.text for t in compared[0]] == [t.text for t in compared[1]]:
        return False
    return any(t.kind == "ident" and t.text in tainted for part in compared for t in part)


STD_MACROS = frozenset({
    "assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne", "panic",
    "unreachable", "todo", "unimplemented", "matches", "vec", "format", "format_args", "write", "writeln",
    "print", "println", "eprint", "eprintln", "dbg", "concat", "stringify", "line", "column", "file",
    "module_path", "cfg", "env", "option_env", "include", "include_str", "include_bytes", "compile_error",
    "thread_local",
})
"""Macros hidden tests may rely on: model code that defines or re-exports one under these names is a hack."""
_FILE_MACROS = frozenset({"include", "include_str", "include_bytes"})
_HARNESS_ATTRS = frozenset({
    "path", "no_main", "no_std", "no_core", "feature", "test_runner", "reexport_test_harness_main", "no_mangle",
    "export_name", "link_section", "link_name", "link", "used",
})
"""Attributes that pull in other files, replace the test harness or override linker symbols."""
_PROCESS_ALLOWED = frozenset({"ExitCode", "Termination"})
HIDDEN_PREFIX = "__rr"
"""Every name the verifier writes into a crate starts with this; model code may not mention it."""


def _attribute_names(tokens: list[Token], start: int, close: int) -> list[str]:
    """Names of the attributes in ``#[...]`` tokens ``start..close`` (through ``unsafe(...)``/``cfg_attr``)."""
    inner = tokens[start:close]
    if not inner or inner[0].kind != "ident":
        return []
    name = inner[0].text
    if name == "unsafe" and len(inner) > 2:
        return [inner[2].text]
    if name == "cfg_attr" and len(inner) > 1 and inner[1].text == "(":
        parts = _split_top_level_commas(inner[2:-1])
        return [p[0].text for p in parts[1:] if p and p[0].kind == "ident"]
    return [name]


def forbidden_calls(tokens: list[Token]) -> tuple[str, ...]:
    """Constructs that can forge a verdict or reach what the verifier hides (empty for honest code).

    Process control (``std::process`` exits and commands, extern blocks, inline assembly); reading files at
    compile time (``include*!``, ``#[path]``); replacing the test harness or linker symbols (``#![no_main]``,
    ``#[no_mangle]``...); redefining a std macro the hidden tests use (``macro_rules! assert_eq``, ``use ... as
    assert_eq``); naming the verifier's hidden-test module.

    >>> forbidden_calls(tokenize("macro_rules! assert_eq { ($($t:tt)*) => {} }"))
    ('redefines assert_eq!',)
    """
    found: set[str] = set()
    n = len(tokens)
    in_use = False
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < n else None
        after = tokens[i + 2] if i + 2 < n else None
        if tok.kind == "ident" and tok.text == "use":
            in_use = True
        elif tok.text == ";":
            in_use = False
        if tok.kind in ("ident", "string") and HIDDEN_PREFIX in tok.text:
            found.add(f"names the verifier's hidden-test module ({HIDDEN_PREFIX}...)")
        if tok.kind == "ident" and tok.text == "process":
            target = after.text if nxt is not None and nxt.text == "::" and after is not None else None
            if target is not None and target not in _PROCESS_ALLOWED:
                found.add(f"std::process::{target}" if after.kind == "ident" else "std::process")
            elif in_use and target is None:
                found.add("imports std::process")
        if tok.text == "extern" and nxt is not None and nxt.kind == "string" and after is not None \
                and after.text == "{":
            found.add("extern block")
        if tok.kind == "ident" and tok.text in ("asm", "global_asm", "naked_asm"):
            found.add("inline assembly")
        if tok.kind == "ident" and tok.text in _FILE_MACROS and nxt is not None and nxt.text == "!":
            found.add(f"{tok.text}! (reads a file at compile time)")
        if tok.kind == "ident" and tok.text == "macro_rules" and nxt is not None and nxt.text == "!" \
                and after is not None and after.text in STD_MACROS:
            found.add(f"redefines {after.text}!")
        if tok.kind == "ident" and tok.text == "as" and nxt is not None and nxt.text in STD_MACROS:
            found.add(f"redefines {nxt.text}!")
        if tok.text == "#" and nxt is not None:
            open_at = i + 2 if nxt.text == "!" else i + 1
            if open_at < n and tokens[open_at].text == "[":
                close = _match_close(tokens, open_at)
                for name in _attribute_names(tokens, open_at + 1, close):
                    if name in _HARNESS_ATTRS:
                        found.add(f"#[{name}] attribute")
    return tuple(sorted(found))


def analyse(code: str) -> SourceFacts:
    """All static facts the rewards need about one completion's code.

    >>> facts = analyse('''
    ... pub fn double(x: i32) -> i32 { x * 2 }
    ... #[cfg(test)]
    ... mod tests {
    ...     use super::*;
    ...     #[test] fn a() { assert_eq!(double(2), 4); }
    ...     #[test] fn b() { assert!(true); assert_eq!(2, 2); }
    ... }''')
    >>> facts.test_fns, len(facts.meaningful_assertions), facts.trivial_assertions
    (('a', 'b'), 1, 2)
    """
    tokens = tokenize(code)
    regions = test_regions(tokens)
    solution = solution_names(tokens, regions)
    meaningful: dict[str, None] = {}
    trivial = 0
    total = 0
    calling = 0
    for fn in regions.test_fns:
        found, calls = _assertions_in_fn(tokens, fn, solution)
        calling += calls
        for a in found:
            total += 1
            if a.meaningful:
                meaningful.setdefault(a.text)
            else:
                trivial += 1
    return SourceFacts(
        code_lines=sum(1 for line in _strip_comments(code).splitlines() if line.strip()),
        test_fns=tuple(fn.name for fn in regions.test_fns),
        assertions=total,
        meaningful_assertions=tuple(meaningful),
        trivial_assertions=trivial,
        tests_calling_solution=calling,
        forbidden=forbidden_calls(tokens),
    )


def _strip_comments(code: str) -> str:
    """The code with comments removed (strings kept), preserving line structure."""
    out, last = [], 0
    for m in re.finditer(r"//[^\n]*|/\*.*?\*/|\"(?:[^\"\\]|\\.)*\"", code, re.DOTALL):
        if m.group().startswith('"'):
            continue
        out.append(code[last : m.start()])
        out.append("\n" * m.group().count("\n"))
        last = m.end()
    out.append(code[last:])
    return "".join(out)


def strip_test_code(code: str) -> str:
    """The code without its ``#[cfg(test)]`` modules and top-level ``#[test]`` functions.

    Used to compile hidden tests when the model's own tests do not compile.
    """
    tokens = tokenize(code)
    regions = test_regions(tokens)
    spans = sorted(
        (tokens[it.start].start, tokens[it.end].end) for it in (*regions.cfg_test_mods, *regions.test_fns)
    )
    out, last = [], 0
    for start, end in spans:
        if start < last:
            continue
        out.append(code[last:start])
        last = end
    out.append(code[last:])
    return "".join(out)
