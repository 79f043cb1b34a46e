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
    >>> soundness_holes(tokenize("fn apply(f: fn(i32) -> i32) -> i32 { f(1) }"))
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
            if at(k) is not None and at(k).text in ("&", "&&") and _lifetime(at(k + 1)):
                found.add(IMPLIED_BOUNDS)
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
