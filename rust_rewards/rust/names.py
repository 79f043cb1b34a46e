"""The names a piece of Rust code puts at its top level, and the imports that let hidden tests see only the task's.

Hidden tests are written against the reference solution and reach its items through a glob (``use super::*;``,
``use solution::*;``). Against a completion the same glob would hand them whatever the completion declares under
any name: ``pub use Fake as BTreeMap`` for a map the tests use without importing it, an own trait whose by-value
``is_empty(self)`` wins method resolution for ``Vec``. ``test_imports`` replaces the glob: the completion's items
only for the names the reference defines, std's items for the names the reference imports from std, and nothing
else (every other name comes from the prelude, that is from std).
"""

from __future__ import annotations

from dataclasses import dataclass

from rust_rewards.rust.lexer import _OPEN, Token, _bracket_pairs, comma_ranges, test_regions, tokenize

_ITEM_KEYWORDS = frozenset({"fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod"})
_BLOCK_ITEMS = frozenset({"fn", "struct", "enum", "union", "trait", "mod", "impl", "extern", "macro_rules"})
_STD_ROOTS = frozenset({"std", "core", "alloc"})
_TYPE_KEYWORDS = frozenset({"mod", "struct", "enum", "union", "trait", "type"})


@dataclass(frozen=True)
class UseLeaf:
    """One leaf of a use tree: its full path, the name it binds (``None`` for a glob, ``_`` for ``as _``)."""

    path: tuple[str, ...]
    name: str | None

    def render(self) -> str:
        """The leaf as one ``use`` declaration with an absolute path.

        >>> UseLeaf(("std", "collections", "BTreeMap"), "Map").render()
        'use ::std::collections::BTreeMap as Map;'
        """
        path = "::" + "::".join(self.path)
        if self.name is None:
            return f"use {path}::*;"
        return f"use {path};" if self.name == self.path[-1] else f"use {path} as {self.name};"


@dataclass(frozen=True)
class TopLevel:
    """What a module's top level declares outside test code: item names (with whether each is ``pub``) and the
    leaves of its ``use`` declarations, each with whether it is ``pub``."""

    items: dict[str, bool]
    uses: tuple[tuple[UseLeaf, bool], ...]
    fns: frozenset[str] = frozenset()
    """The item names only a ``fn`` declares (no struct, trait, type, module, ... of the same name)."""
    macros: frozenset[str] = frozenset()
    """The names only a ``macro_rules!`` declares."""
    types: frozenset[str] = frozenset()
    """The item names in the type namespace (a module, struct, enum, union, trait or type alias declares them)."""

    def names(self, *, public: bool = False) -> frozenset[str]:
        """Every name bound at the top level (items and import leaves; ``public``: only ``pub`` ones)."""
        bound = {n for n, pub in self.items.items() if pub or not public}
        bound |= {leaf.name for leaf, pub in self.uses if leaf.name not in (None, "_") and (pub or not public)}
        return frozenset(bound)

    def std_imports(self) -> tuple[UseLeaf, ...]:
        """The import leaves whose path starts in std, core or alloc."""
        return tuple(leaf for leaf, _ in self.uses if leaf.path and leaf.path[0] in _STD_ROOTS)


def _item_end(tokens: list[Token], pairs: list[int], i: int, kind: str) -> int:
    """Index of the last token of the item whose keyword is at ``i``: its ``;``, or the ``}`` of its body
    (``pairs``: the tokens' ``_bracket_pairs``)."""
    j = i + 1
    while j < len(tokens):
        tok = tokens[j]
        if tok.kind == "punct" and tok.text == ";":
            return j
        if tok.kind == "punct" and tok.text in _OPEN:
            if tok.text == "{" and kind in _BLOCK_ITEMS:
                return pairs[j]
            j = pairs[j]
        j += 1
    return len(tokens) - 1


def use_leaves(tokens: list[Token], pairs: list[int], lo: int, hi: int) -> list[UseLeaf]:
    """The leaves of the use tree ``tokens[lo:hi]`` (``std::{fmt::{self, Display}, io::*}``; ``pairs``: the tokens'
    ``_bracket_pairs``), in source order; nesting of any depth costs no recursion.

    >>> toks = tokenize("std::{fmt::{self, Display}, io::*}")
    >>> [leaf.render() for leaf in use_leaves(toks, _bracket_pairs(toks), 0, 14)]
    ['use ::std::fmt;', 'use ::std::fmt::Display;', 'use ::std::io::*;']
    """
    out: list[UseLeaf] = []
    work: list[tuple[int, int, tuple[str, ...]]] = [(lo, hi, ())]
    while work:
        i, hi, prefix = work.pop()
        path = list(prefix)
        if i < hi and tokens[i].text == "::":
            i += 1
        while i < hi:
            tok = tokens[i]
            if tok.text == "{":
                parts = comma_ranges(tokens, pairs, i + 1, min(pairs[i], hi))
                work.extend((a, b, tuple(path)) for a, b in reversed(parts))
                break
            if tok.text == "*":
                out.append(UseLeaf(tuple(path), None))
                break
            if tok.kind == "ident" and tok.text == "as":
                out.append(_leaf(path, tokens[i + 1].text if i + 1 < hi else "_"))
                break
            if tok.kind == "ident":
                path.append(tok.text.removeprefix("r#"))
            i += 1
        else:
            if path:
                out.append(_leaf(path, None))
    return out


def _leaf(path: list[str], alias: str | None) -> UseLeaf:
    if path[-1:] == ["self"]:
        path = path[:-1]
    return UseLeaf(tuple(path), alias if alias is not None else (path[-1] if path else "_"))


def top_level(code: str) -> TopLevel:
    """The names ``code`` declares at its top level, test code (``#[cfg(test)]`` modules, ``#[test]`` fns) left out.

    >>> top = top_level("use std::collections::BTreeMap as Map; pub fn f() {} struct S(u8); const N: u8 = 1;")
    >>> sorted(top.items.items()), [leaf.render() for leaf in top.std_imports()]
    ([('N', False), ('S', False), ('f', True)], ['use ::std::collections::BTreeMap as Map;'])
    >>> sorted(top_level("pub const fn add() {} pub const unsafe fn g() {}").fns)
    ['add', 'g']
    """
    tokens = tokenize(code)
    pairs = _bracket_pairs(tokens)
    regions = test_regions(tokens)
    skip = {it.start: it.end for it in (*regions.test_fns, *regions.cfg_test_mods)}
    items: dict[str, bool] = {}
    kinds: dict[str, set[str]] = {}
    uses: list[tuple[UseLeaf, bool]] = []
    i, n, pub = 0, len(tokens), False
    while i < n:
        if i in skip:
            i, pub = skip[i] + 1, False
            continue
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < n else None
        if tok.text == "#" and nxt is not None and nxt.text in ("[", "!"):
            open_at = i + 1 if nxt.text == "[" else i + 2
            i = pairs[open_at] + 1 if open_at < n and tokens[open_at].text == "[" else i + 1
            continue
        if tok.kind == "ident" and tok.text == "pub":
            pub = True
            i = pairs[i + 1] + 1 if nxt is not None and nxt.text == "(" else i + 1
            continue
        if tok.kind != "ident":
            i, pub = i + 1, False
            continue
        kind = tok.text
        if kind == "const" and nxt is not None and nxt.text in ("fn", "unsafe", "async", "extern"):
            i += 1  # `const fn`: a qualifier of the fn
            continue
        end = _item_end(tokens, pairs, i, kind)
        if kind == "use":
            uses += [(leaf, pub) for leaf in use_leaves(tokens, pairs, i + 1, end)]
        elif kind == "macro_rules" and i + 2 < n:
            items[tokens[i + 2].text] = items.get(tokens[i + 2].text, False) or pub
            kinds.setdefault(tokens[i + 2].text, set()).add(kind)
        elif kind in _ITEM_KEYWORDS:
            j = i + 2 if nxt is not None and nxt.text == "mut" else i + 1
            if j < n and tokens[j].kind == "ident" and tokens[j].text != "_":
                name = tokens[j].text.removeprefix("r#")
                items[name] = items.get(name, False) or pub
                kinds.setdefault(name, set()).add(kind)
        elif kind not in _BLOCK_ITEMS and kind not in ("unsafe", "async", "default", "auto", "crate"):
            end = i
        elif kind in ("unsafe", "async", "default", "auto", "crate") or (kind == "extern" and nxt is not None
                                                                         and nxt.text not in ("{", "crate")):
            i += 1  # a qualifier of the item that follows
            continue
        i, pub = end + 1, False
    return TopLevel(items, tuple(uses), frozenset(name for name, k in kinds.items() if k == {"fn"}),
                    frozenset(name for name, k in kinds.items() if k == {"macro_rules"}),
                    frozenset(name for name, k in kinds.items() if k & _TYPE_KEYWORDS))


@dataclass(frozen=True)
class ItemSource:
    """One item at a module's top level (outside test code) as written, attributes and visibility included:
    the name it declares (``""`` for an ``impl``) and, for an ``impl``, the identifiers of its header."""

    name: str
    text: str
    header: frozenset[str] = frozenset()


def item_sources(code: str) -> tuple[ItemSource, ...]:
    """The items ``code`` declares at its top level (fns, types, traits, consts, statics, modules, impls), test
    code left out, in source order.

    >>> [(it.name, it.text) for it in item_sources("#[derive(Debug)]\\npub struct S; impl T for S {} use x::y;")]
    [('S', '#[derive(Debug)]\\npub struct S;'), ('', 'impl T for S {}')]
    """
    tokens = tokenize(code)
    pairs = _bracket_pairs(tokens)
    regions = test_regions(tokens)
    skip = {it.start: it.end for it in (*regions.test_fns, *regions.cfg_test_mods)}
    out: list[ItemSource] = []
    i, n, start = 0, len(tokens), None
    while i < n:
        if i in skip:
            i, start = skip[i] + 1, None
            continue
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < n else None
        if tok.text == "#" and nxt is not None and nxt.text in ("[", "!"):
            open_at = i + 1 if nxt.text == "[" else i + 2
            start = i if start is None and nxt.text == "[" else start
            i = pairs[open_at] + 1 if open_at < n and tokens[open_at].text == "[" else i + 1
            continue
        if tok.kind == "ident" and tok.text in ("pub", "unsafe", "async", "default", "extern") or (
                tok.text == "const" and nxt is not None and nxt.text in ("fn", "unsafe", "async", "extern")):
            start = i if start is None else start
            i = pairs[i + 1] + 1 if tok.text == "pub" and nxt is not None and nxt.text == "(" else i + 1
            i += tok.text == "extern" and i < n and tokens[i].kind == "string"
            continue
        if tok.kind == "ident" and (tok.text in _ITEM_KEYWORDS or tok.text == "impl"):
            end = _item_end(tokens, pairs, i, tok.text)
            first = tokens[start if start is not None else i].start
            text = code[first : tokens[end].end]
            if tok.text == "impl":
                body = next((j for j in range(i, end + 1) if tokens[j].text == "{"), end)
                out.append(ItemSource("", text, frozenset(t.text for t in tokens[i:body] if t.kind == "ident")))
            else:
                j = i + 2 if nxt is not None and nxt.text == "mut" else i + 1
                if j < n and tokens[j].kind == "ident":
                    out.append(ItemSource(tokens[j].text.removeprefix("r#"), text))
            i, start = end + 1, None
            continue
        if tok.kind == "ident" and tok.text in ("use", "macro_rules"):
            i = _item_end(tokens, pairs, i, tok.text)
        i, start = i + 1, None
    return tuple(out)


def type_references(code: str) -> dict[str, frozenset[str]]:
    """For each struct, enum, union and type alias of ``code`` (test code left out), the identifiers its definition
    mentions (field types, variants' payloads, the aliased type).

    >>> refs = type_references("struct A { x: B, y: Vec<C> } type D = A;")
    >>> sorted(refs["A"]), sorted(refs["D"])
    (['B', 'C', 'Vec', 'x', 'y'], ['A'])
    """
    tokens = tokenize(code)
    pairs = _bracket_pairs(tokens)
    regions = test_regions(tokens)
    out: dict[str, frozenset[str]] = {}
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind == "ident" and tok.text in ("struct", "enum", "union", "type") and not regions.contains(i):
            name = tokens[i + 1]
            if name.kind == "ident":
                body = tokens[i + 2 : _item_end(tokens, pairs, i, tok.text) + 1]
                out[name.text] = out.get(name.text, frozenset()) | frozenset(
                    t.text.removeprefix("r#") for t in body if t.kind == "ident")
    return out


def reachable_types(code: str, roots: frozenset[str]) -> frozenset[str]:
    """The types of ``code`` that the definitions of ``roots`` reach through fields and aliases (roots included).

    >>> sorted(reachable_types("struct A { x: B } struct B(C); struct C; struct D;", frozenset({"A"})))
    ['A', 'B', 'C']
    """
    refs = type_references(code)
    seen, work = set(), [r for r in roots if r in refs]
    while work:
        name = work.pop()
        if name not in seen:
            seen.add(name)
            work += [r for r in refs[name] if r in refs]
    return frozenset(seen)


def test_imports(reference: str, completion: str, tests: str, *, root: str = "super", public: bool = False,
                 extra: frozenset[str] = frozenset(), taken: frozenset[str] = frozenset()) -> str:
    """The imports that replace ``use ROOT::*;`` in hidden tests ``tests`` run against ``completion``.

    From the completion: the names that ``reference`` defines (plus ``extra``, the prompt's required fns) and the
    completion binds too (``public``: as ``pub``, for integration tests); from std: the reference's own std
    imports, the names the tests would have got from it through the glob. Names the tests import themselves, and
    ``taken`` (imported beside these), are left out: importing a name twice is an error; so are the reference's
    ``macro_rules!`` names for a hidden module (``root`` ``super``), where they are in textual scope already.

    A name the reference (or the prompt) declares only as a fn comes in the value namespace alone: ``use`` would
    also bring a trait, type or macro of the completion's with the same name (a trait named like the required fn,
    whose by-value ``is_empty`` would win over ``Vec``'s), so it is glob-imported from a module of its own and its
    type namespace is taken by a type alias of the tests' own, which an explicit item wins over a glob with (unless
    the tests' top level declares that name in the type namespace itself, as exercism's ``mod append`` does).

    >>> test_imports("use std::collections::BTreeMap; pub fn f() {} pub struct S;",
    ...              "pub use std::vec::Vec as BTreeMap; pub fn f() {} pub trait Hack {} pub struct S;", "")
    'use super::{S}; use ::std::collections::BTreeMap; mod __rr_values { pub(super) use super::super::{f}; } \
use self::__rr_values::*; #[allow(dead_code, non_camel_case_types)] type f = ();'
    """
    ref = top_level(reference)
    tests_top = top_level(tests)
    own = frozenset(leaf.name for leaf, _ in tests_top.uses if leaf.name not in (None, "_")) | taken
    textual = ref.macros if root == "super" else frozenset()  # in scope in the hidden module, not importable
    theirs = top_level(completion)
    wanted = frozenset(ref.items) | extra
    # a glob re-export of the completion's own module (`mod imp { pub fn add .. } pub use imp::*;`) binds names too:
    # the wanted ones the tests name are imported through it (rustc says whether it binds them; a name the tests use
    # and the completion lacks fails their compile either way)
    globbing = any(leaf.name is None and leaf.path and leaf.path[0] not in _STD_ROOTS and (pub or not public)
                   for leaf, pub in theirs.uses)
    globbed = wanted & {t.text for t in tokenize(tests) if t.kind == "ident"} if globbing else frozenset()
    names = sorted(((wanted & theirs.names(public=public)) | globbed) - own - textual)
    values = [name for name in names if name in ref.fns | (extra - frozenset(ref.items))]
    others = [name for name in names if name not in values]
    std = [leaf.render() for leaf in ref.std_imports() if leaf.name is None or leaf.name not in own | set(names)]
    # a crate named like one of the type aliases below (the crate `palindrome_products`, the fn of that name) is
    # reached as `::crate`, which no local name shadows
    path = root if root == "super" else f"::{root}"
    lines = [f"use {path}::{{{', '.join(others)}}};", *dict.fromkeys(std)]
    if values:
        inner = "super::super" if root == "super" else path
        lines += [f"mod __rr_values {{ pub(super) use {inner}::{{{', '.join(values)}}}; }}",
                  "use self::__rr_values::*;",
                  *(f"#[allow(dead_code, non_camel_case_types)] type {name} = ();" for name in values
                    if name not in tests_top.types)]
    return " ".join(lines)


test_imports.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
