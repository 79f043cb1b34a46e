"""Batch mode (``rust_rewards.verify.batch``): completions verified together in one crate get exactly the reports
they get alone, whatever their neighbours; everything that could differ falls back to the direct path."""

from __future__ import annotations

import dataclasses
import random
import re
import tempfile
from pathlib import Path

import pytest
from conftest import ADVERSARIAL, ROOT

from rust_rewards.report import Report
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.batch import blocker, verify_batch
from rust_rewards.verify.bench import DEFAULT_CORPUS, grpo_batch, load_corpus
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.sandbox import Limits
from rust_rewards.verify.verifier import Verifier

RUN = Limits(wall_seconds=3, cpu_seconds=3, memory_mb=2048, file_size_mb=64, processes=32)
SLOW_HONEST = "ok_slow_prime_count.md"
COMPILE = Limits(wall_seconds=2.5, cpu_seconds=30, memory_mb=4096, file_size_mb=512, processes=64)
"""Short enough that the compile-time blow-ups always time out (their own errors come after 30 s and more)."""

ADD_TESTS = HiddenTests("#[test]\nfn h1() {\n    assert_eq!(add(2, 3), 5);\n}\n\n#[test]\nfn h2() {\n"
                        "    assert_eq!(add(-1, 1), 0);\n}\n")
STACK_TESTS = HiddenTests("#[test]\nfn push_pop() {\n    let mut s = Stack::new();\n    s.push(1);\n"
                          "    assert_eq!(s.pop(), Some(1));\n}\n")
ADD = "pub fn add(a: i32, b: i32) -> i32 {\n"
OWN = ("\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn own() {\n"
       "        assert_eq!(add(1, 2), 3);\n    }\n}\n")
STACK = """pub struct Stack {
    items: Vec<i32>,
}

impl Stack {
    pub fn new() -> Self {
        Stack { items: Vec::new() }
    }
    pub fn push(&mut self, x: i32) {
        self.items.push(x);
    }
    pub fn pop(&mut self) -> Option<i32> {
        self.items.pop()
    }
}
"""

MIXED: dict[str, tuple[str, HiddenTests | None]] = {
    "right": (ADD + "    a + b\n}\n" + OWN, ADD_TESTS),
    "right_again": ("pub fn add(x: i32, y: i32) -> i32 {\n    y + x\n}\n" + OWN, ADD_TESTS),
    "wrong": (ADD + "    a - b\n}\n" + OWN, ADD_TESTS),
    "warnings": (ADD + "    let unused = 1;\n    return a + b;\n}\n" + OWN,
                 ADD_TESTS),
    "deny_lint": (ADD + "    if a == a { a + b } else { 0 }\n}\n" + OWN, ADD_TESTS),
    "panics": (ADD + "    if a == 2 { panic!(\"boom\") }\n    a + b\n}\n" + OWN,
               ADD_TESTS),
    "loops": (ADD + "    if a == 2 { loop {} }\n    a + b\n}\n", ADD_TESTS),
    "allocates": (ADD + "    let v = vec![1u8; 1 << 34];\n    a + b + v[0] as i32 - 1\n}\n",
                  ADD_TESTS),
    "type_error": (ADD + "    \"three\"\n}\n" + OWN, ADD_TESTS),
    "test_error": (ADD + "    a + b\n}\n" + OWN.replace("add(1, 2)", "add(1)"), ADD_TESTS),
    "hidden_mismatch": ("pub fn add(a: i64) -> i64 {\n    a\n}\n", ADD_TESTS),
    "hidden_mismatch_own": ("pub fn add(a: i64) -> i64 {\n    a\n}\n" + OWN.replace("add(1, 2), 3", "add(3), 3"),
                            ADD_TESTS),
    "hidden_mismatch_own_fails": ("pub fn add(a: i64) -> i64 {\n    a\n}\n" + OWN.replace("add(1, 2), 3", "add(3), 4"),
                                  ADD_TESTS),
    "hidden_mismatch_test_error": ("pub fn add(a: i64) -> i64 {\n    a\n}\n" + OWN, ADD_TESTS),
    "unclosed": (ADD + "    (a + b\n}\n" + OWN, ADD_TESTS),
    "unterminated": (ADD + "    let s = \"oops;\n    a + b\n}\n" + OWN, ADD_TESTS),
    "stack": (STACK, STACK_TESTS),
    "stack_again": (STACK.replace("Vec::new()", "vec![]"), STACK_TESTS),
    "no_tests": ("pub fn double(x: u32) -> u32 {\n    x * 2\n}\n", None),
    "no_tests_lint": ("pub fn is_empty(v: &Vec<u8>) -> bool {\n    v.len() == 0\n}\n", None),
    "inner_attribute": ("#![allow(dead_code)]\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n", ADD_TESTS),
    "extern_crate": ("extern crate core;\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n", ADD_TESTS),
    "exported_macro": ("#[macro_export]\nmacro_rules! two { () => { 2 } }\npub fn add(a: i32, b: i32) -> i32 {\n"
                       "    a + b\n}\n", ADD_TESTS),
    "main_shape": (ADD + "    a + b\n}\n",
                   HiddenTests("fn main() {\n    assert_eq!(add(2, 3), 5);\n}\n", shape="main")),
    "fn_main": (ADD + "    a + b\n}\nfn main() {}\n", ADD_TESTS),
    "crate_path": (ADD + "    crate::inner(a) + b\n}\nfn inner(a: i32) -> i32 {\n    a\n}\n",
                   ADD_TESTS),
    "super_out": ("mod m {\n    pub fn f() -> i32 {\n        super::super::x()\n    }\n}\n" + ADD + "    a + b\n}\n",
                  ADD_TESTS),
    "foreign_impl": ("pub struct W(i32);\nimpl From<W> for i32 {\n    fn from(w: W) -> i32 {\n        w.0\n    }\n}\n"
                     + ADD + "    i32::from(W(a)) + b\n}\n", ADD_TESTS),
    "introspection": (ADD + "    assert!(!std::any::type_name::<i32>().is_empty());\n"
                      "    a + b\n}\n", ADD_TESTS),
    "exits": (ADD + "    if a == 2 { std::process::exit(0) }\n    a + b\n}\n", ADD_TESTS),
    "integration": (ADD + "    a + b\n}\n",
                    HiddenTests("use solution::*;\n\n#[test]\nfn h() {\n    assert_eq!(add(2, 3), 5);\n}\n",
                                shape="integration")),
    "release": (ADD + "    a + b\n}\n", dataclasses.replace(ADD_TESTS, release=True)),
    "edition_2018": (ADD + "    a + b\n}\n" + OWN,
                     dataclasses.replace(ADD_TESTS, edition="2018")),
    "empty": ("", ADD_TESTS),
}
"""Every fallback case and every kind of verdict, most of them answering the same two prompts."""
SHARED = {"right", "right_again", "wrong", "warnings", "deny_lint", "panics", "loops", "allocates", "stack",
          "stack_again", "no_tests", "no_tests_lint", "edition_2018", "hidden_mismatch_own",
          "hidden_mismatch_own_fails"}
"""Cases that may share a crate and compile (the rest fall back, up front or after a combined compile)."""


def _config(mode: str) -> VerifierConfig:
    return VerifierConfig(mode=mode, run_limits=RUN, compile_limits=COMPILE)


def _normalised(report: Report) -> dict:
    """Everything a report says but timings, cache key, mode, libtest's timings, hidden module names."""
    data = dataclasses.asdict(report)
    for key in ("durations", "code_hash", "mode"):
        data.pop(key)
    data["test_output"] = re.sub(r"finished in [\d.]+s", "", report.test_output)
    for key in ("test_output", "diagnostics"):
        data[key] = re.sub(r"__rr_(hidden|variant)_[0-9a-f]{16}", r"__rr_\1_H", data[key])
    return data


def _verify(mode: str, cases: dict[str, tuple[str, HiddenTests | None]], workers: int = 2) -> dict[str, Report]:
    verifier = Verifier(_config(mode), workers=workers)
    codes, hidden = zip(*cases.values(), strict=True)
    reports = verifier.verify_many(list(codes), list(hidden), raw_code=True)
    verifier.close()
    return dict(zip(cases, reports, strict=True))


@pytest.fixture(scope="module")
def alone() -> dict[str, Report]:
    """The reference: each mixed case verified on its own (direct path)."""
    return _verify("direct", MIXED)


def test_blockers_name_every_unsafe_case():
    blocked = {name: blocker(code, hidden) for name, (code, hidden) in MIXED.items()}
    assert {name for name, reason in blocked.items() if reason is None} == SHARED | {
        "type_error", "test_error", "hidden_mismatch", "hidden_mismatch_test_error", "unclosed", "unterminated"}
    assert blocked["crate_path"] == "crate path" and blocked["super_out"] == "super path out of its module"
    assert blocked["foreign_impl"] == "trait impl for a type it does not define"
    assert blocked["main_shape"] == "main-shaped hidden tests" and blocked["fn_main"] == "fn main"
    assert blocked["introspection"] == "run-time introspection" and blocked["exits"] == "banned construct"
    assert blocked["release"] == "release profile"


@pytest.mark.slow
@pytest.mark.parametrize("own_first", [False, True])
def test_mixed_batch_matches_each_completion_alone(alone, own_first):
    result = verify_batch([MIXED[name] for name in MIXED], _config("batch"), own_first=own_first)
    for name, report in zip(MIXED, result.reports, strict=True):
        assert _normalised(report) == _normalised(alone[name]), name
    assert result.combined == len(SHARED) - 1  # the 2018 case is alone in its group
    if own_first:  # the code that does not build is settled by its own first pass; test code errors fall back
        assert result.settled == 3 and result.fallbacks["compile error"] == 2 and not result.fallbacks["syntax error"]
        assert result.fallbacks["alone"] == 1 and result.fallbacks["hidden tests do not compile"] == 1
        return
    assert result.fallbacks["compile error"] == 3 and result.fallbacks["alone"] == 1
    assert result.fallbacks["hidden tests do not compile"] == 1  # no tests of its own: its report names the errors
    own = result.reports[list(MIXED).index("hidden_mismatch_own")]
    assert own.own_tests.passed == 1 and own.hidden_tests.expected == 2 and not own.hidden_tests.passed
    assert own.build_ok and not own.error_codes
    fails = result.reports[list(MIXED).index("hidden_mismatch_own_fails")]
    assert fails.own_tests.failed == 1 and not fails.hidden_tests.passed
    assert result.fallbacks["syntax error"] == 2  # rustc stops at the first; rustfmt finds the other
    assert sum(result.fallbacks.values()) == len(MIXED) - 1 - result.combined  # "empty" is not a fallback


@pytest.mark.slow
def test_mixed_batch_matches_cargo_mode(alone):
    batch = _verify("batch", MIXED)
    cargo = _verify("cargo", {k: v for k, v in MIXED.items() if k not in ("loops", "allocates")})
    for name, report in cargo.items():
        assert batch[name].verdict() == report.verdict(), name
    assert batch["loops"].hidden_tests.timed_out and alone["loops"].timed_out == batch["loops"].timed_out
    assert not batch["allocates"].hidden_tests.passed


def test_diagnostics_keep_the_completion_s_own_file_and_lines(alone):
    batch = verify_batch([MIXED["warnings"], MIXED["deny_lint"], MIXED["right"]], _config("batch")).reports
    assert batch[0].diagnostics == alone["warnings"].diagnostics
    assert "src/lib.rs:3:5" in batch[0].diagnostics and "needless_return" in batch[0].clippy_warnings
    assert batch[0].rustc_warnings == alone["warnings"].rustc_warnings > 0
    assert batch[1].clippy_warnings == ("eq_op",) and batch[1].build_ok and not batch[1].clippy_ok


def test_deferred_test_runs_give_the_same_reports_in_any_slot_and_clean_up(alone):
    names = ["right", "wrong", "panics", "stack", "warnings", "type_error"]
    tmp_path = Path(tempfile.mkdtemp(prefix="rr-test-defer-"))  # world-searchable, for the sandbox users
    tmp_path.chmod(0o755)
    config = dataclasses.replace(_config("batch"), workdir=str(tmp_path))
    result = verify_batch([MIXED[name] for name in names], config, slot=0, defer=True)
    assert set(result.runs) == {0, 1, 2, 3, 4} and set(result.deferred) == {5}  # type_error: the direct path
    assert all(result.reports[i] is None for i in result.runs)
    assert list(tmp_path.glob("rr-batch-*"))  # the compiled crate waits for its runs
    for index, run in sorted(result.runs.items(), reverse=True):
        assert _normalised(run(slot=1 + index % 2)) == _normalised(alone[names[index]]), names[index]
    assert not list(tmp_path.glob("rr-batch-*"))  # removed by the last run
    tmp_path.rmdir()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])  # own_first on (odd) and off (even)
def test_report_does_not_depend_on_the_neighbours(alone, seed):
    rng = random.Random(seed)
    pool = sorted(set(MIXED) - {"loops"})
    members = rng.sample(pool, rng.randint(3, len(pool)))
    result = verify_batch([MIXED[name] for name in members], _config("batch"), own_first=bool(seed % 2))
    for name, report in zip(members, result.reports, strict=True):
        assert _normalised(report) == _normalised(alone[name]), (seed, name)


@pytest.mark.slow
def test_benchmark_corpus_matches_direct_and_cargo():
    # SLOW_HONEST's 1.35 s test would race RUN's 3 s on a loaded machine (the bench compares its verdicts)
    corpus = {name: (extract_rust(text), None) for name, text in load_corpus(DEFAULT_CORPUS) if name != SLOW_HONEST}
    batch, direct, cargo = (_verify(mode, corpus) for mode in ("batch", "direct", "cargo"))
    own_first = verify_batch(list(corpus.values()), _config("batch"), own_first=True)
    for name, first in zip(corpus, own_first.reports, strict=True):
        assert _normalised(batch[name]) == _normalised(direct[name]), name
        assert _normalised(first) == _normalised(direct[name]), name
        assert batch[name].verdict() == cargo[name].verdict(), name
    assert own_first.combined == 20 and own_first.settled == 4  # the fifth compile error is in its test code
    reports = list(direct.values())  # the corpus has every kind of verdict the modes must agree on
    assert any(not r.build_ok for r in reports) and any(r.tests_ok for r in reports)
    assert any(r.build_ok and not r.clippy_ok for r in reports)


@pytest.mark.slow
def test_adversarial_corpus_matches_direct():
    cases = {}
    for path in sorted(ADVERSARIAL.glob("*.rs")):
        text = re.sub(r"\{(PORT|SECRET_VALUE|SECRET|CANARY)\}", "9", path.read_text())
        cases[path.stem] = (text, None)
    for path in sorted((ADVERSARIAL / "forgery").glob("*.rs")):
        text = path.read_text()
        shape = re.match(r"// hidden: (\w+)", text).group(1)
        cases[f"forgery/{path.stem}"] = (text, HiddenTests((ADVERSARIAL / "forgery" / "hidden" / f"{shape}.rs")
                                                           .read_text(), shape=shape))
    batch, direct = _verify("batch", cases), _verify("direct", cases)
    for name, (code, hidden) in cases.items():
        if blocker(code, hidden) is None:
            assert _normalised(batch[name]) == _normalised(direct[name]), name
        else:  # both took the direct path: only what a test prints (pids, timings) may differ between two runs
            assert batch[name].verdict() == direct[name].verdict(), name


@pytest.mark.parametrize("adaptive", [True, False])
def test_batches_that_mostly_do_not_build_get_their_own_first_passes(adaptive):
    verifier = Verifier(_config("batch"), workers=2, adaptive=adaptive)
    for k in range(3):
        codes = [f"{ADD}    a + {k}{i}\n" for i in range(4)]  # unclosed braces
        reports = verifier.verify_many(codes, [ADD_TESTS] * 4, raw_code=True)
        assert all(r.has_code and not r.build_ok and r.hidden_tests.expected == 2 for r in reports)
    verifier.close()
    # The first batch shares a clippy pass (it fails: all 4 go one by one); then the next two
    # get their own first passes in each share's one sandbox call, which settle them.
    assert verifier.stats["own_first_shares"] == (4 if adaptive else 0)
    assert verifier.stats["settled"] == (8 if adaptive else 0)
    assert sum(verifier.fallback_reasons.values()) == (4 if adaptive else 12)


def test_verifier_batch_mode_caches_and_counts():
    verifier = Verifier(_config("batch"), workers=2)
    texts = [text for _name, text in grpo_batch(load_corpus(DEFAULT_CORPUS), prompts=2, group=8)]
    first = verifier.verify_many(texts)
    again = verifier.verify_many(texts)
    verifier.close()
    assert [r.verdict() for r in first] == [r.verdict() for r in again]
    assert verifier.stats["verified"] == len(set(texts))
    assert verifier.stats["combined"] + verifier.stats["fallback"] == len(set(texts))
    assert verifier.stats["combined"] > 0


def test_train_py_picks_the_verifier_mode():
    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.resolve import resolve_params
    from rust_rewards.verify.verifier import configure_verifier, get_verifier, verifier_for

    with pytest.raises(ValueError, match="--verifier-mode: expected one of"):
        resolve_params(params_from_mapping({"verifier-mode": "fastest"}))
    assert resolve_params(params_from_mapping({"verifier-mode": "batch"})).verifier_mode == "batch"
    try:
        batch = verifier_for(mode="batch")
        assert batch.config.mode == "batch" and get_verifier() is batch and verifier_for() is batch
        assert verifier_for(mode="direct").config.mode == "direct"
    finally:
        configure_verifier()


def test_exemplar_tasks_of_the_training_benchmark_are_solved_by_their_references(tmp_path):
    """benchmarks/batch_training.py --tasks exemplar: valid task rows whose references pass their hidden tests."""
    import importlib.util

    from rust_rewards.data.importers import load_file

    path = ROOT / "benchmarks" / "batch_training.py"
    spec = importlib.util.spec_from_file_location("batch_training", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    (tmp_path / "tasks.jsonl").write_text(bench.exemplar_tasks())
    tasks = load_file(tmp_path / "tasks.jsonl")
    verifier = Verifier(_config("direct"), workers=2)
    reports = verifier.verify_many([t.reference_code for t in tasks], [t.hidden_tests() for t in tasks],
                                   raw_code=True)
    verifier.close()
    assert len(tasks) == 6 and all(r.hidden_ok and r.clippy_ok for r in reports)
