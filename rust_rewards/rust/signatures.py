"""Static check that a completion defines the task's required items with the task's exact signatures.

Pure Python on :func:`rust_rewards.rust.lexer.tokenize`, no compiler. The spec is a reference solution (its public items
are required, with visibility and comparison derives) or, when a task has none, its prompt: prose with signatures in
backticks or code fences, or MultiPL-E style code (every ``fn`` signature is required, visibility unchecked).
"""

from __future__ import annotations

import re
from collections import namedtuple
from dataclasses import dataclass, field
from functools import lru_cache

from rust_rewards.rust.lexer import test_regions, tokenize
from rust_rewards.rust.names import reachable_types

_CMP = ("PartialEq", "Eq", "PartialOrd", "Ord", "Hash")
_QUALS = ("const", "async", "unsafe", "extern")
_PATH_DROP = frozenset(
    "std core alloc crate self super collections fmt io cmp ops error num str string vec iter rc sync cell boxed "
    "hash borrow convert option result slice marker mem time".split()
)
_STD_TYPES = frozenset(
    "i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str String Vec Option Result Box "
    "HashMap HashSet BTreeMap BTreeSet VecDeque BinaryHeap Rc Arc Cow".split()
)
_ITEM_START = frozenset("# pub fn use mod struct enum impl trait type const static extern macro_rules async unsafe"
                        .split())
_OPEN, _SHUT = frozenset("([{<"), frozenset(")]}>")
_FENCE, _SPAN = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL), re.compile(r"`([^`\n]+)`")

# Facts about code: fn ``kind`` is free/inherent/trait_impl/trait; ``outer`` the enclosing impl's generics.
_Sig = namedtuple("_Sig", "quals generics params ret dollar")  # params: type tokens, or a receiver ("&self",)
_Fn = namedtuple("_Fn", "name kind owner self_ty outer sig pub top in_macro")
_Type = namedtuple("_Type", "kind name pub derives top")
_Impl = namedtuple("_Impl", "trait args shown base top")  # args: normalised trait arguments, shown: as written


@dataclass(frozen=True)
class ItemCheck:
    """Required items the completion lacks (``"fn add"``), and one reason per item it defines differently."""

    missing: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched


@dataclass(frozen=True)
class Item:
    """A required item: ``kind`` fn/struct/enum/trait/type/impl, ``name`` (``add``, ``Stack::push``, ``Display for
    Point``), normalised ``signature`` (impls: trait arguments) and the comparison traits the type ``derives``."""

    kind: str
    name: str
    signature: str = ""
    derives: tuple[str, ...] = ()
    pub: bool = field(default=False, repr=False)  # the definition must be pub (reference specs)
    prose: bool = field(default=False, repr=False)  # from a prompt's prose: owner unknown, Self resolved per candidate
    owner: str = field(default="", repr=False)  # impls: the implementing type
    sig: _Sig | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


def _word(x: str) -> bool:
    return x[:1].isalpha() or x[:1] == "_" or (len(x) > 1 and x[0] in "#@")


def _close(t: list[str] | tuple[str, ...], i: int, angle: bool = True) -> int:
    """Index closing the bracket at ``i`` (every bracket kind nests; ``<>`` only with ``angle``)."""
    depth = 0
    for j in range(i, len(t)):
        if (t[j] in _OPEN or t[j] in _SHUT) and (angle or t[j] not in "<>"):
            depth += 1 if t[j] in _OPEN else -1
            if depth == 0:
                return j
    return len(t) - 1


def _split(t: list[str] | tuple[str, ...], sep: str = ",") -> list[list[str]]:
    parts: list[list[str]] = [[]]
    depth = 0
    for x in t:
        depth += (x in _OPEN) - (x in _SHUT)
        if depth == 0 and x == sep:
            parts.append([])
        else:
            parts[-1].append(x)
    return [p for p in parts if p]


def _until(t: list[str], k: int, stops: tuple[str, ...]) -> int:
    """First index from ``k`` of a stop token outside brackets, or of an unmatched closer (else ``len(t)``)."""
    depth = 0
    for j in range(k, len(t)):
        if depth == 0 and (t[j] in stops or t[j] == "}"):
            return j
        depth += (t[j] in _OPEN) - (t[j] in _SHUT)
        if depth < 0:
            return j
    return len(t)


def _generic_names(t: list[str]) -> list[str]:
    return [p[1] if p[0] == "const" and len(p) > 1 else p[0] for p in _split(t) if not p[0].startswith("'")]


def _clean(t: list[str] | tuple[str, ...], self_ty: tuple[str, ...] = (), loose: str = "") -> tuple[str, ...]:
    """Type tokens without lifetimes or std/crate path prefixes; the impl's own type (or ``loose``) becomes ``Self``."""
    out: list[str] = []
    skip = 0
    for k, x in enumerate(t):
        if skip or (x == "::" and not (out and (_word(out[-1]) or out[-1] == ">"))):
            skip = max(skip - 1, 0)
        elif x.startswith("'"):
            if out and out[-1] in (",", "+"):
                out.pop()
            elif k + 1 < len(t) and t[k + 1] in (",", "+"):
                skip = 1
        elif x in _PATH_DROP and k + 1 < len(t) and t[k + 1] == "::":
            skip = 1
        elif x == ">" and out and out[-1] == "<":
            out.pop()
        else:
            out.append(x)
    res, k, m = [], 0, len(self_ty)
    while k < len(out):
        free = k == 0 or out[k - 1] != "::"
        if free and self_ty and tuple(out[k : k + m]) == self_ty:
            res.append("Self")
            k += m
        elif free and loose and out[k] == loose:
            res.append("Self")
            k = _close(out, k + 1) + 1 if k + 1 < len(out) and out[k + 1] == "<" else k + 1
        else:
            res.append(out[k])
            k += 1
    return tuple(res)


def _render(t: list[str] | tuple[str, ...]) -> str:
    s, prev = "", ""
    for x in t:
        if s and ((_word(prev) and _word(x)) or x in ("->", "+", "=") or prev in (",", "->", "+", "=")):
            s += " "
        s, prev = s + x, x
    return s


def _param(p: list[str], gens: list[str]) -> tuple[str, ...]:
    """A parameter's type (patterns dropped), a canonical receiver, or a fresh generic for ``impl Trait``."""
    parts = _split(p, ":")
    ty = _clean(p[len(parts[0]) + 1 :]) if len(parts) > 1 else ()
    if parts and "self" in parts[0]:
        marks = {(): "", ("Self",): "self", ("&", "Self"): "&self", ("&", "mut", "Self"): "&mut self"}
        if ty not in marks:
            return ("self:", *ty)
        bare = _clean(parts[0])
        return (marks[ty] or ("&mut self" if bare[:2] == ("&", "mut") else "&self" if bare[:1] == ("&",) else "self"),)
    if ty[:1] == ("impl",):
        gens.append(f"impl#{len(gens)}")
        return (gens[-1],)
    return tuple(p[len(parts[0]) + 1 :] if len(parts) > 1 else p)


_CFG_ITEMS = frozenset({"fn", "impl", "trait", "struct", "enum", "union", "type", "mod", "use", "const", "static"})
_CFG_SET = frozenset({"unix", "debug_assertions", 'target_os="linux"', 'target_family="unix"', 'panic="unwind"',
                      'target_pointer_width="64"', 'target_endian="little"', 'target_arch="x86_64"',
                      'target_env="gnu"', 'target_vendor="unknown"', "overflow_checks"})
"""The cfg options rustc sets for the shipped build here (not ``test``); any other name is unset, as rustc has it."""


def _cfg_holds(attr: list[str]) -> bool:
    """Whether attribute tokens ``attr`` (inside ``#[...]``) keep their item in the shipped build: a ``cfg(...)``
    evaluated as rustc does (``any()`` is false, ``all()`` true, unknown names unset); other attributes hold.

    >>> _cfg_holds(["cfg", "(", "any", "(", ")", ")"]), _cfg_holds(["cfg", "(", "not", "(", "test", ")", ")"])
    (False, True)
    """
    if attr[:2] != ["cfg", "("]:
        return True
    pos = 2

    def pred() -> bool:
        nonlocal pos
        name = attr[pos] if pos < len(attr) else ""
        pos += 1
        if pos < len(attr) and attr[pos] == "(" and name in ("any", "all", "not"):
            pos += 1
            values = []
            while pos < len(attr) and attr[pos] != ")":
                values.append(pred())
                pos += attr[pos] == "," if pos < len(attr) else 0
            pos += 1
            return any(values) if name == "any" else all(values) if name == "all" else not all(values)
        if pos < len(attr) and attr[pos] == "=":
            name, pos = f"{name}={attr[pos + 1] if pos + 1 < len(attr) else ''}", pos + 2
        return name in _CFG_SET

    try:
        return pred()
    except IndexError:
        return True


def _parse_sig(t: list[str], j: int, quals: list[str]) -> tuple[_Sig | None, int]:
    """The signature whose generics or ``(`` start at ``j``, and the index of its body ``{`` (or ``;``, or end)."""
    start, n, gens = j, len(t), []
    if j < n and t[j] == "<":
        c = _close(t, j)
        gens, j = _generic_names(t[j + 1 : c]), c + 1
    if j >= n or t[j] != "(":
        return None, j
    c = _close(t, j)
    params = tuple(_param(p, gens) for p in _split(t[j + 1 : c]))
    k = _until(t, c + 1, ("{", ";", "where"))
    ret = tuple(t[c + 2 : k]) if c + 1 < n and t[c + 1] == "->" else ()
    k = _until(t, k, ("{", ";")) if k < n and t[k] == "where" else k
    quals = tuple(q for q in _QUALS if q in quals)
    return _Sig(quals, tuple(gens), params, () if ret == ("(", ")") else ret, "$" in t[start:k]), k


@lru_cache(maxsize=8192)
def _norm(sig: _Sig, self_ty: tuple[str, ...] = (), outer: tuple[str, ...] = (), loose: str | None = None) -> str:
    """Canonical signature text: fn generics become ``#i`` by position, impl generics ``@i`` by first use. ``loose``
    (prose specs): the candidate's type, read as ``Self``; undeclared one-letter types count as impl generics."""
    inner = {g: f"#{i}" for i, g in enumerate(sig.generics)}
    seen: dict[str, str] = {}

    def one(x: str) -> str:
        if x in inner:
            return inner[x]
        implicit = loose is not None and len(x) <= 2 and x[0].isupper() and x[1:] in ("", *"0123456789")
        return seen.setdefault(x, f"@{len(seen)}") if x in outer or implicit else x

    def rename(t: tuple[str, ...]) -> str:
        return _render([one(x) for x in _clean(t, self_ty, loose or "")])

    params, ret = ", ".join(rename(p) for p in sig.params), rename(sig.ret)
    # a `const fn` coerces to and is called as the plain `fn` a test uses (`const _: fn(i32) -> i32 = f;` compiles)
    return " ".join((*(q for q in sig.quals if q != "const"), f"fn({params})" + (f" -> {ret}" if ret else "")))


def _derives(attrs: list[list[str]]) -> tuple[str, ...]:
    """Traits named in ``derive(...)``, also inside ``cfg_attr``."""
    return tuple(p[-1] for a in attrs for k in range(len(a) - 1) if a[k] == "derive" and a[k + 1] == "("
                 for p in _split(a[k + 2 : _close(a, k + 1)]))


def _base(t: tuple[str, ...]) -> str:
    """The name of a (cleaned) type: ``Stack`` for ``Stack<T>``, ``Point`` for ``&mut Point``."""
    depth, base = 0, ""
    for x in t:
        depth += (x in _OPEN) - (x in _SHUT)
        base = x if depth == 0 and _word(x) and x not in ("dyn", "mut", "impl") else base
    return base


@lru_cache(maxsize=2048)
def _scan(code: str) -> tuple[tuple[_Fn, ...], tuple[_Type, ...], tuple[_Impl, ...], frozenset[str]]:
    """Every fn, type and trait impl outside test code, with where it sits; names bound by const/static/``as``."""
    toks = tokenize(code)
    regions = test_regions(toks)
    t = [x.text[2:] if x.kind == "ident" and x.text.startswith("r#") else x.text for x in toks]
    n, ctx_at, stack, macros = len(t), {}, [], []
    fns, types, impls, values, attrs, vis, quals, i = [], [], [], set(), [], "", [], 0
    while i < n:
        x, nxt = t[i], t[i + 1] if i + 1 < n else ""
        o = i + 1 if nxt == "[" else i + 2
        if x == "#" and nxt in ("[", "!") and o < n and t[o] == "[":
            c = _close(t, o, angle=False)
            attrs.append(t[o + 1 : c])
            i = c + 1
            continue
        if x in ("const", "static", "as") and _word(nxt) and nxt not in _QUALS and nxt not in ("fn", "mut"):
            values.add(nxt if not regions.contains(i) else "")
        if x == "pub" or x in _QUALS or x == "default":
            vis = {"pub": "pub" if nxt != "(" else "restricted"}.get(x, vis)
            quals += [x]
            i = _close(t, i + 1) + 1 if x == "pub" and nxt == "(" else i + 1 + (x == "extern" and nxt[:1] == '"')
            continue
        if attrs and x in _CFG_ITEMS and not all(_cfg_holds(a) for a in attrs):
            end = _until(t, i, ("{", ";"))  # compiled out of the shipped build: defines nothing
            attrs, vis, quals = [], "", []
            i = (_close(t, end, angle=False) if end < n and t[end] == "{" else end) + 1
            continue
        if x == "{":
            stack.append(ctx_at.get(i, ("block",)))
        elif x == "}" and stack:
            stack.pop()
        ctx, jump = stack[-1] if stack else ("mod",), None
        top = ctx[0] == "mod"
        test = x in ("fn", "impl", "trait", "struct", "enum", "union", "type") and regions.contains(i)
        if x == "fn" and _word(nxt):
            sig, jump = _parse_sig(t, i + 2, quals)
            owned = ctx[0] in ("impl", "trait")
            kind = ("trait_impl" if ctx[1] else "inherent") if ctx[0] == "impl" else "trait" if owned else "free"
            if sig is not None and not test:
                fns.append(_Fn(nxt, kind, ctx[2] if owned else "", ctx[3] if owned else (), ctx[4] if owned else (),
                               sig, vis == "pub", top, any(a <= i <= b for a, b in macros)))
            ctx_at[jump] = ("fn",)
        elif x == "impl" and (i == 0 or t[i - 1] in ("}", ";", "{", "]", "unsafe", "default")):
            j, gens = i + 1, []
            if nxt == "<":
                c = _close(t, j)
                gens, j = _generic_names(t[j + 1 : c]), c + 1
            jump = _until(t, j, ("{", ";", "where"))
            head = _split(t[j:jump], "for")
            trait, self_ty = (head[0] if len(head) > 1 else []), _clean(head[-1] if head else [])
            tr = _clean([y for y in trait if y != "!"])
            lt = tr.index("<") if "<" in tr else len(tr)
            name, ren = _base(tr[:lt]), {g: f"#{k}" for k, g in enumerate(gens)}
            args = _render([ren.get(y, y) for y in _clean(tr[lt + 1 : -1], self_ty)])
            if trait and not test:
                impls.append(_Impl(name, args, _render(tr[lt + 1 : -1]), _base(self_ty), top))
            jump = _until(t, jump, ("{", ";"))
            ctx_at[jump] = ("impl", name, _base(self_ty), self_ty, tuple(gens))
        elif x == "trait" and _word(nxt):
            jump = _until(t, i + 2, ("{", ";"))
            gens = _generic_names(t[i + 3 : _close(t, i + 2)]) if i + 2 < n and t[i + 2] == "<" else []
            ctx_at[jump] = ("trait", "", nxt, (), tuple(gens))
            types += [] if test else [_Type("trait", nxt, vis == "pub", (), top)]
        elif x in ("struct", "enum", "union", "type") and _word(nxt) and not test and (top or x != "type"):
            types.append(_Type(x, nxt, vis == "pub", _derives(attrs), top))
        elif x == "mod" and _word(nxt) and i + 2 < n and t[i + 2] == "{":
            ctx_at[i + 2] = ("mod",)
        elif x == "macro_rules" and nxt == "!" and i + 3 < n and (not macros or i > macros[-1][1]):
            macros.append((i, _close(t, i + 3, angle=False)))
        attrs, vis, quals = [], "", []
        i = jump if jump is not None and jump > i else i + 1
    return tuple(fns), tuple(types), tuple(impls), frozenset(values)


def _prose_fns(text: str) -> list[_Fn]:
    """Signatures in the code fences and backtick spans of a prompt (else anywhere in it)."""
    chunks = _FENCE.findall(text) + _SPAN.findall(_FENCE.sub(" ", text))
    return [f for c in chunks if "fn" in c for f in _scan(c)[0]] or list(_scan(text)[0])


def _code_items(spec: str) -> tuple[list[Item], frozenset[str]]:
    """A reference's public items; for code without any ``pub`` (MultiPL-E prompts) every fn, visibility unchecked."""
    fns, types, impls, _ = _scan(spec)
    public = {ty.name for ty in types if ty.top and ty.pub}
    defined = frozenset(ty.name for ty in types)
    ref = bool(public) or any(f.pub for f in fns)
    found: dict[str, Item] = {}
    for f in fns:
        name = f.name if f.kind == "free" and f.top and f.name != "main" else f"{f.owner}::{f.name}"
        if not f.in_macro and (f.pub or not ref) and (f.kind == "free" and f.top and f.name != "main" or (
                f.kind == "inherent" and (f.owner in public or not ref))):
            found.setdefault(f"fn {name}", Item("fn", name, _norm(f.sig, f.self_ty, f.outer), pub=ref, sig=f.sig))
    for ty in types if ref else ():
        if ty.top and ty.pub:
            derives = tuple(d for d in _CMP if d in ty.derives)
            found.setdefault(ty.name, Item(ty.kind, ty.name, derives=derives, pub=True))
    for im in impls if ref else ():
        if im.top and (im.base in public or im.base not in defined):
            name = f"{im.trait}{f'<{im.shown}>' if im.shown else ''} for {im.base}"
            found.setdefault(f"impl {im.trait} {im.args} {im.base}", Item("impl", name, im.args, owner=im.base))
    return list(found.values()), defined


@lru_cache(maxsize=1024)
def _spec(spec: str) -> tuple[tuple[Item, ...], frozenset[str], frozenset[str]]:
    """Required items, the type names the spec defines, and the names it mentions (never raises)."""
    try:
        words = [x.text for x in tokenize(spec)]
        if words and "`" not in words and words[0] in _ITEM_START:
            items, defined = _code_items(spec)
            return tuple(items), defined, defined
        found = {(f.name, _norm(f.sig, loose="")): f for f in _prose_fns(spec)}
        defined = frozenset(re.findall(r"\b(?:struct|enum|union|type|trait)\s+(?:r#)?(\w+)", spec))
        items = tuple(Item("fn", name, sig, prose=True, sig=f.sig) for (name, sig), f in found.items())
        return items, defined, frozenset(re.findall(r"\w+", spec))
    except Exception:  # text that is not Rust: no requirement rather than a crash
        return (), frozenset(), frozenset()


def required_items(spec: str) -> tuple[Item, ...]:
    """The items a completion must define for ``spec`` (a reference solution or a task prompt); cached."""
    return _spec(spec)[0]


def _check_fn(item: Item, items: tuple[Item, ...], fns: tuple[_Fn, ...], mentioned: frozenset[str]) -> list[str]:
    """Reasons for each same-named definition that differs (``["missing"]`` when there is none)."""
    owner, _, name = item.name.rpartition("::")
    cands = [f for f in fns if f.name == name and (f.in_macro or (
        (not f.owner or f.owner in mentioned) if item.prose
        else f.kind in ("inherent", "trait_impl") and f.owner == owner if owner else f.kind == "free"))]
    group = [g for g in items if g.kind == "fn" and g.name == item.name] if item.prose else [item]
    out = [] if cands else ["missing"]
    for f in cands:
        got = _norm(f.sig, f.self_ty, f.outer)
        want = [_norm(g.sig, loose=f.owner) if g.prose else g.signature for g in group]
        if f.sig.dollar:
            out.append(f"{item.name}: signature built from macro metavariables")
        elif item.pub and not f.pub and f.kind != "trait_impl":
            out.append(f"{item.name} is not pub")
        elif got not in want:
            out.append(f"{item.name}: expected {want[0]}, found {got}")
    if item.prose and cands and not out and not any(_norm(item.sig, loose=f.owner) == _norm(f.sig, f.self_ty, f.outer)
                                        for f in cands if not f.sig.dollar):
        out.append(f"{item.name}: no definition matches {item.signature}")
    return out


def check_items(code: str, spec: str) -> ItemCheck:
    """Whether ``code`` (a completion; test code ignored) defines ``spec``'s required items with their signatures."""
    items, defined, mentioned = _spec(spec)
    try:
        fns, type_list, impls, values = _scan(code) if items else ((), (), (), frozenset())
    except Exception:
        return ItemCheck(missing=tuple(it.label for it in items))
    missing, bad, types = [], [], {}
    for ty in type_list:
        types.setdefault(ty.name, []).append(ty)
    for it in items:
        trait, why = it.name.split("<")[0].split(" ")[0], []  # why: this item's reasons, reported as one
        if it.kind == "fn":
            why = _check_fn(it, items, fns, mentioned)
            missing += [it.label] if why[:1] == ["missing"] else []
            why = why[why[:1] == ["missing"] :]
            why += [f"{it.name} is also bound by a const, static, type or `as`"] if "::" not in it.name and (
                it.name in values or it.name in types) else []
        elif it.kind == "impl":
            found = any(im.trait == trait and im.base == it.owner and it.signature in ("", im.args or it.signature)
                        for im in impls)  # `impl Add for T` and `impl Add<T> for T` are the same impl
            derived = not it.signature and any(trait in ty.derives for ty in types.get(it.owner, ()))
            missing += [] if found or derived else [it.label]
        elif it.name not in types:
            missing.append(it.label)
        else:
            for ty in types[it.name]:
                why += [f"{it.name} is a {ty.kind}, expected a {it.kind}"] if ty.kind != it.kind else []
                why += [f"{it.name} is not pub"] if it.pub and not ty.pub else []
                why += [f"{it.name} must derive {d}" for d in it.derives if d not in ty.derives]
            why += [f"{it.name} implements {im.trait} by hand instead of deriving it"
                    for im in impls if im.base == it.name and im.trait in it.derives]
        bad += ["; ".join(dict.fromkeys(why))] if why else []
    sigs = [it.sig for it in items if it.sig is not None]
    if any(set(s.ret) & _STD_TYPES for s in sigs):  # `-> Wat` with `impl PartialEq<i32> for Wat` forging asserts
        bad += [f"implements {im.trait}<{im.shown}> for its own type {im.base}" for im in impls
                if im.trait in ("PartialEq", "PartialOrd") and im.base in types and im.base not in mentioned
                and re.sub(r"&|mut\b|\s", "", im.args) not in ("", "Self")]
    bad += _hand_comparisons_inside(code, spec, items, impls)
    used = {x for s in sigs for p in (*s.params, s.ret) for x in p} & _STD_TYPES
    bad += [f"defines its own type {name}, shadowing the standard one" for name, tys in types.items()
            if name in used and name not in defined and any(ty.kind != "type" for ty in tys)]
    return ItemCheck(tuple(dict.fromkeys(missing)), tuple(dict.fromkeys(bad)))


_HAND_CMP = ("PartialEq", "PartialOrd", "Ord")


def _hand_comparisons_inside(code: str, spec: str, items: tuple[Item, ...], impls: tuple[_Impl, ...]) -> list[str]:
    """A required type that derives its comparisons as the reference does but holds (through fields and aliases) a
    type of the completion's whose ``==`` or ordering is written by hand, say always true: the derived comparison
    is then the hand-written one. Types the reference compares by hand itself are fine."""
    derived = frozenset(it.name for it in items if it.kind in ("struct", "enum", "union") and it.derives)
    if not derived:
        return []
    hand = {im.base for im in impls if im.trait in _HAND_CMP}
    ref_hand = {im.base for im in _scan(spec)[2] if im.trait in _HAND_CMP}
    return [f"compares {name} by hand, and the required type's derived comparison goes through it"
            for name in sorted(reachable_types(code, derived) - derived) if name in hand and name not in ref_hand]


def forged_comparisons(code: str) -> tuple[str, ...]:
    """What is checked when a task gives no reference and no prompt signatures: a type of the completion's own that
    it makes comparable with another type by hand (``impl PartialEq<i32> for Wat``), the shape of an answer whose
    ``==`` always says yes. Never raises."""
    try:
        _fns, type_list, impls, _values = _scan(code)
    except Exception:
        return ()
    own = {ty.name for ty in type_list}
    return tuple(dict.fromkeys(
        f"implements {im.trait}<{im.shown}> for its own type {im.base}" for im in impls
        if im.trait in ("PartialEq", "PartialOrd") and im.base in own
        and re.sub(r"&|mut\b|\s", "", im.args) not in ("", "Self", im.base)))


def shadowing_methods(code: str, reference: str, tests: str) -> tuple[str, ...]:
    """Methods ``code`` adds to the task's API that take over a method call of the hidden ``tests``: a method of a
    required trait the reference's trait does not declare, or an inherent method of a required type the
    reference's type does not have, named like a method the tests call (``x.name(``). Method resolution picks an
    inherent method, or a by-value trait method in scope, before std's (``Fib::new().count()`` would call the
    completion's ``count``, not ``Iterator::count``; a required trait's ``is_empty(self)`` for ``Vec<String>`` would
    answer ``describe_all(..).is_empty()``).

    >>> ref = "pub struct Fib(u64); impl Iterator for Fib { type Item = u64; fn next(&mut self) -> Option<u64> { N } }"
    >>> tests = "assert_eq!(Fib(0).count(), 5);"
    >>> shadowing_methods(ref + " impl Fib { pub fn count(self) -> usize { 5 } }", ref, tests)
    ("Fib::count: not the task's, takes over the hidden tests' `.count()`",)
    >>> shadowing_methods(ref + " impl Fib { pub fn peek(&self) -> u64 { 0 } }", ref, tests)
    ()
    """
    if not reference.strip():
        return ()
    toks = tokenize(tests)
    called = {toks[i + 1].text for i in range(len(toks) - 2)
              if toks[i].text == "." and toks[i + 1].kind == "ident" and toks[i + 2].text in ("(", "::")}
    if not called:
        return ()
    ref_fns, ref_types, _, _ = _scan(reference)
    try:
        fns = _scan(code)[0]
    except Exception:
        return ()
    traits = {ty.name for ty in ref_types if ty.kind == "trait"}
    types = {ty.name for ty in ref_types if ty.kind != "trait"}
    known = {(f.kind, f.owner, f.name) for f in ref_fns}
    found = [f"{f.owner}::{f.name}: not the task's, takes over the hidden tests' `.{f.name}()`"
             for f in fns if f.name in called and (f.kind, f.owner, f.name) not in known
             and ((f.kind == "trait" and f.owner in traits) or (f.kind == "inherent" and f.owner in types))]
    return tuple(dict.fromkeys(found))

