"""Static refusal of the known families of soundness holes in safe Rust.

The seals (``verify/crate.py``) assume that code compiled under ``#![forbid(unsafe_code)]`` cannot write its own
process's memory. Open soundness bugs of rustc break that assumption in safe code: "cve-rs" turns
rust-lang/rust#25860 into a safe ``transmute``, with which a task function can overwrite its caller's return
address and return past a failing assertion into the sealed test's epilogue. Each family below is refused by the
shapes its known exploits need, read from a parse of the code (tree-sitter), not from token spellings; a completion
whose task's reference uses the same shape is not (see ``verify.reference.task_facts``). Families not listed are
not covered: docs/verifier.md names them.
"""

from __future__ import annotations

import tree_sitter_rust
from tree_sitter import Language, Node, Parser

from rust_rewards.rust.lexer import Token, _bracket_pairs, tokenize

IMPLIED_BOUNDS = "soundness hole: nested references with named lifetimes (rust-lang/rust#25860, cve-rs)"
FN_POINTER_LIFETIMES = ("soundness hole: fn pointer type with lifetimes or inferred parameters "
                        "(rust-lang/rust#25860, cve-rs)")
BLANKET_ASSOCIATED = ("soundness hole: blanket impl over `T: ?Sized` of a trait with an associated type "
                      "(rust-lang/rust#57893)")
FAMILIES = (IMPLIED_BOUNDS, FN_POINTER_LIFETIMES, BLANKET_ASSOCIATED)


_RUST = Language(tree_sitter_rust.language())
_ITEMS = frozenset({"function_item", "function_signature_item", "impl_item", "struct_item", "enum_item",
                    "union_item", "trait_item", "type_item"})
"""Items whose ``type_parameters`` are in scope in their types."""


def soundness_holes(source: str, tokens: list[Token] | None = None) -> tuple[str, ...]:
    """The families of ``FAMILIES`` whose exploit shapes appear in ``source``, read from its parse (tree-sitter's
    Rust grammar), so that every spelling of a shape is one rule:

    - ``IMPLIED_BOUNDS``: a reference with a named lifetime to a type that holds another named lifetime anywhere
      (``&'a &'b ()``, ``&'a Holder<'b, T>``, ``&'a [&'b (); 0]``, ``&'a (&'b (),)``): the implied bound
      ``'b: 'a`` that rust-lang/rust#25860 forges; in a fn's parameter or return type only where that fn is used
      as a value (the coercion that loses the bound), so a parser's ``&'a [Token<'b>]`` that is only called is fine;
    - ``FN_POINTER_LIFETIMES``: a fn pointer type that holds a lifetime, ``_``, a ``for<...>`` binder or a type
      parameter of an item around it (``fn(Unit, &mut T) -> R``: the lifetime arrives in ``R``), the variance
      cve-rs uses to pick the lifetimes;
    - ``BLANKET_ASSOCIATED``: ``impl<T: ?Sized> Trait for T`` defining an associated type (rust-lang/rust#57893),
      read from ``tokens`` (``source``'s, when the caller has them already).

    >>> used = " fn u() { g(t); }"  # t used as a value: the coercion that loses the implied bound
    >>> soundness_holes("fn t<'a, 'b, T>(_: &'a &'b (), v: &'b T) -> &'a T { v }" + used) == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes("fn t<'a, 'b, T>(_: &'a [&'b (); 0], v: &'b T) -> &'a T { v }" + used) == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes("fn t<'a, 'b, T>(_: &'a (&'b (),), v: &'b T) -> &'a T { v }" + used) == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes("type P<A, R, T> = fn(A, &mut T) -> R;") == (FN_POINTER_LIFETIMES,)
    True
    >>> soundness_holes("fn go<R, T>(f: fn((), &mut T) -> R, t: &mut T) -> R { f((), t) }") == (FN_POINTER_LIFETIMES,)
    True
    >>> soundness_holes("fn apply(f: fn(i32) -> i32) -> i32 { f(1) }")
    ()
    >>> soundness_holes("fn longest<'a>(v: &'a [&'a str]) -> &'a str { v[0] }")
    ()
    >>> soundness_holes("fn op<'a, 'b>(w: &'a [T<'b>]) -> &'a [T<'b>] { w } fn f(w: &[T]) { op(w); }")
    ()
    >>> soundness_holes("struct H<'a, 'b> { r: &'a H2<'b> }") == (IMPLIED_BOUNDS,)
    True
    >>> soundness_holes("fn op<'a, 'b>(w: &'a [T<'b>]) -> &'a [T<'b>] { w } fn f() { g(op); }") == (IMPLIED_BOUNDS,)
    True
    """
    found: set[str] = set()
    called_only: set[str] = set()  # fns with the shape in their signature: a hole only where used as a value
    tree = Parser(_RUST).parse(source.encode())
    stack = [(tree.root_node, frozenset())]
    while stack:
        node, params = stack.pop()
        if node.type in _ITEMS:
            generics = node.child_by_field_name("type_parameters")
            if generics is not None:
                params = params | {c.text.decode() for c in _descendants(generics) if c.type == "type_identifier"
                                   and c.parent is not None and c.parent.type in ("type_parameter",
                                                                                  "constrained_type_parameter")}
        if node.type == "reference_type" and _implied_bound(node):
            signature_of = _signature_fn(node)
            if signature_of is None:
                found.add(IMPLIED_BOUNDS)
            else:
                called_only.add(signature_of)
        elif (node.type == "function_type" and any(c.type == "fn" for c in node.children)  # not `Fn(A) -> B`
              and _variant_fn_pointer(node, params)):
            found.add(FN_POINTER_LIFETIMES)
        stack.extend((child, params) for child in node.children)
    if called_only and _used_as_values(tree.root_node, called_only):
        found.add(IMPLIED_BOUNDS)
    tokens = tokenize(source) if tokens is None else tokens
    pairs = _bracket_pairs(tokens)
    if any(t.text == "impl" and i + 1 < len(tokens) and tokens[i + 1].text == "<" and _blanket_unsized(tokens, pairs, i)
           for i, t in enumerate(tokens)):
        found.add(BLANKET_ASSOCIATED)
    return tuple(f for f in FAMILIES if f in found)


def _descendants(node: Node) -> list[Node]:
    out, stack = [], list(node.children)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.children)
    return out


def _name(lifetime: Node) -> str:
    return lifetime.text.decode()


def _implied_bound(node: Node) -> bool:
    """``&'a T`` where ``T`` holds a named lifetime other than ``'a`` (``'_`` is no name)."""
    own = next((c for c in node.children if c.type == "lifetime"), None)
    target = node.child_by_field_name("type")
    if own is None or target is None:
        return False
    inner = {_name(n) for n in [target, *_descendants(target)] if n.type == "lifetime"} - {"'_"}
    return bool(inner - {_name(own)})


_SIGNATURE_PARTS = frozenset({"parameters", "parameter", "self_parameter", "reference_type", "generic_type",
                              "type_arguments", "array_type", "tuple_type", "pointer_type", "scoped_type_identifier"})
"""What lies between a fn's signature and a type in one of its parameters or its return type (no fn pointer, ``Fn``
bound, closure, ``dyn``/``impl`` type or where clause: there an implied bound can be lost without the fn)."""


def _signature_fn(node: Node) -> str | None:
    """The name of the fn whose parameter or return type ``node`` is part of (through plain type constructors
    only), else None."""
    child, parent = node, node.parent
    while parent is not None and parent.type in _SIGNATURE_PARTS:
        child, parent = parent, parent.parent
    if parent is None or parent.type not in ("function_item", "function_signature_item"):
        return None
    if child.type != "parameters" and parent.child_by_field_name("return_type") != child:
        return None
    name = parent.child_by_field_name("name")
    return name.text.decode() if name is not None else None


def _used_as_values(root: Node, names: set[str]) -> bool:
    """Whether one of the fns ``names`` appears other than where it is defined or called: coerced to a fn pointer,
    passed as a value, named in a macro's arguments (rust-lang/rust#25860 loses the implied bound in that
    coercion; a fn only ever called keeps it)."""
    for node in _descendants(root):
        if node.type != "identifier" or node.text.decode() not in names:
            continue
        parent = node.parent
        if parent is not None and parent.type in ("function_item", "function_signature_item") \
                and parent.child_by_field_name("name") == node:
            continue
        callee = parent if parent is not None and parent.type == "scoped_identifier" \
            and parent.child_by_field_name("name") == node else node
        holder = callee.parent
        if holder is not None and holder.type == "generic_function":
            callee, holder = holder, holder.parent
        if holder is not None and holder.type == "call_expression" and holder.child_by_field_name("function") == callee:
            continue
        after = node.next_sibling
        if parent is not None and parent.type == "token_tree" and after is not None and after.type == "token_tree" \
                and after.text.startswith(b"("):
            continue
        return True
    return False


def _variant_fn_pointer(node: Node, params: frozenset[str]) -> bool:
    """A fn pointer type holding a lifetime, ``_``, a ``for<...>`` binder or a type parameter in scope."""
    for n in _descendants(node):
        if n.type in ("lifetime", "for_lifetimes") or (n.type == "_" and n.parent is not None
                                                        and n.parent.type != "parameter"):
            return True
        if n.type == "type_identifier" and (n.text.decode() in params or n.text == b"_"):
            return True
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
