"""Honest variants of a reference: the same solution written another way, which must keep every hidden verdict.

Each rewrite changes what a correct answer may choose freely and a test may not depend on: the names of private
fields (``renamed``), their order (``reordered``), a derived ``Debug`` made by hand in another format (``debug``), a
float ``sum`` written as a ``fold`` from ``0.0`` (``fold``; the sum of nothing is ``-0.0``, the fold's ``0.0``, equal
by ``==``). ``honest_variant`` applies every rewrite that fits the code at once; the task checks verify it and
expect the reference's own hidden verdict (``tests/verify/test_std_value_notes.py``).
"""

from __future__ import annotations

import re

from rust_rewards.rust.lexer import Token, _bracket_pairs, comma_ranges, tokenize

_ORDERED = re.compile(r"\b(?:PartialOrd|Ord|Hash)\b")
"""Derives whose behaviour follows field order (``Hash`` too: a test may compare hashes with literals)."""


def honest_variant(code: str, tests: str) -> tuple[str, tuple[str, ...]]:
    """``code`` with every honest rewrite that fits it, and their names (``()``: none fits).

    >>> code = "#[derive(Debug, Clone, PartialEq)]\\npub struct P {\\n    x: i32,\\n    y: i32,\\n}\\n"
    >>> variant, kinds = honest_variant(code + "impl P { pub fn x(&self) -> i32 { self.x } }\\n", "")
    >>> kinds
    ('renamed', 'reordered', 'debug')
    >>> print(variant.split("impl ::std")[0].rstrip())
    #[derive(Clone, PartialEq)]
    pub struct P {
        y_v2: i32,
        x_v2: i32,
    }
    impl P { pub fn x(&self) -> i32 { self.x_v2 } }
    """
    kinds = []
    for kind, rewrite in (("renamed", _renamed), ("reordered", _reordered), ("debug", _debug), ("fold", _fold)):
        changed = rewrite(code, tests)
        if changed != code:
            kinds.append(kind)
            code = changed
    return code, tuple(kinds)


def _structs(tokens: list[Token], pairs: list[int]) -> list[tuple[int, int, int]]:
    """Named-field structs, generic ones too: (index of ``struct``, of its ``{``, of its ``}``)."""
    out = []
    for i, tok in enumerate(tokens[:-2]):
        if tok.text != "struct" or tokens[i + 1].kind != "ident":
            continue
        j, angle = i + 2, 0
        while j < len(tokens) and (angle or tokens[j].text == "<"):
            angle += (tokens[j].text == "<") - (tokens[j].text == ">")
            j += 1
        if j < len(tokens) and tokens[j].text == "{":
            out.append((i, j, pairs[j]))
    return out


def _fields(tokens: list[Token], pairs: list[int], brace: int, close: int) -> list[tuple[int, int]]:
    """A struct's fields as token ranges: its top-level commas, generic arguments' ``<...>`` skipped."""
    out, angle = [], 0
    for lo, hi in comma_ranges(tokens, pairs, brace + 1, close):
        if angle:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
        angle += sum((t.text == "<") - (t.text == ">") for t in tokens[lo:hi] if t.kind == "punct")
    return out


def _field_name(tokens: list[Token], lo: int, hi: int) -> tuple[int, bool] | None:
    """The index of a field's name and whether it is ``pub`` (attributes skipped)."""
    j = lo
    while j < hi and tokens[j].text == "#":
        j += 2
        while j < hi and tokens[j - 1].text != "]":
            j += 1
    public = j < hi and tokens[j].text == "pub"
    if public:
        j += 1
        if j < hi and tokens[j].text == "(":
            j += 1
            while j < hi and tokens[j - 1].text != ")":
                j += 1
    if j + 1 < hi and tokens[j].kind == "ident" and tokens[j + 1].text == ":":
        return j, public
    return None


def _renamed(code: str, tests: str) -> str:
    tokens = tokenize(code)
    pairs = _bracket_pairs(tokens)
    public = {tokens[i + 1].text for i, t in enumerate(tokens[:-1]) if t.text == "pub"}
    test_tokens = tokenize(tests)
    in_tests = {t.text for i, t in enumerate(test_tokens)  # a method call of the same name is no use of the field
                if t.kind == "ident" and not (i + 1 < len(test_tokens) and test_tokens[i + 1].text == "(")}
    names = set()
    for _, brace, close in _structs(tokens, pairs):
        for lo, hi in _fields(tokens, pairs, brace, close):
            found = _field_name(tokens, lo, hi)
            if found and not found[1]:
                names.add(tokens[found[0]].text)
    names -= public | in_tests
    edits = [(t.start, t.end, t.text + "_v2") for i, t in enumerate(tokens)
             if t.kind == "ident" and t.text in names and not t.raw
             and not (i + 1 < len(tokens) and tokens[i + 1].text in ("(", "!", "::"))
             and not (i and tokens[i - 1].text == "::")]
    return _apply(code, edits)


def _attributes(tokens: list[Token], item: int) -> list[tuple[int, int]]:
    """The outer attributes right before the item keyword at ``item`` (``pub`` skipped), as (``#``, ``]``) index
    pairs, nearest first."""
    out = []
    j = item - 1 - (item > 0 and tokens[item - 1].text == "pub")
    while j >= 0 and tokens[j].text == "]":
        k = j
        while k > 0 and tokens[k].text != "#":
            k -= 1
        out.append((k, j))
        j = k - 1
    return out


def _derives(tokens: list[Token], struct: int) -> str:
    """The text of the attributes right before the item at ``struct``."""
    return "".join(" ".join(t.text for t in tokens[k : j + 1]) for k, j in _attributes(tokens, struct))


def _reordered(code: str, tests: str) -> str:
    tokens = tokenize(code)
    pairs = _bracket_pairs(tokens)
    edits = []
    for i, brace, close in _structs(tokens, pairs):
        fields = _fields(tokens, pairs, brace, close)
        if len(fields) < 2 or _ORDERED.search(_derives(tokens, i)) or "repr" in _derives(tokens, i):
            continue
        texts = [code[tokens[lo].start : tokens[hi - 1].end] for lo, hi in fields]
        for (lo, hi), text in zip(fields, reversed(texts), strict=True):
            edits.append((tokens[lo].start, tokens[hi - 1].end, text))
    return _apply(code, edits)


def _debug(code: str, tests: str) -> str:
    """A derived ``Debug`` of a non-generic struct or enum written by hand in another format; left alone where the
    code or the tests format with ``{:?}``."""
    if re.search(r"\{[^{}]*:#?\?\}|dbg!", code + tests):
        return code
    tokens = tokenize(code)
    edits, impls = [], []
    for i, tok in enumerate(tokens[:-2]):
        if tok.text not in ("struct", "enum") or tokens[i + 1].kind != "ident" or tokens[i + 2].text == "<":
            continue
        for k, j in _attributes(tokens, i):
            if [t.text for t in tokens[k : k + 4]] == ["#", "[", "derive", "("]:
                inner = [t for t in tokens[k + 4 : j - 1] if t.text != ","]
                if any(t.text == "Debug" for t in inner):
                    kept = ", ".join(t.text for t in inner if t.text != "Debug")
                    edits.append((tokens[k].start, tokens[j].end, f"#[derive({kept})]" if kept else ""))
                    name = tokens[i + 1].text
                    impls.append(f"\nimpl ::std::fmt::Debug for {name} {{\n    fn fmt(&self, f: &mut "
                                 f"::std::fmt::Formatter<'_>) -> ::std::fmt::Result {{\n"
                                 f"        f.write_str(\"<{name}>\")\n    }}\n}}\n")
    return _apply(code, edits) + "".join(impls) if edits else code


_FLOAT_SUM = re.compile(r"\.sum(?:::<f(?:32|64)>)?\(\)")


def _fold(code: str, tests: str) -> str:
    """A ``sum`` of floats (its turbofish says so, or the ``fn`` it is in returns ``f32``/``f64``) as a ``fold``."""
    out, last = [], 0
    for m in _FLOAT_SUM.finditer(code):
        head = code.rfind("fn ", 0, m.start())
        signature = code[head : code.find("{", head)] if head >= 0 else ""
        if "::<" not in m.group() and not re.search(r"->\s*f(?:32|64)\b", signature):
            continue
        kind = "f32" if "f32" in m.group() or "f32" in signature else "f64"
        out += [code[last : m.start()], f".fold(0.0, |acc: {kind}, x| acc + x)"]
        last = m.end()
    return "".join(out) + code[last:]


def _apply(code: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text + code[end:]
    return code
