"""A small lexer for Rust source and the structure every static check reads: tokens, fn and mod items, test regions
(``#[cfg(test)]`` modules, ``#[test]`` functions) and the code without them. No compiler is involved. The rules
built on it live in ``rust.rules`` (forbidden constructs), ``rust.facts`` (assertions, ``analyse``),
``rust.signatures``, ``rust.names``, ``rust.soundness`` and ``rust.mutants``.

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



HIDDEN_PREFIX = "__rr"
"""Every name the verifier writes into a crate starts with this; model code may not mention it."""


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


def comma_ranges(tokens: list[Token], pairs: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
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
