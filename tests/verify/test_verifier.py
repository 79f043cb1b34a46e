"""The verifier with real cargo: extraction, both modes' agreement, hidden-test shapes, cache, rewards, CLI."""

import asyncio
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from rust_rewards.rewards import functions as rewards
from rust_rewards.rust.extract import extract_rust
from rust_rewards.rust.facts import analyse
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.batch import blocker
from rust_rewards.verify.bench import DEFAULT_CORPUS, grpo_batch, load_corpus, naive_verdict, report_verdict
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier

FENCE = "```"


def rust(code: str) -> str:
    return f"Here you go:\n{FENCE}rust\n{code}\n{FENCE}\n"


SQUARE = "pub fn square(x: i64) -> i64 {\n    x * x\n}\n"
SQUARE_TESTS = """
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small() {
        assert_eq!(square(3), 9);
    }

    #[test]
    fn negative() {
        assert_eq!(square(-4), 16);
    }
}
"""
HIDDEN_UNIT = (
    "#[test]\nfn hidden_one() { assert_eq!(square(5), 25); }\n"
    "#[test]\n#[ignore]\nfn hidden_two() { assert_eq!(square(0), 0); }\n"
)
HIDDEN_MODULE = (
    "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn nested() { assert_eq!(square(3), 9); }\n}\n"
)
HIDDEN_INTEGRATION = "use solution::*;\n\n#[test]\nfn integ() { assert_eq!(square(7), 49); }\n"
HIDDEN_MAIN = "fn main() {\n    let candidate = square;\n    assert_eq!(candidate(6), 36);\n}\n"




@pytest.fixture(scope="module")
def cargo_verifier():
    v = Verifier(VerifierConfig(mode="cargo"))
    yield v
    v.close()


# ---- extraction ----------------------------------------------------------------------------------------------

def test_extract_concatenates_rust_blocks_and_ignores_prose():
    text = (f"Intro `fn x()`\n{FENCE}rust\nfn a() {{}}\n{FENCE}\nmiddle\n{FENCE}python\nprint(1)\n{FENCE}\n"
            f"{FENCE}rs\nfn b() {{}}\n{FENCE}")
    assert extract_rust(text) == "fn a() {}\n\nfn b() {}"


def test_extract_no_block_means_no_code():
    assert extract_rust("pub fn a() -> i32 { 1 }") == ""
    assert extract_rust(f"{FENCE}\nfn a() {{}}\n{FENCE}") == ""


def test_extract_unclosed_fence_and_messages():
    assert extract_rust(f"{FENCE}rust\nfn a() {{}}\n") == "fn a() {}"
    assert extract_rust([{"role": "assistant", "content": rust("fn c() {}")}]) == "fn c() {}"


def test_no_code_report(verifier):
    report = verifier.verify("I cannot help with that.")
    assert not report.has_code and not report.build_ok
    assert rewards.rewards_from_report(report)["build_reward"] == 0.0


# ---- source analysis -----------------------------------------------------------------------------------------

def test_every_test_fn_counts_and_trivial_asserts_earn_nothing():
    facts = analyse(SQUARE + SQUARE_TESTS + "\n#[test]\nfn trivial() { assert!(true); assert_eq!(2, 2); }\n")
    assert facts.test_fns == ("small", "negative", "trivial")
    assert len(facts.meaningful_assertions) == 2
    assert facts.trivial_assertions == 2
    assert facts.tests_calling_solution == 2


def test_assert_through_let_binding_is_meaningful():
    facts = analyse(SQUARE + "#[test]\nfn t() { let r = square(2); assert_eq!(r, 4); }\n")
    assert len(facts.meaningful_assertions) == 1


# ---- verdicts ------------------------------------------------------------------------------------------------

def test_passing_completion(verifier):
    report = verifier.verify(rust(SQUARE + SQUARE_TESTS))
    assert report.build_ok and report.clippy_ok and report.tests_ok
    assert (report.own_tests.passed, report.own_tests.failed) == (2, 0)
    assert rewards.rewards_from_report(report) == {
        "build_reward": 1.0, "clippy_reward": 1.0, "test_reward": 2.0, "non_empty_reward": 1.0,
        "test_block_reward": 0.5, "format_reward": 1.0, "assertion_reward": 0.5, "hidden_test_reward": None,
    }


def test_compile_error_codes(verifier):
    report = verifier.verify(rust("pub fn f() -> i32 { \"no\" }"))
    assert not report.build_ok and "E0308" in report.error_codes
    assert "mismatched types" in report.diagnostics


def test_clippy_warning_is_not_a_build_error(verifier):
    report = verifier.verify(rust("pub fn n(v: &Vec<i32>) -> usize { return v.len(); }"))
    assert report.build_ok and not report.clippy_ok
    assert set(report.clippy_warnings) == {"ptr_arg", "needless_return"}


def test_zero_tests_is_not_passing(verifier):
    report = verifier.verify(rust(SQUARE))
    assert report.build_ok and not report.tests_ok
    assert rewards.rewards_from_report(report)["test_reward"] == 0.0


def test_model_main_does_not_break_library(verifier):
    report = verifier.verify(rust(SQUARE + "fn main() { println!(\"{}\", square(2)); }\n" + SQUARE_TESTS))
    assert report.build_ok and report.tests_ok


def test_trivial_tests_earn_no_test_reward(verifier):
    code = SQUARE + "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { assert!(true); assert_eq!(2, 2); }\n}\n"
    report = verifier.verify(rust(code))
    assert report.tests_ok
    scores = rewards.rewards_from_report(report)
    assert scores["test_reward"] == 0.0 and scores["assertion_reward"] == 0.0


@pytest.mark.parametrize("text,shape", [
    (HIDDEN_UNIT, "unit"), (HIDDEN_MODULE, "unit"), (HIDDEN_INTEGRATION, "integration"), (HIDDEN_MAIN, "main"),
])
def test_hidden_shapes_in_both_modes(verifier, cargo_verifier, text, shape):
    hidden = HiddenTests(text, shape=shape)
    expected = {"unit": 2, "integration": 1, "main": 1}[shape] if text != HIDDEN_MODULE else 1
    for v in (verifier, cargo_verifier):
        good = v.verify(rust(SQUARE + SQUARE_TESTS), hidden)
        assert good.hidden_ok, (v.config.mode, good.test_output)
        assert good.hidden_tests.passed == expected and good.own_tests.passed == 2
        bad = v.verify(rust("pub fn square(x: i64) -> i64 {\n    x + x\n}\n"), hidden)
        assert bad.build_ok and not bad.hidden_ok and bad.hidden_tests.failed >= 1


COUNTING_ALLOCATOR_TESTS = """use solution::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

struct Counter;

unsafe impl GlobalAlloc for Counter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ret = unsafe { System.alloc(layout) };
        if !ret.is_null() {
            ALLOCATED.fetch_add(layout.size(), SeqCst);
        }
        ret
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        ALLOCATED.fetch_sub(layout.size(), SeqCst);
    }
}

#[global_allocator]
static A: Counter = Counter;

#[test]
fn frees_what_it_allocates() {
    let before = ALLOCATED.load(SeqCst);
    drop(squares(1000));
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(before, ALLOCATED.load(SeqCst));
}
"""


def test_leak_tests_see_no_allocation_of_libtests_main_thread(verifier):
    """Exercism's leak tests count every byte the process allocates: libtest's main thread, first blocking on its
    channel while the test runs, allocates too (a correct doubly linked list once lost a hidden test in CI). The
    window here (30 ms, as long as a preemption under load) caught it in about half of the runs without the
    warm-up test; with it, a correct answer passes every time."""
    hidden = HiddenTests(COUNTING_ALLOCATOR_TESTS, shape="integration")
    code = "pub fn squares(n: u64) -> Vec<u64> {\n    (0..n).map(|x| x * x).collect()\n}\n"
    reports = [verifier.verify(rust(f"{code}// run {i}\n"), hidden) for i in range(6)]
    assert [(r.hidden_tests.passed, r.hidden_tests.expected) for r in reports] == [(1, 1)] * 6, [
        r.hidden_tests.failures for r in reports]
    # std linked statically there, as cargo links it: with std shared, this leak did not reach the counter
    leaky = verifier.verify(rust(code.replace("collect()", "collect::<Vec<_>>().leak().to_vec()")), hidden)
    assert leaky.build_ok and leaky.hidden_tests.passed == 0
    unit = HiddenTests(COUNTING_ALLOCATOR_TESTS.replace("use solution::*;", "use super::*;"))
    assert blocker(code, unit) == "a global allocator in the hidden tests"  # batch mode: never beside others


def test_broken_own_tests_do_not_hide_a_correct_solution(verifier):
    code = SQUARE + (
        "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { let s: String = square(2); }\n}\n"
    )
    report = verifier.verify(rust(code), HiddenTests(HIDDEN_UNIT))
    assert report.build_ok and not report.tests_ok
    assert report.hidden_ok and report.hidden_tests.passed == 2


def test_hidden_reward_fraction_and_none_without_tests():
    partial = "pub fn square(x: i64) -> i64 {\n    if x == 0 { 1 } else { x * x }\n}\n"
    out = rewards.hidden_test_reward(
        [rust(partial), rust(SQUARE)], reference_tests=[HIDDEN_UNIT, ""], test_shape=["unit", "none"])
    assert out == [1.0, None]


def test_exit_zero_with_fake_summary_is_not_a_pass(verifier):
    code = SQUARE + """
#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a() { assert_eq!(square(2), 5); }
    #[test]
    fn b() {
        println!("test a ... ok");
        println!("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s");
        std::process::exit(0);
    }
}
"""
    report = verifier.verify(rust(code))
    assert not report.tests_ok
    assert rewards.rewards_from_report(report)["test_reward"] == 0.0


# ---- the modes agree (direct, batch, cargo: test_batch.py) and agree with the naive published way ----------

def test_naive_published_scoring_agrees_on_a_sample():
    corpus = dict(load_corpus(DEFAULT_CORPUS))
    v = Verifier(workers=2)
    for name in ("ok_fizzbuzz.md", "err_borrow.md", "clippy_ptr_arg.md", "test_only_compile_error.md",
                 "debug_overflow.md"):
        assert naive_verdict(corpus[name]) == report_verdict(v.verify(corpus[name])), name
    v.close()


# ---- batching, cache, async ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_grpo_batch_dedups_and_caches():
    corpus = load_corpus(DEFAULT_CORPUS)
    batch = [t for _n, t in grpo_batch(corpus)]
    v = Verifier(workers=2)
    seen = []
    first = v.verify_many(batch, progress=lambda done, total: seen.append((done, total)))
    assert v.stats["verified"] == len(set(batch)) == 24
    assert seen[-1] == (32, 32)
    again = v.verify_many(batch)
    assert v.stats["verified"] == 24
    assert [r.verdict() for r in first] == [r.verdict() for r in again]
    v.close()


def test_async_rewards_share_one_verification():
    completions = [rust(SQUARE + SQUARE_TESTS), rust("pub fn broken( {")]
    from rust_rewards.verify import verifier as verifier_module

    before = verifier_module.get_verifier().stats["verified"]

    async def all_rewards():
        return await asyncio.gather(*(f(completions) for f in rewards.ASYNC_REWARD_FUNCS))

    results = asyncio.run(all_rewards())
    assert verifier_module.get_verifier().stats["verified"] - before <= 2
    assert [fn.__name__ for fn in rewards.ASYNC_REWARD_FUNCS] == [fn.__name__ for fn in rewards.REWARD_FUNCS]
    by_name = dict(zip([f.__name__ for f in rewards.ASYNC_REWARD_FUNCS], results, strict=True))
    assert by_name["build_reward"] == [1.0, 0.0]
    assert by_name["test_reward"] == [2.0, 0.0]


def test_reward_functions_match_report_projections():
    completions = [rust(SQUARE + SQUARE_TESTS), "nothing"]
    for fn in rewards.REWARD_FUNCS:
        values = fn(completions)
        assert len(values) == 2
        assert values[1] in (0.0, None)
    assert set(rewards.DEFAULT_WEIGHTS) | {"format_reward"} == {f.__name__ for f in rewards.REWARD_FUNCS}


# ---- command line and errors ---------------------------------------------------------------------------------

def test_cli_check_prints_one_json_per_file(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text(rust(SQUARE + SQUARE_TESTS))
    bad = tmp_path / "bad.rs"
    bad.write_text("pub fn f() -> i32 { \"x\" }\n")
    out = subprocess.run([sys.executable, "-m", "rust_rewards", "check", str(good), str(bad)],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["path"] for r in records] == [str(good), str(bad)]
    assert records[0]["tests_passed"] == 2 and records[0]["rewards"]["test_reward"] == 2.0
    assert records[1]["build_ok"] is False and records[1]["error_codes"] == ["E0308"]
    for key in ("has_code", "clippy_ok", "clippy_warnings", "tests_failed", "timed_out"):
        assert key in records[0]


def test_missing_toolchain_is_one_clear_message(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}
    f = tmp_path / "x.rs"
    f.write_text("pub fn f() {}\n")
    res = subprocess.run([sys.executable, "-m", "rust_rewards", "check", str(f)], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    assert res.returncode == 2
    assert "rustc was not found" in res.stderr and "rustup" in res.stderr
    assert "Traceback" not in res.stderr


def test_bench_command_prints_ratio_and_agreement(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text(rust(SQUARE + SQUARE_TESTS))
    (corpus / "b.md").write_text(rust("pub fn f() -> i32 { \"x\" }"))
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, "-m", "rust_rewards", "bench", "--corpus", str(corpus), "--prompts", "1",
                          "--group", "4", "--json", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ratio" in res.stdout and "verdicts agree: True" in res.stdout
    data = json.loads(out.read_text())
    assert data["distinct"]["completions"] == 2 and data["grpo_1x4"]["completions"] == 4
    assert data["distinct"]["ratio"] > 0


def test_sandbox_start_failure_is_an_internal_error_not_a_verdict(monkeypatch):
    from rust_rewards.verify import sandbox

    real = sandbox.detect_isolation()
    broken = sandbox.Isolation(bwrap="/nonexistent/bwrap", drop_uid=real.drop_uid, unshare_net=None)
    monkeypatch.setattr(sandbox, "detect_isolation", lambda: broken)
    v = Verifier(workers=1)
    report = v.verify(rust(SQUARE + SQUARE_TESTS + "// sandbox-failure"))
    assert report.internal_error.startswith("SandboxError")
    assert all(value is None for value in rewards.rewards_from_report(report).values())
    assert v.stats["verified"] == 1
    assert v.forget_failures() == 1 and not v._cache  # kept for the step's consumers, then dropped
    v.close()


def test_feature_gated_and_should_panic_tests(verifier):
    code = SQUARE + """
#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    #[should_panic]
    fn overflow_panics() { let _ = square(i64::MAX); }
    #[test]
    fn small() { assert_eq!(square(2), 4); }
    #[test]
    #[cfg(feature = "extra")]
    fn only_with_feature() { assert_eq!(square(1), 1); }
}
"""
    report = verifier.verify(rust(code))
    assert report.source.test_fns == ("overflow_panics", "small")
    assert report.tests_ok and report.own_tests.passed == 2


def test_no_code_counts_as_hidden_failure(verifier):
    report = verifier.verify("no code at all", HiddenTests(HIDDEN_UNIT))
    assert not report.has_code and report.hidden_tests.expected == 2 and not report.hidden_ok
    assert report.flat()["hidden_ok"] is False and report.flat()["hidden_total"] == 2
    assert rewards.rewards_from_report(report)["hidden_test_reward"] == 0.0


def test_hidden_tests_that_do_not_compile_leave_own_tests_alone(verifier, cargo_verifier):
    renamed = SQUARE.replace("square", "sq") + SQUARE_TESTS.replace("square", "sq")
    for v in (verifier, cargo_verifier):
        with_hidden = v.verify(rust(renamed), HiddenTests(HIDDEN_UNIT))
        alone = v.verify(rust(renamed))
        assert with_hidden.tests_ok and with_hidden.own_tests.passed == 2, v.config.mode
        assert not with_hidden.hidden_ok and with_hidden.hidden_tests.passed == 0
        scores = [rewards.rewards_from_report(r)["test_reward"] for r in (with_hidden, alone)]
        assert scores == [0.0, 2.0]  # its own tests ran and passed, but the hidden tests say it is not the answer


def test_bench_corpus_reads_rust_files_as_source(tmp_path):
    from rust_rewards.rust.extract import extract_rust
    from rust_rewards.verify.bench import load_corpus

    (tmp_path / "a.rs").write_text("pub fn one() -> i32 {\n    1\n}\n")
    (tmp_path / "b.md").write_text("prose\n```rust\npub fn two() -> i32 { 2 }\n```\n")
    corpus = dict(load_corpus(tmp_path))
    assert extract_rust(corpus["a.rs"]).strip() == "pub fn one() -> i32 {\n    1\n}"
    assert extract_rust(corpus["b.md"]).strip() == "pub fn two() -> i32 { 2 }"


def test_reward_and_crate_docstring_examples_hold():
    import doctest

    from rust_rewards.verify import crate

    for module in (rewards, crate):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_reward_functions_use_the_verifier_they_are_given_and_pickle_without_it():
    import pickle

    from rust_rewards.rewards import reward_functions

    verifier = Verifier(workers=1)
    completion = "```rust\npub fn one() -> i32 { 1 }\n```"
    try:
        build, clippy = reward_functions(verifier, ["build_reward", "clippy_reward"])
        assert (build.__name__, clippy.__name__) == ("build_reward", "clippy_reward")
        assert build([completion]) == [1.0] and clippy([completion]) == [1.0]
        assert (verifier.stats["verified"], verifier.stats["cache_hits"]) == (1, 1)  # one verification for both
        [hidden] = reward_functions(verifier, ["hidden_test_reward"], asynchronous=True)
        assert asyncio.run(hidden([completion])) == [None] and verifier.stats["cache_hits"] == 2
        copy = pickle.loads(pickle.dumps(build))
        assert (copy.name, copy.__name__, copy.verifier) == ("build_reward", "build_reward", None)
    finally:
        verifier.close()
    with pytest.raises(ValueError, match="unknown reward 'speed_reward'"):
        reward_functions(None, ["speed_reward"])
