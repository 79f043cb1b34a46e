"""All static facts the rewards need about one completion's code (``analyse``): its size, test functions,
meaningful and trivial assertions, and the static rules' reasons (``rust.rules``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rust_rewards.report import SourceFacts
from rust_rewards.rust.lexer import (
    _OPEN,
    ASSERT_MACROS,
    Item,
    Token,
    _match_close,
    solution_names,
    test_regions,
    tokenize,
)
from rust_rewards.rust.rules import (
    cfg_test_reasons,
    clippy_view_reasons,
    copied_solution,
    forbidden_calls,
    macro_definitions,
    observing_tests,
)
from rust_rewards.rust.soundness import soundness_holes


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


def analyse(code: str, required: frozenset[str] | None = None, files_shared: bool = True) -> SourceFacts:
    """All static facts the rewards need about one completion's code: hack reasons in ``forbidden``, doubts
    about the own tests alone in ``test_doubts`` (``required``: the names the task requires, for
    ``rules.cfg_test_reasons``; None when the task names none; ``files_shared``: whether test runs share
    writable files, ``rules.observing_tests``).

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
    cfg_hacks, cfg_doubts = cfg_test_reasons(tokens, regions, required)
    return SourceFacts(
        code_lines=sum(1 for line in _strip_comments(code).splitlines() if line.strip()),
        test_fns=tuple(fn.name for fn in regions.test_fns),
        assertions=total,
        meaningful_assertions=tuple(meaningful),
        trivial_assertions=trivial,
        tests_calling_solution=calling,
        forbidden=tuple(sorted(forbidden_calls(tokens, regions) + cfg_hacks + soundness_holes(code, tokens)
                               + macro_definitions(tokens) + clippy_view_reasons(tokens))),
        test_doubts=tuple(sorted(cfg_doubts + observing_tests(tokens, regions, files_shared)
                                 + copied_solution(tokens, regions))),
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
