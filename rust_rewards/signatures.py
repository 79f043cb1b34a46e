"""Static check that a completion defines the task's required items with the task's exact signatures.

Pure Python on top of :func:`rust_rewards.source.tokenize`; no compiler. The spec is a reference solution (its
public items are required, with visibility and comparison derives) or, when a task has none, the prompt: prose with
signatures in backticks or code fences, or MultiPL-E style code (every ``fn`` signature is required).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from rust_rewards.source import test_regions, tokenize

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
_ITEM_START = frozenset("pub fn use mod struct enum impl trait type const static # extern macro_rules async unsafe".split())
_OPENERS, _CLOSERS = frozenset("([{<"), frozenset(")]}>")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class ItemCheck:
    """Required items the completion lacks, and one reason per item it defines differently."""

    missing: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched


@dataclass(frozen=True)
class _Sig:
    quals: tuple[str, ...]
    generics: tuple[str, ...]  # fn generic names in order, then one per ``impl Trait`` parameter
    params: tuple[tuple[str, ...], ...]  # type tokens, or a one-token receiver marker ("&self", ...)
    ret: tuple[str, ...]
    dollar: bool  # mentions a macro metavariable


@dataclass(frozen=True)
class Item:
    """One required item: ``kind`` fn/struct/enum/trait/type/impl, ``name`` ("add", "Stack::push",
    "Display for Point"), normalised ``signature`` (fns; trait arguments for impls) and comparison ``derives``."""

    kind: str
    name: str
    signature: str = ""
    derives: tuple[str, ...] = ()
    pub: bool = field(default=False, repr=False)  # the completion's definition must be pub (reference specs)
    prose: bool = field(default=False, repr=False)  # from a prose prompt: owner unknown, Self resolved late
    owner: str = field(default="", repr=False)  # impl items: the implementing type
    sig: _Sig | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class _Fn:
    name: str
    kind: str  # free / inherent / trait_impl / trait
    owner: str
    self_ty: tuple[str, ...]
    outer: tuple[str, ...]  # generics of the enclosing impl or trait
    sig: _Sig
    pub: bool
    top: bool
    in_macro: bool


@dataclass(frozen=True)
class _Type:
    kind: str
    name: str
    pub: bool
    derives: tuple[str, ...]
    top: bool


@dataclass(frozen=True)
class _Impl:
    trait: str
    args: str  # normalised trait arguments ("" when none)
    shown: str  # trait arguments for messages
    base: str
    top: bool


@dataclass(frozen=True)
class _Scan:
    fns: tuple[_Fn, ...]
    types: tuple[_Type, ...]
    impls: tuple[_Impl, ...]


def _word(x: str) -> bool:
    return x[:1].isalpha() or x[:1] == "_" or (len(x) > 1 and x[0] in "#@")


def _close(t: list[str], i: int, angle: bool = True) -> int:
    """Index closing the bracket at ``i`` (all bracket kinds nest; ``<>`` only when ``angle``)."""
    depth = 0
    for j in range(i, len(t)):
        if t[j] in _OPENERS and (angle or t[j] != "<"):
            depth += 1
        elif t[j] in _CLOSERS and (angle or t[j] != ">"):
            depth -= 1
            if depth == 0:
                return j
    return len(t) - 1


def _split(t: list[str] | tuple[str, ...], sep: str = ",") -> list[list[str]]:
    parts: list[list[str]] = [[]]
    depth = 0
    for x in t:
        depth += (x in _OPENERS) - (x in _CLOSERS)
        if depth == 0 and x == sep:
            parts.append([])
        else:
            parts[-1].append(x)
    return [p for p in parts if p]


def _until(t: list[str], k: int, stops: tuple[str, ...]) -> int:
    """First index from ``k`` holding one of ``stops`` outside brackets (or a closing brace), else ``len(t)``."""
    depth = 0
    while k < len(t):
        x = t[k]
        if depth == 0 and (x in stops or x == "}"):
            return k
        depth += (x in _OPENERS) - (x in _CLOSERS)
        if depth < 0:
            return k
        k += 1
    return k


def _generic_names(t: list[str]) -> list[str]:
    names = []
    for p in _split(t):
        if not p[0].startswith("'"):
            names.append(p[1] if p[0] == "const" and len(p) > 1 else p[0])
    return names


def _clean(t: tuple[str, ...] | list[str], self_ty: tuple[str, ...] = (), loose: str = "") -> tuple[str, ...]:
    """Type tokens without lifetimes and std/crate path prefixes, the impl's own type written ``Self``."""
    out: list[str] = []
    skip = False
    for k, x in enumerate(t):
        if x.startswith("'"):
            if out and out[-1] in (",", "+"):
                out.pop()
            else:
                skip = True
            continue
        if (skip and x in (",", "+")) or (x in _PATH_DROP and k + 1 < len(t) and t[k + 1] == "::"):
            skip = False
            continue
        skip = False
        if x == "::" and (not out or not (_word(out[-1]) or out[-1] == ">")):
            continue
        if x == ">" and out and out[-1] == "<":
            out.pop()
            continue
        out.append(x)
    if self_ty or loose:
        res, k, m = [], 0, len(self_ty)
        while k < len(out):
            prev_ok = k == 0 or out[k - 1] != "::"
            if self_ty and prev_ok and tuple(out[k : k + m]) == self_ty:
                res.append("Self")
                k += m
            elif loose and prev_ok and out[k] == loose:
                res.append("Self")
                k = _close(out, k + 1) + 1 if k + 1 < len(out) and out[k + 1] == "<" else k + 1
            else:
                res.append(out[k])
                k += 1
        out = res
    return tuple(out)


def _render(t: tuple[str, ...] | list[str]) -> str:
    s, prev = "", ""
    for x in t:
        if s and ((_word(prev) and _word(x)) or x in ("->", "+", "=") or prev in (",", "->", "+", "=")):
            s += " "
        s, prev = s + x, x
    return s


def _receiver(p: list[str]) -> tuple[str, ...] | None:
    """The canonical receiver (``self``, ``&self``, ``&mut self``, ``self: T``) if ``p`` is one."""
    parts = _split(p, ":")
    if not parts or "self" not in parts[0]:
        return None
    if len(parts) > 1:
        ty = _clean(p[len(parts[0]) + 1 :])
        marks = {("Self",): "self", ("&", "Self"): "&self", ("&", "mut", "Self"): "&mut self"}
        return (marks[ty],) if ty in marks else ("self:", *ty)
    bare = _clean(parts[0])
    return ("&mut self" if bare[:2] == ("&", "mut") else "&self" if bare[:1] == ("&",) else "self",)


def _parse_sig(t: list[str], j: int, quals: list[str]) -> tuple[_Sig | None, int]:
    """The signature whose generics or ``(`` start at ``j``, and the index of its body ``{`` (or ``;``/end)."""
    start, n, gens = j, len(t), []
    if j < n and t[j] == "<":
        c = _close(t, j)
        gens, j = _generic_names(t[j + 1 : c]), c + 1
    if j >= n or t[j] != "(":
        return None, j
    c = _close(t, j)
    params = []
    for p in _split(t[j + 1 : c]):
        rec = _receiver(p)
        colon = _split(p, ":")
        ty = p[len(colon[0]) + 1 :] if len(colon) > 1 else p
        if rec is None and ty[:1] == ["impl"]:
            gens.append(f"impl#{len(gens)}")
            rec = (gens[-1],)
        params.append(rec if rec is not None else tuple(ty))
    k = _until(t, c + 1, ("{", ";", "where"))
    ret = t[c + 2 : k] if c + 1 < n and t[c + 1] == "->" else []
    if k < n and t[k] == "where":
        k = _until(t, k, ("{", ";"))
    order = {q: i for i, q in enumerate(_QUALS)}
    sig = _Sig(tuple(sorted(set(quals), key=order.get)), tuple(gens), tuple(params), tuple(ret), "$" in t[start:k])
    return sig, k


def _norm(sig: _Sig, self_ty: tuple[str, ...] = (), outer: tuple[str, ...] = (), loose: str | None = None) -> str:
    """Canonical text of a signature: fn generics ``#i`` by position, impl generics ``@i`` by first use.

    ``loose`` (prose specs) is the candidate's type name, read as ``Self``; undeclared one-letter types are then
    taken for impl generics."""
    inner = {g: f"#{i}" for i, g in enumerate(sig.generics)}
    seen: dict[str, str] = {}

    def rename(t: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(
            inner[x] if x in inner
            else seen.setdefault(x, f"@{len(seen)}") if x in outer or (loose is not None and re.fullmatch(r"[A-Z]\d?", x))
            else x
            for x in _clean(t, self_ty, loose or "")
        )

    params = [rename(p) for p in sig.params]
    ret = rename(sig.ret)
    text = f"fn({', '.join(_render(p) for p in params)})" + (f" -> {_render(ret)}" if ret not in ((), ("(", ")")) else "")
    return " ".join((*sig.quals, text))


def _derives(attrs: list[list[str]]) -> tuple[str, ...]:
    found = []
    for a in attrs:
        for k, x in enumerate(a[:-1]):
            if x == "derive" and a[k + 1] == "(":
                found += [p[-1] for p in _split(a[k + 2 : _close(a, k + 1)])]
    return tuple(found)


def _base(t: tuple[str, ...]) -> str:
    depth, base = 0, ""
    for x in t:
        depth += (x in _OPENERS) - (x in _CLOSERS)
        if depth == 0 and _word(x) and x not in ("dyn", "mut", "impl"):
            base = x
    return base


@lru_cache(maxsize=2048)
def _scan(code: str) -> _Scan:
    """Every fn, type and trait impl outside test code, with where it sits."""
    toks = tokenize(code)
    regions = test_regions(toks)
    t = [x.text[2:] if x.kind == "ident" and x.text.startswith("r#") else x.text for x in toks]
    n = len(t)
    ctx_at: dict[int, tuple] = {}
    stack: list[tuple] = []
    macros: list[tuple[int, int]] = []
    fns, types, impls = [], [], []
    attrs: list[list[str]] = []
    vis, quals = "", []
    i = 0
    while i < n:
        x, nxt = t[i], t[i + 1] if i + 1 < n else ""
        o = i + 1 if nxt == "[" else i + 2
        if x == "#" and o < n and t[o] == "[" and nxt in "[!":
            c = _close(t, o, angle=False)
            attrs.append(t[o + 1 : c])
            i = c + 1
            continue
        if x == "pub":
            vis, i = ("pub", i + 1) if nxt != "(" else ("restricted", _close(t, i + 1) + 1)
            continue
        if x in _QUALS or x == "default":
            quals.append(x)
            i += 2 if x == "extern" and nxt.startswith('"') else 1
            continue
        if x == "{":
            stack.append(ctx_at.get(i, ("block",)))
        elif x == "}" and stack:
            stack.pop()
        ctx = stack[-1] if stack else ("mod",)
        top, test = ctx[0] == "mod", x in ("fn", "impl", "trait", "struct", "enum", "union", "type") and regions.contains(i)
        jump = None
        if x == "fn" and _word(nxt):
            sig, jump = _parse_sig(t, i + 2, quals)
            if sig is not None and not test:
                kind = {"impl": "trait_impl" if ctx[0] == "impl" and ctx[1] else "inherent", "trait": "trait"}
                fns.append(_Fn(nxt, kind.get(ctx[0], "free"), ctx[2] if ctx[0] in ("impl", "trait") else "",
                               ctx[3] if ctx[0] == "impl" else (), ctx[4] if ctx[0] in ("impl", "trait") else (),
                               sig, vis == "pub", top, any(a <= i <= b for a, b in macros)))
            ctx_at[jump] = ("fn",)
        elif x == "impl" and (i == 0 or t[i - 1] in ("}", ";", "{", "]", "unsafe", "default")):
            j, gens = i + 1, []
            if nxt == "<":
                c = _close(t, j)
                gens, j = _generic_names(t[j + 1 : c]), c + 1
            jump = _until(t, j, ("{", ";", "where"))
            head = _split(t[j:jump], "for")
            trait, ty = (head[0], head[1]) if len(head) > 1 else ([], head[0] if head else [])
            self_ty = _clean(ty)
            base = _base(self_ty)
            name, args, shown = "", "", ""
            if trait:
                tr = _clean([y for y in trait if y != "!"])
                lt = tr.index("<") if "<" in tr else len(tr)
                name, shown = _base(tr[:lt]), _render(tr[lt + 1 : -1])
                ren = {g: f"#{k}" for k, g in enumerate(gens)}
                args = _render([ren.get(y, y) for y in _clean(tr[lt + 1 : -1], self_ty)])
                if not test:
                    impls.append(_Impl(name, args, shown, base, top))
            jump = _until(t, jump, ("{", ";"))
            ctx_at[jump] = ("impl", name, base, self_ty, tuple(gens))
        elif x == "trait" and _word(nxt):
            jump = _until(t, i + 2, ("{", ";"))
            gens = _generic_names(t[i + 3 : _close(t, i + 2)]) if i + 2 < n and t[i + 2] == "<" else []
            ctx_at[jump] = ("trait", "", nxt, (), tuple(gens))
            if not test:
                types.append(_Type("trait", nxt, vis == "pub", (), top))
        elif x in ("struct", "enum", "union", "type") and _word(nxt) and not test:
            types.append(_Type(x, nxt, vis == "pub", _derives(attrs), top))
        elif x == "mod" and _word(nxt) and i + 2 < n and t[i + 2] == "{":
            ctx_at[i + 2] = ("mod",)
        elif x == "macro_rules" and nxt == "!" and i + 3 < n:
            macros.append((i, _close(t, i + 3, angle=False)))
        attrs, vis, quals = [], "", []
        i = jump if jump is not None and jump > i else i + 1
    return _Scan(tuple(fns), tuple(types), tuple(impls))


def _prose_fns(text: str) -> list[_Fn]:
    """Signatures in code fences and backtick spans of a prompt (else anywhere in it)."""
    chunks = _FENCE.findall(text) + _SPAN.findall(_FENCE.sub(" ", text))
    return [f for c in chunks if "fn" in c for f in _scan(c).fns] or list(_scan(text).fns)


@lru_cache(maxsize=1024)
def _spec(spec: str) -> tuple[tuple[Item, ...], frozenset[str], frozenset[str]]:
    """Required items, the type names the spec defines, and the names it mentions (robust to any text)."""
    try:
        words = [x.text for x in tokenize(spec)]
        if "`" in words or words[:1] == [] or words[0] not in _ITEM_START:
            fns = _prose_fns(spec)
            items = {(f.name, _norm(f.sig, loose="")): Item("fn", f.name, _norm(f.sig, loose=""), prose=True, sig=f.sig)
                     for f in fns}
            defined = re.findall(r"\b(?:struct|enum|union|type|trait)\s+(?:r#)?(\w+)", spec)
            return tuple(items.values()), frozenset(defined), frozenset(re.findall(r"\w+", spec))
        sc = _scan(spec)
        public = {ty.name for ty in sc.types if ty.top and ty.pub}
        defined = frozenset(ty.name for ty in sc.types)
        reference = bool(public) or any(f.pub for f in sc.fns)
        found: dict[str, Item] = {}
        for f in sc.fns:
            if f.in_macro or not (f.pub or not reference):
                continue
            if f.kind == "free" and f.top and f.name != "main":
                name = f.name
            elif f.kind == "inherent" and (f.owner in public or not reference):
                name = f"{f.owner}::{f.name}"
            else:
                continue
            found.setdefault(f"fn {name}", Item("fn", name, _norm(f.sig, f.self_ty, f.outer), pub=reference, sig=f.sig))
        for ty in sc.types if reference else ():
            if ty.top and ty.pub:
                found.setdefault(ty.name, Item(ty.kind, ty.name, derives=tuple(d for d in _CMP if d in ty.derives),
                                               pub=True))
        for im in sc.impls if reference else ():
            if im.top and (im.base in public or im.base not in defined):
                shown = f"<{im.shown}>" if im.shown else ""
                found.setdefault(f"impl {im.trait}{im.args} {im.base}",
                                 Item("impl", f"{im.trait}{shown} for {im.base}", im.args, owner=im.base))
        return tuple(found.values()), defined, defined
    except Exception:  # a prompt that is not Rust: no requirement rather than a crash
        return (), frozenset(), frozenset()


def required_items(spec: str) -> tuple[Item, ...]:
    """The items a completion must define for ``spec`` (a reference solution or a task prompt)."""
    return _spec(spec)[0]


def _check_fn(item: Item, group: list[Item], sc: _Scan, out: list[str]) -> bool:
    """Append reasons for every same-named definition that differs; False when there is none."""
    owner, _, name = item.name.rpartition("::")
    cands = [f for f in sc.fns if f.name == name and (
        item.prose or f.in_macro or (f.kind == "inherent" and f.owner == owner if owner else f.kind == "free"))]
    for f in cands:
        got = _norm(f.sig, f.self_ty, f.outer)
        want = [_norm(g.sig, loose=f.owner) if g.prose else g.signature for g in group if g.sig is not None]
        if f.sig.dollar:
            out.append(f"{item.name}: signature built from macro metavariables")
        elif item.pub and not f.pub:
            out.append(f"{item.name} is not pub")
        elif got not in want:
            out.append(f"{item.name}: expected {want[0]}, found {got}")
    if item.prose and cands and not any(_norm(item.sig, loose=f.owner) == _norm(f.sig, f.self_ty, f.outer)
                                        for f in cands if item.sig is not None and not f.sig.dollar):
        out.append(f"{item.name}: no definition matches {item.signature}")
    return bool(cands)


def check_items(code: str, spec: str) -> ItemCheck:
    """Whether ``code`` (a completion; test code ignored) defines ``spec``'s required items with their signatures."""
    items, defined, mentioned = _spec(spec)
    if not items:
        return ItemCheck()
    try:
        sc = _scan(code)
    except Exception:
        return ItemCheck(missing=tuple(it.label for it in items))
    missing: list[str] = []
    bad: list[str] = []
    types: dict[str, list[_Type]] = {}
    for ty in sc.types:
        types.setdefault(ty.name, []).append(ty)
    for it in items:
        if it.kind == "fn":
            group = [g for g in items if g.kind == "fn" and g.name == it.name] if it.prose else [it]
            if not _check_fn(it, group, sc, bad):
                missing.append(it.label)
        elif it.kind == "impl":
            trait = re.split(r"[<\s]", it.name)[0]
            if not any(im.trait == trait and im.base == it.owner and (not it.signature or not im.args or im.args == it.signature)
                       for im in sc.impls) and not (
                    not it.signature and any(trait in ty.derives for ty in types.get(it.owner, ()))):
                missing.append(it.label)
        elif it.name not in types:
            missing.append(it.label)
        else:
            for ty in types[it.name]:
                if ty.kind != it.kind:
                    bad.append(f"{it.name} is a {ty.kind}, expected a {it.kind}")
                elif it.pub and not ty.pub:
                    bad.append(f"{it.name} is not pub")
                bad += [f"{it.name} must derive {d}" for d in it.derives if d not in ty.derives]
            bad += [f"{it.name} implements {im.trait} by hand instead of deriving it"
                    for im in sc.impls if im.base == it.name and im.trait in it.derives]
    used = {x for it in items if it.sig is not None for p in (*it.sig.params, it.sig.ret) for x in p} & _STD_TYPES
    if any(set(it.sig.ret) & _STD_TYPES for it in items if it.sig is not None):
        bad += [f"implements {im.trait}<{im.shown}> for its own type {im.base}" for im in sc.impls
                if im.trait in ("PartialEq", "PartialOrd") and im.base in types and im.base not in mentioned
                and im.args not in ("", "Self")]
    bad += [f"defines its own type {name}, shadowing the standard one" for name in types
            if name in used and name not in defined]
    return ItemCheck(tuple(dict.fromkeys(missing)), tuple(dict.fromkeys(bad)))
