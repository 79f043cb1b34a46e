"""Single-mutation variants ("mutants") of a Rust solution, to check that a model's own tests can fail.

Pure Python and deterministic. Works on the lexer in :mod:`rust_rewards.rust.lexer` and rewrites the source only at
token offsets (never from token texts). Only ``fn`` bodies outside test code are mutated; signatures,
attributes, ``const``/``static`` items, type annotations, array lengths, nested type declarations, literals
other than numbers and booleans, and the arguments of panicking macros (``assert!``, ``panic!``...) are left
alone. Binary operators are only mutated where they are spaced like binary operators (``a < b``), which keeps
generics (``Vec<T>``), references (``&&x``), derefs, negations and closures (``|| x``) out of reach.

>>> mutants("pub fn pos(x: i32) -> bool { x > 0 }")
['pub fn pos(x: i32) -> bool { x >= 0 }', 'pub fn pos(x: i32) -> bool { x > 1 }']
"""

from __future__ import annotations

import re

from rust_rewards.rust.lexer import Token, strip_test_code, tokenize

_SWAPS: dict[str, tuple[int, str]] = {
    "==": (0, "!="), "!=": (0, "=="), "&&": (1, "||"), "||": (1, "&&"),
    "<": (2, "<="), "<=": (2, "<"), ">": (2, ">="), ">=": (2, ">"),
    "*": (4, "+"), "/": (4, "*"), "%": (4, "/"), "+": (5, "-"), "-": (5, "+"),
}
"""Operator -> (rank, replacement). Lower ranks come first: they rarely panic (``-`` can underflow)."""
_BOOL_RANK, _METHOD_RANK, _COMPOUND_RANK, _INSERT_RANK, _NUMBER_RANK, _MAIN_PENALTY = 1, 2, 3, 5, 6, 10
_PAIRS = (
    "min max", "min_by max_by", "min_by_key max_by_key", "starts_with ends_with", "trim_start trim_end",
    "trim_start_matches trim_end_matches", "strip_prefix strip_suffix", "to_lowercase to_uppercase",
    "to_ascii_lowercase to_ascii_uppercase", "is_lowercase is_uppercase", "is_ascii_lowercase is_ascii_uppercase",
    "saturating_add saturating_sub", "wrapping_add wrapping_sub", "checked_add checked_sub", "push_front push_back",
    "pop_front pop_back", "front back", "any all", "take skip", "take_while skip_while", "split_first split_last",
    "is_some is_none", "is_ok is_err", "floor ceil", "Less Greater", "MIN MAX",
)
_METHODS = {a: b for pair in _PAIRS for a, b in (pair.split(), pair.split()[::-1])} | {
    "first": "last", "next_back": "next",  # one way only: iterators have `last` but no `first`
}
"""Method (after ``.``) or path (after ``::``) names swapped for a same-typed opposite."""
_NOT_PATHS = frozenset({"take", "skip", "first", "front", "back", "any", "all", "next_back"})
"""Iterator-like method names that mean something else as paths (``std::mem::take``)."""
_REVERSIBLE = frozenset({"iter", "chars", "bytes", "char_indices"})
"""Iterator sources that ``.rev()`` is inserted after (low rank: a hash map's iterator has no ``rev``)..."""
_ADAPTERS = frozenset({"copied", "cloned", "map", "filter", "filter_map", "flat_map", "inspect"})
_ORDERLESS = frozenset({"count", "sum", "product", "min", "max", "all", "any", "len"})
"""...unless only these adapters lead to one of these consumers, where order makes no difference."""
_NO_EFFECT = frozenset({"with_capacity", "reserve", "reserve_exact", "shrink_to"})
"""Calls whose arguments only tune performance: mutating them is an equivalent mutant."""
_KEYWORDS = frozenset({
    "as", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "type",
    "unsafe", "use", "where", "while", "yield", "box",
})
"""Identifiers after which an operator cannot be binary (``move || x``, ``return -1``)."""
_PANICKING_MACROS = frozenset({
    "assert", "assert_eq", "assert_ne", "debug_assert", "debug_assert_eq", "debug_assert_ne", "panic",
    "unreachable", "todo", "unimplemented", "macro_rules",
})
_TYPE_ITEMS = frozenset({"struct", "enum", "union", "type"})
_OPEN = {"(": ")", "[": "]", "{": "}"}
_INT = re.compile(r"([0-9][0-9_]*)((?:[iu](?:8|16|32|64|128|size))?)")


_DEFAULT_TYPES = frozenset({
    "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize", "f32", "f64", "bool",
    "char", "String", "Vec", "Option", "HashMap", "HashSet", "BTreeMap", "BTreeSet", "VecDeque",
})
"""Return types whose every instance implements ``Default`` (containers for any element type)."""


def body_mutants(code: str) -> list[str]:
    """cargo-mutants' first operator: each fn body (outside test code, not ``main``, not ``const``) replaced by
    ``Default::default()`` where the return type is one of ``_DEFAULT_TYPES``, or emptied where it returns
    nothing. They compile whatever the body did, and an honest test rarely lets them pass.

    >>> for m in body_mutants("fn f(v: &[i32]) -> i32 { v[0] } fn g(v: &mut Vec<i32>) { v.push(1) }"):
    ...     print(m)
    fn f(v: &[i32]) -> i32 { Default::default() } fn g(v: &mut Vec<i32>) { v.push(1) }
    fn f(v: &[i32]) -> i32 { v[0] } fn g(v: &mut Vec<i32>) {}
    """
    try:
        src = strip_test_code(code)
        toks = tokenize(src)
        texts = [src[t.start : t.end] for t in toks]
        close, _ = _brackets(toks, texts)
        out: dict[str, None] = {}
        for i in range(len(toks) - 1):
            if texts[i] != "fn" or toks[i + 1].kind != "ident" or texts[i + 1] == "main" or (
                    i and texts[i - 1] == "const"):
                continue
            j = _skip_to(texts, close, i + 2, ("{", ";"))
            if j >= len(toks) or texts[j] != "{":
                continue
            header = texts[i + 2 : j]
            ret = header[header.index("->") + 1 :] if "->" in header else []
            if "where" in ret:
                ret = ret[: ret.index("where")]
            if not ret:
                body = "{}"
            elif ret[0] in _DEFAULT_TYPES and (len(ret) == 1 or ret[1] == "<"):
                body = "{ Default::default() }"
            else:
                continue
            variant = src[: toks[j].start] + body + src[toks[close[j]].end :]
            if variant != src:
                out.setdefault(variant)
        return list(out)
    except Exception:  # noqa: BLE001 - a reward helper must never crash training
        return []


def mutants(code: str, limit: int = 12) -> list[str]:
    """Up to ``limit`` distinct variants of ``strip_test_code(code)``, each with one mutated token in a fn body.

    Ordered by how likely the mutation changes behaviour without panicking: ``==``/``!=``; ``&&``/``||`` and
    ``true``/``false``; ``<``/``<=``/``>``/``>=``, opposite methods (``min``/``max``...) and dropping ``.rev()``;
    ``+=``/``-=``...; ``*``/``/``/``%``; ``+``/``-`` and inserting ``.rev()``; integer literals (``0``/``1``,
    ``n`` to ``n + 1``). Ties go by position, with the body of ``fn main`` last. Never raises: malformed input
    (e.g. unbalanced brackets) gives ``[]``.
    """
    try:
        src = strip_test_code(code)
        out: dict[str, None] = {}
        for start, end, rep in _sites(src):
            if len(out) >= limit:
                break
            variant = src[:start] + rep + src[end:]
            if variant != src:
                out.setdefault(variant)
        return list(out)
    except Exception:  # noqa: BLE001 - a reward helper must never crash training
        return []


def _sites(src: str) -> list[tuple[int, int, str]]:
    """Every (start, end, replacement) mutation site of ``src``, best first."""
    toks = tokenize(src)
    texts = [src[t.start : t.end] for t in toks]
    close, parent = _brackets(toks, texts)
    n = len(toks)
    owner: list[str | None] = [None] * n
    blocked = [False] * n
    for i in range(n - 1):
        if texts[i] == "fn" and toks[i + 1].kind == "ident":
            j = _skip_to(texts, close, i + 2, ("{", ";"))
            _mark(blocked, i, j)
            if j < n and texts[j] == "{":
                owner[j + 1 : close[j]] = [texts[i + 1]] * (close[j] - j - 1)
    for i in range(n):
        _block_region(toks, texts, close, blocked, i)
    found: list[tuple[int, int, int, int, str]] = []
    for i in range(n):
        if owner[i] is None or blocked[i]:
            continue
        site = _mutation(src, toks, texts, close, parent, i)
        if site is not None:
            rank, start, end, rep = site
            found.append((rank + (_MAIN_PENALTY if owner[i] == "main" else 0), i, start, end, rep))
    return [(start, end, rep) for _, _, start, end, rep in sorted(found)]


def _brackets(toks: list[Token], texts: list[str]) -> tuple[dict[int, int], list[int]]:
    """Matching closer of each opener, and each token's innermost enclosing opener (-1 at top level)."""
    close: dict[int, int] = {}
    parent: list[int] = []
    stack: list[int] = []
    for i, (tok, text) in enumerate(zip(toks, texts, strict=True)):
        parent.append(stack[-1] if stack else -1)
        if tok.kind != "punct":
            continue
        if text in _OPEN:
            stack.append(i)
        elif text in (")", "]", "}"):
            if not stack or _OPEN[texts[stack[-1]]] != text:
                raise ValueError(f"unbalanced {text!r} at offset {tok.start}")
            close[stack.pop()] = i
    if stack:
        raise ValueError("unclosed bracket")
    return close, parent


def _skip_to(texts: list[str], close: dict[int, int], j: int, stops: tuple[str, ...]) -> int:
    """Index of the first token in ``stops`` from ``j`` on, skipping bracket groups (``len(texts)`` if none)."""
    while j < len(texts) and texts[j] not in stops:
        j = close[j] + 1 if j in close else j + 1
    return j


def _block_region(toks: list[Token], texts: list[str], close: dict[int, int], blocked: list[bool], i: int) -> None:
    """Mark the tokens of a non-mutable construct starting at ``i`` (attribute, macro call, item, let type)."""
    n, text = len(toks), texts[i]
    start, end = i, -1
    if text == "#" and i + 1 < n:
        k = i + 2 if texts[i + 1] == "!" else i + 1
        end = close.get(k, -1) if k < n and texts[k] == "[" else -1
    elif toks[i].kind == "ident" and text in _NO_EFFECT and texts[i + 1 : i + 2] == ["("]:
        end = close.get(i + 1, -1)
    elif toks[i].kind == "ident" and text in _PANICKING_MACROS and i + 1 < n and texts[i + 1] == "!":
        k = i + 3 if i + 2 < n and toks[i + 2].kind == "ident" else i + 2
        end = close.get(k, -1)
    elif text in ("const", "static") and texts[i + 1 : i + 2] != ["fn"] and texts[i - 1 : i] not in (["<"], [","]):
        end = _skip_to(texts, close, i + 1, (";",))
    elif text in _TYPE_ITEMS and i + 1 < n and toks[i + 1].kind == "ident":
        end = _skip_to(texts, close, i + 1, (";", "{"))
        end = close.get(end, end)
    elif text == "let":
        start = _skip_to(texts, close, i + 1, (":", "=", ";"))
        end = _skip_to(texts, close, start, ("=", ";")) if start < n and texts[start] == ":" else -1
    _mark(blocked, start, end)


def _mark(blocked: list[bool], start: int, end: int) -> None:
    for k in range(start, min(end + 1, len(blocked))):
        blocked[k] = True


def _mutation(src: str, toks: list[Token], texts: list[str], close: dict[int, int], parent: list[int],
              i: int) -> tuple[int, int, int, str] | None:
    """(rank, start, end, replacement) for token ``i``, or None when it is not a safe mutation site."""
    tok, text = toks[i], texts[i]
    prev, nxt, nxt2 = (texts[k] if 0 <= k < len(texts) else "" for k in (i - 1, i + 1, i + 2))
    if tok.kind == "ident":
        if text in ("true", "false") and not _in_pattern(texts, close, parent, i):
            return _BOOL_RANK, tok.start, tok.end, "false" if text == "true" else "true"
        called = prev == "." and nxt in ("(", "::")
        own = i > 1 and texts[i - 2] == "self"  # `self.checked_add(..)`: a method of the solution's own type
        args_ok = text not in ("take", "skip") or nxt2 != ")"  # `Option::take()` has no `skip`
        if text in _METHODS and ((called and not own and args_ok) or (prev == "::" and text not in _NOT_PATHS)):
            return _METHOD_RANK, tok.start, tok.end, _METHODS[text]
        if called and text == "rev" and nxt2 == ")":
            return _METHOD_RANK, toks[i - 1].start, toks[i + 2].end, ""  # drop `.rev()`
        if called and text in _REVERSIBLE and nxt2 == ")" and _order_matters(texts, close, i + 3):
            return _INSERT_RANK, toks[i + 2].end, toks[i + 2].end, ".rev()"
        return None
    if tok.kind == "number":
        m = _INT.fullmatch(text)
        tuple_index = prev == "." and (i < 2 or texts[i - 2] != ".")
        array_length = prev == ";" and parent[i] >= 0 and texts[parent[i]] == "["
        if m is None or tuple_index or array_length or (len(m[1]) > 1 and m[1][0] == "0"):
            return None
        value = int(m[1].replace("_", ""))
        if value >= 127 and (value + 1) & value == 0:
            return None  # 127, 255, u32::MAX...: one more may overflow the literal's type
        return _NUMBER_RANK, tok.start, tok.end, f"{ {0: 1, 1: 0}.get(value, value + 1)}{m[2]}"
    if tok.kind != "punct" or text not in _SWAPS or not _ends_expression(toks[i - 1] if i else None, prev):
        return None
    before = src[tok.start - 1] if tok.start else ""
    if text in ("+", "-", "*", "/", "%") and nxt == "=" and toks[i + 1].start == tok.end:
        after = src[toks[i + 1].end : toks[i + 1].end + 1]
        if before.isspace() and after.isspace():
            return _COMPOUND_RANK, tok.start, tok.end, _SWAPS[text][1]
        return None
    after = src[tok.end : tok.end + 1]
    if not (before.isspace() and after.isspace()) or (i + 1 < len(toks) and toks[i + 1].kind == "lifetime"):
        return None
    rank, rep = _SWAPS[text]
    return rank, tok.start, tok.end, rep


def _order_matters(texts: list[str], close: dict[int, int], j: int) -> bool:
    """Whether a method chain follows at ``j`` and may depend on iteration order (``for x in v.iter()``: no)."""
    if texts[j : j + 1] != ["."]:
        return False
    while texts[j : j + 1] == ["."] and j + 1 < len(texts):
        if texts[j + 1] in _ORDERLESS:
            return False
        if texts[j + 1] not in _ADAPTERS or texts[j + 2 : j + 3] != ["("]:
            return texts[j + 1] != "rev"
        j = close[j + 2] + 1
    return True


def _in_pattern(texts: list[str], close: dict[int, int], parent: list[int], i: int) -> bool:
    """Whether boolean ``i`` is in a match-arm pattern (``true =>``, ``(true, _) =>``): flipping it could make
    the match non-exhaustive."""
    after = [texts[k] for k in (i + 1, close.get(parent[i], -2) + 1) if 0 <= k < len(texts)]
    return any(t in ("=>", "|") for t in after)


def _ends_expression(tok: Token | None, text: str) -> bool:
    """Whether a binary operator may follow this token."""
    if tok is None:
        return False
    if tok.kind == "ident":
        return text not in _KEYWORDS
    return tok.kind in ("number", "string", "char") or text in (")", "]", "?")
