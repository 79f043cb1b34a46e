"""Static facts about Rust source: a small lexer plus test, assertion and solution analysis.

No compiler is involved; this only sees tokens. It finds every ``#[test]`` function (not just the first),
classifies assertions as meaningful (they reach code from the solution, directly or through a ``let``
binding) or trivial, and flags process-control calls that could forge a test verdict.

Every rule reads one normalised view: the tokens rustc would see (shebang line and byte-order mark skipped, raw and
C strings whole, ``r#name`` folded to ``name``, Unicode identifiers in NFC), with ``cfg_attr``/``unsafe(...)``
attributes unfolded to any depth. Token offsets always point into the original text.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from dataclasses import dataclass

from rust_rewards.report import SourceFacts

_TOKEN = re.compile(
    r"""
    (?P<ws>[\s\u200e\u200f]+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>[bc]?r\#*")
  | (?P<string>[bc]?"(?:[^"\\]|\\.)*")
  | (?P<char>b?'(?:[^'\\\n]|\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,8}\}|.))')
  | (?P<lifetime>'(?:r\#)?[^\W\d]\w*)
  | (?P<ident>(?:r\#)?[^\W\d]\w*)
  | (?P<number>[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?)
  | (?P<punct>::|=>|->|==|!=|<=|>=|&&|\|\||[^\sA-Za-z0-9_])
    """,
    re.VERBOSE | re.DOTALL,
)
"""Rust's lexical classes: ``r#"`` opens a raw string (also ``br``/``cr``), ``r#name`` is a raw identifier, and
identifiers may be Unicode (XID, compared after NFC like rustc). U+200E/U+200F are whitespace to rustc too."""

ASSERT_MACROS = frozenset(
    {"assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne"}
)
_DEFINING_KEYWORDS = frozenset({"fn", "struct", "enum", "trait", "type", "const", "static", "union"})
_NOT_SOLUTION = frozenset({"main", "tests", "test", "super", "self", "Self", "crate"})
_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_RESERVED_WORDS = frozenset({
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
    "unsafe", "use", "where", "while", "async", "await", "dyn", "try", "abstract", "become", "box", "do", "final",
    "macro", "override", "priv", "typeof", "unsized", "virtual", "yield",
})
"""Keywords (edition 2021) that rustc and libtest still print as ``r#name`` when written as raw identifiers."""


@dataclass(frozen=True)
class Token:
    """One token. ``text`` is normalised for identifiers (``r#exit`` gives ``exit``, ``raw`` set; Unicode in NFC);
    ``start``/``end`` are always the offsets of the original text in the source."""

    kind: str
    text: str
    start: int
    end: int
    raw: bool = False


def tokenize(source: str) -> list[Token]:
    """Split Rust source into tokens, dropping whitespace and comments.

    >>> [t.text for t in tokenize('let s = "a // b"; // c')]
    ['let', 's', '=', '"a // b"', ';']
    >>> [(t.kind, t.text) for t in tokenize('std::r#process::exit(r#"x"#)')][2:5]
    [('ident', 'process'), ('punct', '::'), ('ident', 'exit')]
    >>> tokenize('r#"x"#')[0].kind, tokenize("r#exit")[0]
    ('string', Token(kind='ident', text='exit', start=0, end=6, raw=True))
    """
    tokens: list[Token] = []
    pos, n = _code_start(source), len(source)
    match = _TOKEN.match
    while pos < n:
        m = match(source, pos)
        if m is None:  # not reached: the punct class takes any other character
            tokens.append(Token("punct", source[pos], pos, pos + 1))
            pos += 1
            continue
        kind = m.lastgroup
        end = m.end()
        if kind == "ws" or kind == "line_comment":
            pos = end
            continue
        if kind == "ident":
            while end < n and not source[end].isascii() and ("_" + source[end]).isidentifier():
                end += 1  # combining marks and other XID_Continue characters Python's \w leaves out
            text = source[pos:end]
            raw = text.startswith("r#")
            if raw:
                text = text[2:]
            if not text.isascii():
                text = unicodedata.normalize("NFC", text)
            tokens.append(Token("ident", text, pos, end, raw))
            pos = end
            continue
        if kind == "block_comment":
            pos = _skip_block_comment(source, pos)
            continue
        if kind == "raw_string":
            closing = '"' + "#" * m.group().count("#")
            found = source.find(closing, end)
            end = n if found < 0 else found + len(closing)
            tokens.append(Token("string", source[pos:end], pos, end))
            pos = end
            continue
        tokens.append(Token(kind, m.group(), pos, end))
        pos = end
    return tokens


_WS = re.compile(r"[\s\u200e\u200f]*")


def _code_start(source: str) -> int:
    """Where rustc starts reading: after a byte-order mark and a shebang line (``#!`` not opening ``#![...]``).

    >>> _code_start('#!/bin/sh "\\nfn f() {}'), _code_start("#! // c\\n[allow(x)]")
    (11, 0)
    """
    pos = 1 if source.startswith("\ufeff") else 0
    if not source.startswith("#!", pos):
        return pos
    i, n = pos + 2, len(source)
    while True:  # as rustc_lexer::strip_shebang: skip whitespace and non-doc comments, then look for `[`
        i = _WS.match(source, i).end()
        if source.startswith("//", i) and not (source.startswith("//!", i) or
                                               (source.startswith("///", i) and not source.startswith("////", i))):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i) and not (source.startswith("/*!", i) or (
                source.startswith("/**", i) and not source.startswith(("/***", "/**/"), i))):
            i = _skip_block_comment(source, i)
        else:
            break
    if source.startswith("[", i):
        return pos
    end = source.find("\n", pos)
    return n if end < 0 else end


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


def _attribute_at(tokens: list[Token], i: int, pairs: list[int] | None = None) -> tuple[list[str], int] | None:
    """If an outer attribute ``#[...]`` starts at ``i``, return its inner token texts and the index after it."""
    if tokens[i].text == "#" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
        close = pairs[i + 1] if pairs is not None else _match_close(tokens, i + 1)
        return [t.text for t in tokens[i + 2 : close]], close + 1
    return None


def _display_name(tok: Token) -> str:
    """The name as rustc prints it (libtest names): ``r#`` kept only where the name is a keyword."""
    return "r#" + tok.text if tok.raw and tok.text in _RESERVED_WORDS else tok.text


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
    pairs = _bracket_pairs(tokens)
    pending: list[tuple[str, ...]] = []
    pending_start = None
    while i < n:
        attr = _attribute_at(tokens, i, pairs)
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
                end = pairs[j]
                start = pending_start if pending_start is not None else i
                items.append(Item(tok.text, _display_name(tokens[i + 1]), start, end, tuple(pending)))
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

    __test__ = False  # not a pytest test class

    test_fns: tuple[Item, ...]
    cfg_test_mods: tuple[Item, ...]

    def contains(self, index: int) -> bool:
        spans = self._spans
        k = bisect.bisect_right(spans, (index, float("inf"))) - 1  # the last span starting at or before
        return k >= 0 and spans[k][1] >= index

    @functools.cached_property
    def _spans(self) -> list[tuple[int, int]]:
        """The regions' token spans, nested and overlapping ones merged, in order."""
        merged: list[tuple[int, int]] = []
        for start, end in sorted((it.start, it.end) for it in (*self.test_fns, *self.cfg_test_mods)):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


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


test_regions.__test__ = test_paths.__test__ = False  # type: ignore[attr-defined]  # not pytest tests

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
_ASM_MACROS = frozenset({"asm", "global_asm", "naked_asm"})
_HARNESS_ATTRS = frozenset({
    "path", "no_main", "no_std", "no_core", "feature", "test_runner", "reexport_test_harness_main", "no_mangle",
    "export_name", "link_section", "link_name", "link", "used", "global_allocator", "panic_handler", "naked",
    "linkage", "start", "lang", "alloc_error_handler", "crate_type", "crate_name",
})
"""Attributes that pull in other files, replace the test harness, the allocator or the panic runtime, or override
linker symbols (also ``rustc_*``). Found at any depth of ``cfg_attr(...)``/``unsafe(...)``."""
_PROCESS_ALLOWED = frozenset({"ExitCode", "Termination"})
HIDDEN_PREFIX = "__rr"
"""Every name the verifier writes into a crate starts with this; model code may not mention it."""

_PRIMITIVES = frozenset({
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    "f16", "f32", "f64", "f128", "bool", "char", "str",
})
_PRELUDE_VALUES = frozenset({"Some", "None", "Ok", "Err", "drop"})
_PRELUDE_TYPES = frozenset({
    "String", "Vec", "Option", "Result", "Box", "Copy", "Send", "Sized", "Sync", "Unpin", "Drop", "Fn", "FnMut",
    "FnOnce", "ToOwned", "Clone", "PartialEq", "PartialOrd", "Eq", "Ord", "AsRef", "AsMut", "Into", "From",
    "Default", "Iterator", "Extend", "IntoIterator", "DoubleEndedIterator", "ExactSizeIterator", "ToString",
    "TryFrom", "TryInto", "FromIterator",
})
_CRATE_NAMES = frozenset({"std", "core", "alloc"})
SHADOW_NAMES = _PRIMITIVES | _PRELUDE_TYPES | _PRELUDE_VALUES | _CRATE_NAMES
"""Names hidden tests use unqualified: an item of the model's under one of them (through ``use super::*``) would
take the place of the primitive, prelude item or crate."""
_TYPE_DEFINERS = frozenset({"struct", "enum", "union", "type", "trait", "mod"})
_VALUE_DEFINERS = frozenset({"fn", "const", "static"})
"""Items in the value namespace only shadow prelude values (``fn Some``); ``fn u8(&mut self)`` is harmless."""
_ITEM_QUALIFIERS = frozenset({"pub", "unsafe", "default", "auto", "const"})


def _bracket_pairs(tokens: list[Token]) -> list[int]:
    """For each opening bracket, the index of its closer (as ``_match_close``; the last index when unbalanced)."""
    pairs = [-1] * len(tokens)
    stacks: dict[str, list[int]] = {"(": [], "[": [], "{": []}
    for i, tok in enumerate(tokens):
        if tok.kind != "punct":
            continue
        if tok.text in stacks:
            stacks[tok.text].append(i)
        elif tok.text in _CLOSE and stacks[_CLOSE[tok.text]]:
            pairs[stacks[_CLOSE[tok.text]].pop()] = i
    for stack in stacks.values():
        for i in stack:
            pairs[i] = len(tokens) - 1
    return pairs


def _comma_ranges(tokens: list[Token], pairs: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
    """The non-empty top-level comma-separated parts of ``tokens[lo:hi]``, as index ranges (groups skipped whole)."""
    parts: list[tuple[int, int]] = []
    start = i = lo
    while i < hi:
        tok = tokens[i]
        if tok.kind == "punct" and tok.text == ",":
            if i > start:
                parts.append((start, i))
            start = i + 1
        elif tok.kind == "punct" and tok.text in _OPEN:
            i = max(i, min(pairs[i], hi - 1))
        i += 1
    if hi > start:
        parts.append((start, hi))
    return parts


def _attribute_names(tokens: list[Token], start: int, close: int, pairs: list[int] | None = None) -> list[str]:
    """Names of the attributes in ``#[...]`` tokens ``start..close``, through ``unsafe(...)`` and ``cfg_attr`` to any
    depth (a path gives its last segment).

    >>> src = '#[cfg_attr(all(), cfg_attr(test, unsafe(no_mangle)), link_section = ".x")]'
    >>> toks = tokenize(src)
    >>> sorted(_attribute_names(toks, 2, len(toks) - 1))
    ['link_section', 'no_mangle']
    """
    pairs = _bracket_pairs(tokens) if pairs is None else pairs
    names: list[str] = []
    work = [(start, close)]
    while work:  # not recursive: hostile nesting must not reach Python's recursion limit
        lo, hi = work.pop()
        i = lo + (lo < hi and tokens[lo].text == "::")
        name = None
        while i < hi and tokens[i].kind == "ident":
            name = tokens[i].text
            i += 1
            if i < hi and tokens[i].text == "::":
                i += 1
            else:
                break
        if name is None:
            continue
        if name in ("unsafe", "cfg_attr") and i < hi and tokens[i].text == "(":
            parts = _comma_ranges(tokens, pairs, i + 1, min(pairs[i], hi))
            work.extend(parts[1:] if name == "cfg_attr" else parts)
        else:
            names.append(name)
    return names


def _use_leaves(tokens: list[Token], pairs: list[int], lo: int, hi: int) -> list[tuple[str, str, str | None, bool]]:
    """The leaves of the use tree ``tokens[lo:hi]``: (first path segment, last segment, alias, is a glob)."""
    out: list[tuple[str, str, str | None, bool]] = []
    work = [(lo, hi, "", "")]
    while work:
        lo, hi, root, last = work.pop()
        i = lo
        while i < hi:
            tok = tokens[i]
            if tok.kind == "punct" and tok.text == "{":
                work.extend((a, b, root, last) for a, b in _comma_ranges(tokens, pairs, i + 1, min(pairs[i], hi)))
                break
            if tok.text == "*":
                out.append((root, last, None, True))
                break
            if tok.kind == "ident" and tok.text == "as":
                alias = tokens[i + 1].text if i + 1 < hi and tokens[i + 1].kind == "ident" else None
                out.append((root, last, alias, False))
                break
            if tok.kind == "ident":
                root = root or tok.text
                if tok.text != "self":
                    last = tok.text
            i += 1
        else:
            out.append((root, last, None, False))
    return out


def _shadowing_variants(tokens: list[Token], pairs: list[int]) -> dict[str, list[str]]:
    """Enums with variants named like a prelude/primitive name (harmless until glob-imported: ``use E::*``)."""
    out: dict[str, list[str]] = {}
    next_brace = len(tokens)
    for i in range(len(tokens) - 1, -1, -1):
        tok = tokens[i]
        if tok.kind == "punct" and tok.text == "{":
            next_brace = i
        elif tok.kind == "ident" and tok.text == "enum" and i + 1 < len(tokens) and tokens[i + 1].kind == "ident":
            if next_brace >= len(tokens):
                continue
            for lo, hi in _comma_ranges(tokens, pairs, next_brace + 1, pairs[next_brace]):
                while lo < hi and tokens[lo].text == "#" and lo + 1 < hi and tokens[lo + 1].text == "[":
                    lo = pairs[lo + 1] + 1
                if lo < hi and tokens[lo].kind == "ident" and tokens[lo].text in SHADOW_NAMES:
                    out.setdefault(tokens[i + 1].text, []).append(tokens[lo].text)
    return out


def _opens_associated_items(tokens: list[Token], pairs: list[int], start: int, brace: int) -> bool:
    """Whether the ``{`` at ``brace`` opens an ``impl``/``trait`` body (the statement begins at ``start``)."""
    i = start
    while i < brace:
        tok = tokens[i]
        if tok.text == "#":
            j = i + 1 + (i + 1 < brace and tokens[i + 1].text == "!")
            if j < brace and tokens[j].text == "[":
                i = pairs[j] + 1
                continue
            return False
        if tok.kind == "ident" and tok.text in _ITEM_QUALIFIERS:
            i += 1
            if tok.text == "pub" and i < brace and tokens[i].text == "(":
                i = pairs[i] + 1
            continue
        if not (tok.kind == "ident" and tok.text in ("impl", "trait")):
            return False
        while i < brace:  # the brace must belong to the item itself, not to an expression in its header
            i = pairs[i] + 1 if tokens[i].kind == "punct" and tokens[i].text in _OPEN else i + 1
        return i == brace
    return False


def forbidden_calls(tokens: list[Token]) -> tuple[str, ...]:
    """Constructs that can forge a verdict or reach what the verifier hides (empty for honest code).

    Process control (``std::process`` exits and commands, extern blocks and crates, inline assembly, any
    ``unsafe``); reading files at compile time (``include*!``, ``#[path]``); replacing the test harness, runtime or
    linker symbols (``#![no_main]``, ``#[no_mangle]``, ``#[global_allocator]``..., at any ``cfg_attr`` depth);
    redefining a std macro the hidden tests use (``macro_rules! assert_eq``, ``use ... as assert_eq``); items or
    imports that shadow a primitive, prelude or std-crate name (``struct i32``, ``use X as Option``, ``mod std``);
    the same names handed to a macro that splices them into a path, an item name or an attribute; naming the
    verifier's hidden-test module. Raw identifiers count as their plain names (the lexer folds ``r#``).

    >>> forbidden_calls(tokenize("macro_rules! assert_eq { ($($t:tt)*) => {} }"))
    ('redefines assert_eq!',)
    >>> forbidden_calls(tokenize("fn f() { std::r#process::exit(0) } struct i32;"))
    ('shadows built-in name i32', 'std::process::exit')
    """
    scan = _Scan(tokens)
    for i, tok in enumerate(tokens):
        if tok.kind == "punct":
            scan.punct(i)
        elif tok.kind == "string":
            scan.string(tok.text)
        elif tok.kind == "ident":
            scan.ident(i)
    if scan.splices:
        scan.found.update(_spliced(tokens, scan.invocations, scan.splices))
    return tuple(sorted(scan.found))


class _Scan:
    """``forbidden_calls``' pass over the tokens: where it is (inside a ``use``, an impl/trait body) and what it
    found so far (reasons, the kinds of splices local macros make, the invocations of local macros)."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens, self.n = tokens, len(tokens)
        self.pairs = _bracket_pairs(tokens)
        self.variants = _shadowing_variants(tokens, self.pairs)
        self.found: set[str] = set()
        self.splices: set[str] = set()
        self.invocations: list[tuple[int, int]] = []
        self.in_use = False
        self.use_end = -1
        self.associated: list[bool] = []  # per open brace: True for an impl/trait body
        self.statement = 0

    def _at(self, i: int) -> Token | None:
        return self.tokens[i] if i < self.n else None

    def punct(self, i: int) -> None:
        tokens, text, nxt, after = self.tokens, self.tokens[i].text, self._at(i + 1), self._at(i + 2)
        if text == "{":
            self.associated.append(_opens_associated_items(tokens, self.pairs, self.statement, i))
            self.statement = i + 1
        elif text == "}":
            if self.associated:
                self.associated.pop()
            self.statement = i + 1
        elif text == ";":
            self.in_use = False
            self.statement = i + 1
        elif text == "#" and nxt is not None:
            open_at = i + 2 if nxt.text == "!" else i + 1
            if open_at < self.n and tokens[open_at].text == "[":
                close = self.pairs[open_at]
                for name in _attribute_names(tokens, open_at + 1, close, self.pairs):
                    if name in _HARNESS_ATTRS or name.startswith("rustc_"):
                        self.found.add(f"#[{name}] attribute")
                if any(t.text == "$" for t in tokens[open_at + 1 : close]):
                    self.splices.add("attribute")
        elif text == "$" and nxt is not None and nxt.kind == "ident" and nxt.text != "crate":
            before = tokens[i - 1].text if i else ""
            if before == "::" or (after is not None and after.text in ("::", "!")):
                self.splices.add("path")
            if after is not None and (after.text == "$" or (after.kind == "ident"
                                                           and after.text not in _RESERVED_WORDS)):
                self.splices.add("type")  # `$kw $name`: a metavariable standing for a keyword
            if self.in_use and before == "as":
                self.splices.add("type")

    def string(self, text: str) -> None:
        if HIDDEN_PREFIX in text:
            self.found.add(f"names the verifier's hidden-test module ({HIDDEN_PREFIX}...)")
        if text.startswith("cr#"):  # before edition 2021 `cr#"a"b"#` is `cr # "a" b "#...`: code hides in it
            self.found.add("raw C string literal")

    def ident(self, i: int) -> None:
        tokens, found = self.tokens, self.found
        text, nxt, after = tokens[i].text, self._at(i + 1), self._at(i + 2)
        if HIDDEN_PREFIX in text:
            found.add(f"names the verifier's hidden-test module ({HIDDEN_PREFIX}...)")
        if text == "use" and not (nxt is not None and nxt.text == "<") and i > self.use_end:
            self._use(i)
        elif text == "process":
            target = after.text if nxt is not None and nxt.text == "::" and after is not None else None
            if target is not None and target not in _PROCESS_ALLOWED:
                found.add(f"std::process::{target}" if after.kind == "ident" else "std::process")
            elif self.in_use and target is None:
                found.add("imports std::process")
        elif text == "unsafe":
            found.add("unsafe code")
        elif text == "extern":
            if nxt is not None and nxt.kind == "ident" and nxt.text == "crate":
                found.add("extern crate")
            else:
                k = i + 2 if nxt is not None and nxt.kind == "string" else i + 1
                if not (k < self.n and tokens[k].kind == "ident" and tokens[k].text == "fn"):
                    found.add("extern block")  # foreign items; `extern "C" fn` definitions and types are fine
        elif text in _ASM_MACROS:
            found.add("inline assembly")
        elif text == "global_allocator":
            found.add("#[global_allocator] attribute")
        elif text in _FILE_MACROS and (text != "include" or self.in_use or (nxt is not None and nxt.text == "!")):
            found.add(f"{text}! (reads a file at compile time)")
        elif text == "macro_rules" and nxt is not None and nxt.text == "!" and after is not None:
            if after.text in STD_MACROS:
                found.add(f"redefines {after.text}!")
            elif after.text == "$":
                self.splices.add("macro")
        elif text == "as" and nxt is not None:
            if nxt.text in STD_MACROS:
                found.add(f"redefines {nxt.text}!")
        elif (text in _TYPE_DEFINERS or text in _VALUE_DEFINERS) and not (self.associated and self.associated[-1]):
            self._definition(i, text, nxt)
        if nxt is not None and nxt.text == "!" and after is not None and after.text in _OPEN \
                and text not in STD_MACROS:
            self.invocations.append((i + 3, self.pairs[i + 2]))

    def _use(self, i: int) -> None:
        """A ``use`` declaration: imports that shadow a built-in name, or glob-import shadowing enum variants."""
        self.in_use = True
        self.use_end = i + 1
        while self.use_end < self.n and self.tokens[self.use_end].text != ";":
            self.use_end += 1
        for root, last, alias, glob in _use_leaves(self.tokens, self.pairs, i + 1, self.use_end):
            name = alias if alias is not None else last
            if glob:
                self.found.update(f"shadows built-in name {v}" for v in self.variants.get(last, ()))
            elif name in SHADOW_NAMES and (alias is not None or root not in _CRATE_NAMES):
                self.found.add(f"shadows built-in name {name}")

    def _definition(self, i: int, text: str, nxt: Token | None) -> None:
        """An item definition outside impl/trait bodies: a type or value named like a built-in one."""
        j = i + 2 if text == "static" and nxt is not None and nxt.text == "mut" else i + 1
        if j < self.n and self.tokens[j].kind == "ident":
            if self.tokens[j].text in (SHADOW_NAMES if text in _TYPE_DEFINERS else _PRELUDE_VALUES):
                self.found.add(f"shadows built-in name {self.tokens[j].text}")
        elif j < self.n and self.tokens[j].text == "$":
            self.splices.add("type" if text in _TYPE_DEFINERS else "value")


TEST_CFG = "cfg(test) on solution code (tests would not see the shipped build)"


def cfg_test_reasons(tokens: list[Token], regions: TestRegions) -> tuple[str, ...]:
    """``TEST_CFG`` when code outside test modules and test functions depends on whether it is compiled for tests:
    a ``cfg``/``cfg_attr`` attribute or ``cfg!`` whose predicate names ``test`` (``cfg(not(test))`` included), except
    ``#[cfg(test)]`` on a module (the test module) or a ``use``. Hidden and own tests only ever run the test build.

    >>> toks = tokenize("#[cfg(not(test))] pub fn f() -> i32 { 1 } #[cfg(test)] pub fn f() -> i32 { 2 }")
    >>> cfg_test_reasons(toks, test_regions(toks)) == (TEST_CFG,)
    True
    """
    pairs = _bracket_pairs(tokens)
    for i, tok in enumerate(tokens[:-2]):
        if regions.contains(i) or tok.kind != "ident" or tok.text not in ("cfg", "cfg_attr"):
            continue
        nxt = tokens[i + 1]
        bang = nxt.text == "!"
        open_at = i + 2 if bang else i + 1
        if open_at >= len(tokens) or tokens[open_at].text != "(":
            continue
        inner = tokens[open_at + 1 : pairs[open_at]]
        if not any(t.kind == "ident" and t.text == "test" for t in inner):
            continue
        after = pairs[open_at] + 2  # past `)` and the attribute's `]`
        plain = not bang and tok.text == "cfg" and [t.text for t in inner] == ["test"]
        if plain and after < len(tokens) and tokens[after].text in ("use", "mod", "pub"):
            k = after + (tokens[after].text == "pub")
            if k < len(tokens) and tokens[k].text in ("use", "mod"):
                continue
        return (TEST_CFG,)
    return ()


_WHERE_AM_I = frozenset({"module_path", "type_name", "type_name_of_val", "Location", "TypeId", "current_exe",
                         "current_dir", "temp_dir", "args", "args_os", "fs", "File", "OpenOptions", "current"})
"""Names through which test code can tell whether it runs at home or as a variant's copy (its module path, thread
name, files, arguments)."""


def observing_tests(tokens: list[Token], regions: TestRegions) -> tuple[str, ...]:
    """A reason when the model's test code names what could tell it where it runs (``_WHERE_AM_I``, ``file!``,
    ``line!``, ``env::``): copies of its tests run against the reference and a wrong variant and must not be
    able to tell that they are copies.

    >>> toks = tokenize("#[test] fn t() { assert!(std::thread::current().name().is_some()); }")
    >>> observing_tests(toks, test_regions(toks))
    ('own tests observe where they run (current)',)
    """
    found = []
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind != "ident" or not regions.contains(i):
            continue
        nxt = tokens[i + 1].text
        if (tok.text in _WHERE_AM_I or (tok.text in ("file", "line", "column") and nxt == "!")
                or (tok.text == "env" and nxt == "::")):
            found.append(tok.text)
    return (f"own tests observe where they run ({', '.join(dict.fromkeys(found))})",) if found else ()


def _fn_shape(tokens: list[Token], fn: Item) -> tuple[str, ...] | None:
    """A fn from its parameter list to the end of its body, every identifier renamed by first occurrence (so a
    copy with other names has the same shape); ``None`` for a fn without parameters or a short body."""
    for i in range(fn.start, fn.end):
        if tokens[i].text == "fn" and tokens[i + 1].text == fn.name:
            names: dict[str, str] = {}
            shape = tuple(names.setdefault(t.text, f"#{len(names)}") if t.kind == "ident" else t.text
                          for t in tokens[i + 2 : fn.end + 1])
            return shape if len(shape) >= 8 and "(" in shape[:3] else None
    return None


COPIED_SOLUTION = "own tests keep a copy of a solution function (they compare it with itself)"


def copied_solution(tokens: list[Token], regions: TestRegions) -> tuple[str, ...]:
    """``COPIED_SOLUTION`` when a helper fn in the test code has the shape (``_fn_shape``) of a fn of the solution:
    a test comparing the solution with its own copy passes on any solution at home and "kills" every variant.

    >>> toks = tokenize("fn f(a: i32) -> i32 { a * 2 } #[cfg(test)] mod t { fn g(x: i32) -> i32 { x * 2 } }")
    >>> copied_solution(toks, test_regions(toks)) == (COPIED_SOLUTION,)
    True
    """
    fns = [it for it in _items(tokens) if it.kind == "fn"]
    tests = set(regions.test_fns)
    shapes = {_fn_shape(tokens, fn): fn for fn in fns if not regions.contains(fn.start)}
    shapes.pop(None, None)
    for fn in fns:
        if fn not in tests and regions.contains(fn.start) and _fn_shape(tokens, fn) in shapes:
            return (COPIED_SOLUTION,)
    return ()


def _spliced(tokens: list[Token], invocations: list[tuple[int, int]], splices: set[str]) -> set[str]:
    """Reasons for names handed to the model's own macros that splice arguments into paths (``$a::exit``), item
    names (``struct $name``), macro names or attributes (``#[$attr]``)."""
    found: set[str] = set()
    shadow = SHADOW_NAMES if "type" in splices else _PRELUDE_VALUES if "value" in splices else frozenset()
    covered = -1
    for lo, hi in sorted(invocations):
        if hi <= covered:
            continue  # nested in an invocation already read
        for tok in tokens[max(lo, covered + 1) : hi]:
            if tok.kind != "ident":
                continue
            text = tok.text
            if "path" in splices and text == "process":
                found.add("std::process")
            if "path" in splices and text in _FILE_MACROS:
                found.add(f"{text}! (reads a file at compile time)")
            if text in shadow:
                found.add(f"shadows built-in name {text}")
            if "macro" in splices and text in STD_MACROS:
                found.add(f"redefines {text}!")
            if "attribute" in splices and (text in _HARNESS_ATTRS or text.startswith("rustc_")):
                found.add(f"#[{text}] attribute")
        covered = max(covered, hi)
    return found


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
        forbidden=tuple(sorted(forbidden_calls(tokens) + cfg_test_reasons(tokens, regions)
                               + observing_tests(tokens, regions) + copied_solution(tokens, regions))),
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
