"""Static refusal of the known families of soundness holes in safe Rust.

The seals (``verify/crate.py``) assume that code compiled under ``#![forbid(unsafe_code)]`` cannot write its own
process's memory. Open soundness bugs of rustc break that assumption in safe code: "cve-rs" turns
rust-lang/rust#25860 into a safe ``transmute``, with which a task function can overwrite its caller's return
address and return past a failing assertion into the sealed test's epilogue. Each family below is refused by the
shapes its known exploits need; a completion whose task's reference uses the same shape is not (see
``single.task_facts``). Families not listed are not covered: docs/verifier.md names them.
"""

from __future__ import annotations

from rust_rewards.rust.lexer import Token, _bracket_pairs

IMPLIED_BOUNDS = "soundness hole: nested references with named lifetimes (rust-lang/rust#25860, cve-rs)"
FN_POINTER_LIFETIMES = ("soundness hole: fn pointer type with lifetimes or inferred parameters "
                        "(rust-lang/rust#25860, cve-rs)")
BLANKET_ASSOCIATED = ("soundness hole: blanket impl over `T: ?Sized` of a trait with an associated type "
                      "(rust-lang/rust#57893)")
FAMILIES = (IMPLIED_BOUNDS, FN_POINTER_LIFETIMES, BLANKET_ASSOCIATED)


def _lifetime(tok: Token | None) -> bool:
    return tok is not None and tok.kind == "lifetime"


def soundness_holes(tokens: list[Token]) -> tuple[str, ...]:
    """The families of ``FAMILIES`` whose exploit shapes appear in ``tokens``.

    >>> from rust_rewards.rust.lexer import tokenize
    >>> soundness_holes(tokenize("fn t<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v }")) == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes(tokenize("fn t<'a, 'b, T>(_: &'a Holder<'b, T>, v: &'b T) -> &'a T { v }")) == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes(tokenize("type P<A, R, T> = fn(A, &mut T) -> R;")) == (FN_POINTER_LIFETIMES,)
    True
    >>> soundness_holes(tokenize("fn apply(f: fn(i32) -> i32) -> i32 { f(1) }"))
    ()
    >>> soundness_holes(tokenize("fn first<'a>(v: &'a Vec<i32>) -> &'a i32 { &v[0] }"))
    ()
    """
    found: set[str] = set()
    n = len(tokens)
    pairs = _bracket_pairs(tokens)
    at = lambda k: tokens[k] if 0 <= k < n else None  # noqa: E731
    for i, tok in enumerate(tokens):
        text = tok.text
        if text == "&" and _lifetime(at(i + 1)):
            k = i + 2 + (at(i + 2) is not None and at(i + 2).text == "mut")
            if at(k) is not None and at(k).text in ("&", "&&") and _lifetime(at(k + 1)) or _lifetime_args(tokens, k):
                found.add(IMPLIED_BOUNDS)
        elif text == "type" and tok.kind == "ident" and _generic_fn_alias(tokens, i):
            found.add(FN_POINTER_LIFETIMES)
        elif text == "fn" and tok.kind == "ident" and at(i + 1) is not None and at(i + 1).text == "(":
            end = pairs[i + 1] + 1
            if at(end) is not None and at(end).text == "->":
                end += 1
                while at(end) is not None and at(end).text not in (",", ";", "=", ")", "{", ">", "]"):
                    end += 1
            inside = tokens[i + 2 : end]
            if any(t.kind == "lifetime" or t.text == "_" for t in inside) or (
                    at(i - 1) is not None and at(i - 1).text == ">" and _for_before(tokens, i - 1)):
                found.add(FN_POINTER_LIFETIMES)
        elif text == "impl" and at(i + 1) is not None and at(i + 1).text == "<" and _blanket_unsized(tokens, pairs, i):
            found.add(BLANKET_ASSOCIATED)
    return tuple(f for f in FAMILIES if f in found)


def _angle_end(tokens: list[Token], lt: int) -> int:
    """The index of the ``>`` that closes the ``<`` at ``lt`` (``len(tokens)`` when none does)."""
    depth = 0
    for j in range(lt, len(tokens)):
        text = tokens[j].text
        depth += text.count("<") if text in ("<", "<<") else 0
        depth -= text.count(">") if text in (">", ">>") else 0
        if depth <= 0:
            return j
    return len(tokens)


def _lifetime_args(tokens: list[Token], k: int) -> bool:
    """A path at ``k`` whose generic arguments hold a lifetime (``&'a Holder<'b, T>``: the nested reference of
    rust-lang/rust#25860 inside a struct)."""
    while k + 1 < len(tokens) and tokens[k].kind == "ident" and tokens[k + 1].text == "::":
        k += 2
    if k + 1 >= len(tokens) or tokens[k].kind != "ident" or tokens[k + 1].text != "<":
        return False
    return any(t.kind == "lifetime" for t in tokens[k + 2 : _angle_end(tokens, k + 1)])


def _generic_fn_alias(tokens: list[Token], i: int) -> bool:
    """``type P<A, R, T> = fn(A, &mut T) -> R;``: a generic alias of a fn pointer type, whose lifetimes (or ``_``)
    appear only where it is used (``P<_, &'b mut T, T>``)."""
    if i + 2 >= len(tokens) or tokens[i + 1].kind != "ident" or tokens[i + 2].text != "<":
        return False
    j = _angle_end(tokens, i + 2) + 1
    while j < len(tokens) and tokens[j].text not in ("=", ";", "{"):
        j += 1
    head = [t.text for t in tokens[j + 1 : j + 12]]
    while head and head[0] in ("for", "unsafe", "extern") or head[:1] and head[0].startswith('"'):
        if head[0] == "for" and "<" in head:  # skip the binder
            head = head[head.index(">") + 1 :] if ">" in head else []
        else:
            head = head[1:]
    return bool(head) and tokens[j].text == "=" and head[0] == "fn"


def _for_before(tokens: list[Token], gt: int) -> bool:
    """Whether the ``>`` at ``gt`` closes a ``for<...>`` binder."""
    depth = 0
    for j in range(gt, -1, -1):
        depth += tokens[j].text == ">"
        depth -= tokens[j].text == "<"
        if depth == 0:
            return j > 0 and tokens[j - 1].text == "for"
    return False


def _blanket_unsized(tokens: list[Token], pairs: list[int], i: int) -> bool:
    """``impl<T: ?Sized ...> Trait for T`` where the impl body defines an associated ``type``."""
    depth, j = 0, i + 1
    params: list[str] = []
    unsized = False
    while j < len(tokens):
        t = tokens[j].text
        depth += t == "<"
        depth -= t == ">"
        if t == "?" and j + 1 < len(tokens) and tokens[j + 1].text == "Sized":
            unsized = True
        if depth == 1 and tokens[j].kind == "ident" and tokens[j - 1].text in ("<", ","):
            params.append(t)
        if depth == 0:
            break
        j += 1
    k = j
    while k < len(tokens) and tokens[k].text not in ("{", ";"):
        k += 1
    head = [t.text for t in tokens[j + 1 : k]]
    if not unsized or "for" not in head:
        return False
    target = head[head.index("for") + 1 :]
    if not (target and target[0] in params and (len(target) == 1 or target[1] == "where")):
        return False
    body = tokens[k : pairs[k] + 1] if k < len(tokens) and tokens[k].text == "{" else []
    return any(t.text == "type" for t in body)
