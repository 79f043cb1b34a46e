"""Mutants: single-token variants of a solution's fn bodies, and whether the bundled hidden tests kill them."""

from __future__ import annotations

import dataclasses
import json
import random
import time

import pytest
from conftest import ROOT

from rust_rewards.rust.mutants import mutants

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"


def changes(code: str, limit: int = 50) -> list[tuple[str, str]]:
    """(old, new) text of each mutant's single edit, in order, widened to whole operators and words."""
    out = []
    for m in mutants(code, limit):
        p = 0
        while p < min(len(code), len(m)) and code[p] == m[p]:
            p += 1
        s = 0
        while s < min(len(code), len(m)) - p and code[-1 - s] == m[-1 - s]:
            s += 1
        while p > 0 and _same_class(code[p - 1], code[p : len(code) - s] + m[p : len(m) - s]):
            p -= 1
        while s > 0 and _same_class(code[-s], code[p : len(code) - s] + m[p : len(m) - s]):
            s -= 1
        out.append((code[p : len(code) - s], m[p : len(m) - s]))
    return out


def _same_class(c: str, changed: str) -> bool:
    word = c.isalnum() or c == "_"
    return any((d.isalnum() or d == "_") == word for d in changed) and (word or c in "=<>!&|+-*/%")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("a == b", "a != b"), ("a != b", "a == b"), ("a < b", "a <= b"), ("a <= b", "a < b"),
        ("a > b", "a >= b"), ("a >= b", "a > b"), ("a && b", "a || b"), ("a || b", "a && b"),
        ("a + b", "a - b"), ("a - b", "a + b"), ("a * b", "a + b"), ("a / b", "a * b"), ("a % b", "a / b"),
    ],
)
def test_binary_operators(body, expected):
    code = f"fn f(a: u32, b: u32) -> u32 {{ g({body}) }}"
    assert mutants(code) == [code.replace(body, expected)]


def test_compound_assignment_booleans_and_integers():
    code = "fn f(mut x: u64) -> u64 { x += 2; x -= 1usize as u64; let t = true; if !t || false { 0 } else { x } }"
    assert changes(code) == [
        ("true", "false"), ("||", "&&"), ("false", "true"), ("+=", "-="), ("-=", "+="),
        ("2", "3"), ("1usize", "0usize"), ("0", "1"),
    ]


def test_method_swaps_and_rev():
    code = "fn f(v: &[u8], s: &str) -> u8 { s.chars().rev().next(); v.iter().copied().max(); v.iter().last() }"
    head = "fn f(v: &[u8], s: &str) -> u8 { "
    assert mutants(code) == [
        head + "s.chars().next(); v.iter().copied().max(); v.iter().last() }",
        head + "s.chars().rev().next(); v.iter().copied().min(); v.iter().last() }",
        head + "s.chars().rev().next(); v.iter().copied().max(); v.iter().rev().last() }",
    ]
    code = "fn f() -> char { std::mem::take(&mut x); char::to_lowercase('a') }"
    assert changes(code) == [("to_lowercase", "to_uppercase")]


def test_likely_equivalent_or_ill_typed_method_mutants_are_skipped():
    code = (
        "fn f(&mut self, o: Option<u8>, v: &[u8]) -> usize {\n    let w = Vec::with_capacity(v.len() + 1);\n"
        "    o.take(); self.checked_add(o); v.iter().map(|x| x).sum::<usize>() + v.iter().count()\n}"
    )
    assert changes(code) == [("+", "-")]


def test_signatures_generics_types_and_literals_are_untouched():
    sig = "pub fn f<T: Ord + Clone, const N: usize>(v: Vec<T>, a: [u8; 4]) -> Option<T> where T: Into<u8>"
    code = sig + ' { let s = "a == b < c"; let c = \'<\'; let t: [u8; 4] = [0u8; 4]; v.len() > 1 && s == "x" }'
    ms = mutants(code, 50)
    assert ms and all(m.startswith(sig + ' { let s = "a == b < c"; let c = \'<\'; let t: [u8; 4] = [') for m in ms)
    assert changes(code) == [("==", "!="), ("&&", "||"), (">", ">="), ("0u8", "1u8"), ("1", "0")]


def test_not_binary_operators_are_untouched():
    code = (
        "fn f(v: &[&u8], x: &mut i32, p: (u8, u8)) -> Box<dyn Fn() -> u8 + 'static> {\n"
        "    let w: Vec<Vec<u8>> = Vec::<u8>::new();\n    v.iter().filter(|&&y| **y > 0);\n    *x = -1;\n"
        "    let q = p.0; let s = x<<2; let t = x >> 1; let u = a>=b; let z = move || 3;\n"
        "    debug_assert!(q < 2, \"{}\", 1 + 1);\n    #[allow(unused)] const K: u8 = 1 + 2;\n"
        "    static S: [u8; 2] = [1, 2];\n    for i in 0..=9 { }\n    Box::new(|| 5)\n}"
    )
    assert changes(code) == [
        (">", ">="), ("filter", "rev().filter"), ("0", "1"), ("1", "0"), ("2", "3"), ("1", "0"), ("3", "4"),
        ("0", "1"), ("9", "10"), ("5", "6"),
    ]


def test_match_arm_booleans_are_untouched():
    code = "fn f(a: bool, b: bool) -> u8 { match (a, b) { (true, false) => 1, (x, true) | (x, false) => 2 } }"
    assert changes(code) == [("1", "0"), ("2", "3")]
    assert changes("fn f(a: bool) -> u8 { match a { true => 1, false => 0 } }") == [("1", "0"), ("0", "1")]


def test_test_code_is_stripped_and_never_mutated():
    code = (
        "pub fn f(x: i32) -> bool { x == 1 }\n#[test]\nfn t() { assert!(f(1) == true); }\n"
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn u() { assert!(2 > 1); }\n}\n"
    )
    ms = mutants(code)
    assert ms == ["pub fn f(x: i32) -> bool { x != 1 }\n\n\n", "pub fn f(x: i32) -> bool { x == 0 }\n\n\n"]


def test_items_outside_fn_bodies_are_untouched():
    code = (
        "const N: usize = 3 + 1;\nstatic S: bool = true;\n#[derive(Debug)]\npub struct P([u8; 2]);\n"
        "pub enum E { A = 1 }\nimpl P {\n    const Z: u8 = 0;\n    pub fn g(&self) -> bool { self.0[0] < 2 }\n}\n"
        "pub trait T { fn d(&self) -> u8 { 7 } fn r(&self) -> u8; }\n"
    )
    assert changes(code) == [("<", "<="), ("0", "1"), ("2", "3"), ("7", "8")]


def test_order_main_last_dedup_limit_and_determinism():
    code = "fn main() { let _ = 1 == 2; }\nfn f(a: i32) -> bool { a + 1 > 0 && a - 1 < 5 }\n"
    assert changes(code) == [
        ("&&", "||"), (">", ">="), ("<", "<="), ("+", "-"), ("-", "+"), ("1", "0"), ("0", "1"), ("1", "0"),
        ("5", "6"), ("==", "!="), ("1", "0"), ("2", "3"),
    ]
    assert mutants(code, 3) == mutants(code)[:3]
    assert mutants(code, 0) == []
    assert mutants(code) == mutants(code)
    ms = mutants(code, 100)
    assert len(set(ms)) == len(ms) and code not in ms


@pytest.mark.parametrize(
    "code",
    ["", "fn", "fn f(", "fn f() { a == b", "fn f() { a == b }}", "fn f() { (] }", 'fn f() { "a == b }',
     "fn f() { /* a == b }", "\x00\xff", "fn f() { 99999999999999999999999999 + x }", "#[", "fn f() -> { '"],
)
def test_malformed_input_gives_a_list_and_never_raises(code):
    result = mutants(code)
    assert isinstance(result, list) and code not in result


def test_random_fragments_never_raise():
    rng = random.Random(0)
    codes = [json.loads(line)["reference_code"] for line in BUNDLED.read_text().splitlines()]
    for _ in range(300):
        code = rng.choice(codes)
        a, b = sorted(rng.randrange(len(code) + 1) for _ in range(2))
        for m in mutants(code[a:b]):
            assert m != code[a:b]


def load_rows() -> list[dict]:
    return [json.loads(line) for line in BUNDLED.read_text(encoding="utf-8").splitlines()]


def test_every_bundled_task_has_mutants():
    empty = [row["task_id"] for row in load_rows() if not mutants(row["reference_code"])]
    assert not empty, f"no mutants for {empty}"


@pytest.mark.slow
def test_hidden_tests_kill_one_of_the_first_six_mutants_of_nine_in_ten_tasks():
    """Verify mutant k of every task not yet killed, k = 0..5: a kill builds and fails a hidden test. As the
    wrong-variant search verifies its candidates: against ``reference.tests_alone`` (a kill is a failed assertion;
    no reference runs)."""
    from rust_rewards.tasks import Task
    from rust_rewards.verify.config import VerifierConfig
    from rust_rewards.verify.reference import SEARCH_TEST_SECONDS, tests_alone
    from rust_rewards.verify.sandbox import RUN_LIMITS
    from rust_rewards.verify.verifier import Verifier

    tasks = [Task.from_row(row) for row in load_rows()]
    plain = {t.task_id: tests_alone(t.hidden_tests()) for t in tasks}
    candidates = {t.task_id: mutants(t.reference_code, 6) for t in tasks}
    killed: dict[str, int] = {}
    not_built = survived = verified = 0
    started = time.monotonic()
    # batch mode gives the same verdicts sooner; tests limited as the wrong-variant search limits them
    quick = dataclasses.replace(RUN_LIMITS, wall_seconds=SEARCH_TEST_SECONDS, cpu_seconds=int(SEARCH_TEST_SECONDS))
    verifier = Verifier(VerifierConfig(mode="batch", run_limits=quick), workers=2)
    try:
        for k in range(6):
            batch = [t for t in tasks if t.task_id not in killed and len(candidates[t.task_id]) > k]
            if not batch:
                break
            reports = verifier.verify_many([candidates[t.task_id][k] for t in batch],
                                           [plain[t.task_id] for t in batch], raw_code=True)
            verified += len(batch)
            for t, r in zip(batch, reports, strict=True):
                assert r.hidden_tests is not None and r.hidden_tests.expected > 0, (t.task_id, r.diagnostics[:500])
                if not r.build_ok:
                    not_built += 1
                elif r.hidden_fraction < 1.0:
                    killed[t.task_id] = k
                else:
                    survived += 1
    finally:
        verifier.close()
    elapsed = time.monotonic() - started
    rate = len(killed) / len(tasks)
    missed = [t.task_id for t in tasks if t.task_id not in killed]
    first = [list(killed.values()).count(k) for k in range(6)]
    print(f"\nkilled {len(killed)}/{len(tasks)} tasks ({rate:.1%}) within the first 6 mutants; {verified} mutants "
          f"verified in {elapsed:.0f}s ({not_built} did not build, {survived} survived); tasks first killed by "
          f"mutant 0..5: {first}; no kill: {missed}")
    assert rate >= 0.9, f"only {rate:.1%} of tasks killed; no kill: {missed}"
