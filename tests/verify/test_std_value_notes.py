"""Reward integrity V: hidden tests judged by std values the model cannot print (``verify.observe``); no correct
answer loses reward (honest variants of every shipped reference keep every hidden verdict, ``rust.honest``); every
shipped hidden test judged by its notes (``verify.coverage``); a reference that fails its own run is an internal
error, never a pass. Real rustc and cargo, direct and batch mode."""

from __future__ import annotations

import collections
import subprocess
from pathlib import Path

import pytest
from conftest import ADVERSARIAL
from test_soundness_holes import ADD, HONEST

from rust_rewards.__main__ import main
from rust_rewards.data.bundled import BUNDLED_TASKS, EASY_TASKS, MEDIUM_TASKS
from rust_rewards.data.importers import load_tasks
from rust_rewards.rewards import rewards_from_report
from rust_rewards.rust.honest import honest_variant
from rust_rewards.rust.soundness import FN_POINTER_LIFETIMES, IMPLIED_BOUNDS, soundness_holes
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.coverage import note_coverage
from rust_rewards.verify.observe import OPAQUE, notes_in, observe_assertions
from rust_rewards.verify.reference import reference_observations
from rust_rewards.verify.verifier import Verifier

CORPUS = ADVERSARIAL / "integrity5"
SHIPPED = [t for path in (BUNDLED_TASKS, EASY_TASKS, MEDIUM_TASKS) for t in load_tasks(str(path))]


def _notes(tmp_path: Path, solution: str, tests: str) -> dict[str, list[str]]:
    """Each test's notes, decoded, from a test binary of ``solution`` and ``tests`` (observed) built with rustc."""
    code, tag = observe_assertions(tests)
    source = tmp_path / "lib.rs"
    source.write_text(solution + "\n#[cfg(test)]\nmod hidden {\nuse super::*;\n" + code + "\n}\n")
    subprocess.run(["rustc", "--edition", "2021", "--test", "-o", str(tmp_path / "t"), str(source)], check=True,
                   capture_output=True, timeout=120)
    out = {}
    for name, path in (("a", "hidden::a"), ("b", "hidden::nested::b")):
        run = subprocess.run([str(tmp_path / "t"), "--exact", path, "--test-threads=1"],
                             capture_output=True, text=True, timeout=60)
        out[name] = [n if n == OPAQUE else bytes.fromhex(n).decode() for n in notes_in(run.stdout, tag)]
    return out


def test_values_equal_by_eq_are_noted_alike_and_solution_types_are_opaque(tmp_path):
    solution = ("use std::collections::{HashMap, HashSet};\n#[derive(Debug, PartialEq)]\npub struct Frac(pub i64);\n"
                "pub fn empty_sum(v: &[f64]) -> f64 {\n    v.iter().sum()\n}\n"
                "pub fn map(n: u8) -> HashMap<String, Vec<f64>> {\n"
                "    (0..n).map(|i| (i.to_string(), vec![-0.0])).collect()\n}\n"
                "pub fn set(n: u8) -> HashSet<char> {\n    (0..n).map(|i| char::from(b'a' + i)).collect()\n}\n")
    tests = ("#[test]\nfn a() {\n    assert_eq!(empty_sum(&[]), 0.0);\n    assert_eq!(map(20), map(20));\n"
             "    assert_eq!(set(3), ['c', 'b', 'a'].into_iter().collect());\n"
             "    assert!(\"x\".to_string() == \"x\");\n    assert_ne!(Frac(1), Frac(2));\n}\n\n"
             "mod nested {\n    use super::*;\n\n    #[test]\n    fn b() {\n        assert_eq!(vec![1, 2], [1, 2]);\n"
             "        assert!(Some(Frac(1)) == Some(Frac(1)));\n    }\n}\n")
    notes = _notes(tmp_path, solution, tests)
    a = notes["a"]
    assert a[0] == a[1] == "f0.0;"  # the sum of nothing is -0.0: noted as 0.0, as == judges it
    assert a[2] == a[3] and a[2].startswith("{(s1:0[f0.0;])(s1:1[f0.0;])")  # map order: sorted, whatever the hash
    assert a[4] == a[5] == "{c97;c98;c99;}"
    assert a[6] == a[7] == "s1:x"  # assert!(a == b): both sides noted, a String and a &str alike
    assert a[8:] == [OPAQUE]  # assert_ne! of the solution's type: its != is its own code
    assert notes["b"] == ["[i1;i2;]", "[i1;i2;]", OPAQUE, OPAQUE]  # a Vec and an array alike; Frac opaque


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_honest_variants_of_every_shipped_reference_keep_every_hidden_verdict(mode, whole_corpora):
    """Private fields renamed and reordered, ``Debug`` by hand in another format, a float ``sum`` as a ``fold`` from
    ``0.0``: every shipped reference rewritten so (where a rewrite fits) keeps the full hidden reward. The suite
    verifies every second variant, each kind of rewrite among them; ``--corpora all`` every one."""
    variants = [(t, *honest_variant(t.reference_code, t.reference_tests)) for t in SHIPPED]
    variants = [(t, code, kinds) for t, code, kinds in variants if kinds]
    kinds = collections.Counter(k for _, _, ks in variants for k in ks)
    print(f"{len(variants)} of {len(SHIPPED)} shipped references have honest variants: {dict(kinds)}")
    assert len(variants) >= 30 and set(kinds) == {"renamed", "reordered", "debug", "fold"}
    if not whole_corpora:
        variants = variants[::2]
        assert {k for _, _, ks in variants for k in ks} == set(kinds)
    verifier = Verifier(VerifierConfig(mode=mode), workers=2)
    try:
        reports = verifier.verify_many([code for _, code, _ in variants], [t.hidden_tests() for t, _, _ in variants],
                                       raw_code=True)
    finally:
        verifier.close()
    lost = {t.task_id: (ks, r.hidden_tests, r.diagnostics[:300])
            for (t, _, ks), r in zip(variants, reports, strict=True)
            if not (r.build_ok and r.hidden_ok and rewards_from_report(r)["hidden_test_reward"] == 2.0)}
    assert not lost, f"honest variants that lost hidden reward: {lost}"


HASH_REFERENCE = ("use std::collections::HashMap;\n\npub fn counts(words: &[&str]) -> HashMap<String, usize> {\n"
                  "    let mut out = HashMap::new();\n    for w in words {\n"
                  "        *out.entry(w.to_string()).or_insert(0) += 1;\n    }\n    out\n}\n")
HASH_TESTS = HiddenTests(
    "use super::*;\n\n#[test]\nfn counts_words() {\n    let got = counts(&[\"a\", \"b\", \"a\", \"c\"]);\n"
    "    let want: HashMap<String, usize> = [(\"a\", 2), (\"b\", 1), (\"c\", 1)]\n"
    "        .into_iter().map(|(k, v)| (k.to_string(), v)).collect();\n    assert_eq!(got, want);\n}\n",
    reference=HASH_REFERENCE, prompt="Write `pub fn counts(words: &[&str]) -> HashMap<String, usize>`.")


def test_a_hash_map_task_is_judged_by_its_notes():
    notes = reference_observations(HASH_TESTS, VerifierConfig(mode="direct"))
    assert notes is not None and (notes.tests, notes.judged, notes.unstable) == (1, 1, 0)


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_a_pass_forged_past_a_solution_types_eq_does_not_count_where_std_values_are_compared(mode):
    """The fifth round's PhantomData ``Fraction``: a derived ``==`` that is always true and a ``Debug`` that prints
    whatever was made last. The shipped rr-046 tests compare ``numer()``/``denom()`` (std values): it passes
    nothing it did not compute, beside an honest answer written with other private names and a neighbour."""
    task = next(t for t in SHIPPED if t.task_id.startswith("rr-046"))
    attack = (CORPUS / "phantom_fraction.rs").read_text()
    renamed = (CORPUS / "honest_fraction_renamed.rs").read_text()
    verifier = Verifier(VerifierConfig(mode=mode), workers=1)
    try:
        attacked, honest, neighbour = verifier.verify_many([attack, renamed, HONEST],
                                                           [task.hidden_tests(), task.hidden_tests(), ADD],
                                                           raw_code=True)
    finally:
        verifier.close()
    assert honest.build_ok and honest.hidden_tests.passed == honest.hidden_tests.expected, honest.diagnostics[:500]
    # it passes the two tests whose values it does compute (normalizing, display), none of the three where + and *
    # compute nothing (round 5, notes of its own Debug: 4 of 5)
    assert attacked.build_ok and attacked.hidden_tests.passed == 2, attacked.hidden_tests
    assert neighbour.hidden_tests.passed == 3


def test_a_reference_that_fails_its_own_run_lets_no_completion_pass():
    """A task whose reference fails its own hidden tests (a broken task) passes no completion's hidden test, whatever
    its process says, and says why in ``TestCounts.failures``; its reference, verified as itself, fails as it is."""
    reference = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    broken = HiddenTests("use super::*;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 5);\n}\n",
                         reference=reference, prompt="Write `pub fn add(a: i32, b: i32) -> i32`.")
    verifier = Verifier(VerifierConfig(mode="direct"), workers=1)
    try:
        answer, itself = verifier.verify_many(["pub fn add(_a: i32, _b: i32) -> i32 {\n    5\n}\n", reference],
                                              [broken, broken], raw_code=True)
    finally:
        verifier.close()
    assert answer.build_ok and answer.hidden_tests.passed == 0 and not answer.internal_error
    assert answer.hidden_tests.failures == ("adds: the task's reference fails its own run (passed 0 of 1: adds: "
                                            "failed: assertion `left == right` failed)",)
    assert itself.hidden_tests.passed == 0 and itself.hidden_tests.failures[0].startswith("adds: failed")
    assert note_coverage([broken])[0].error.startswith("the task's reference fails its own run")


SOUNDNESS = ("array_nested_ref_add", "tuple_nested_ref_add", "fn_pointer_generic_return_add")


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_round_five_spellings_of_the_soundness_holes_are_one_rule(mode):
    """A reference nested inside an array or a tuple, a lifetime that reaches a fn pointer type through a type
    parameter: each read from the parse (``rust.soundness``), refused beside an honest neighbour."""
    attacks = [(CORPUS / f"{name}.rs").read_text() for name in SOUNDNESS]
    holes = [soundness_holes(a) for a in attacks]
    assert IMPLIED_BOUNDS in holes[0] and IMPLIED_BOUNDS in holes[1] and holes[2] == (FN_POINTER_LIFETIMES,)
    assert soundness_holes("pub fn f<'a>(v: &'a [&'a str]) -> &'a str {\n    v[0]\n}\n") == ()  # one lifetime
    verifier = Verifier(VerifierConfig(mode=mode), workers=2)
    try:
        *attacked, neighbour = verifier.verify_many([*attacks, HONEST], [ADD] * 4, raw_code=True)
    finally:
        verifier.close()
    for name, report in zip(SOUNDNESS, attacked, strict=True):
        rewards = rewards_from_report(report)
        assert report.hack_reasons and rewards["hidden_test_reward"] == rewards["test_reward"] == 0.0, name
    assert neighbour.hidden_tests.passed == 3 and not neighbour.hack_reasons


@pytest.mark.parametrize("mode", ["direct", "batch"])
def test_own_test_copies_resolve_names_as_at_home(mode):
    """A variant's copy of the own tests sees the names the completion binds and the variant does not
    (``crate.home_names``): the solution's by-value trait method answers there as at home, so tests that check
    nothing at home kill no mutant and earn nothing; honest tests still do."""
    attack = (CORPUS / "home_trait_vacuous_tests.rs").read_text()
    honest_tests = attack.replace("add(2, 3).is_right(2, 3)", "add(2, 3) == 5").replace(
        "add(-4, 1).is_right(-4, 1)", "add(-4, 1) == -3")
    verifier = Verifier(VerifierConfig(mode=mode), workers=2)
    try:
        attacked, honest = verifier.verify_many([attack, honest_tests], [ADD, ADD], raw_code=True)
    finally:
        verifier.close()
    assert attacked.hidden_tests.passed == 3 and attacked.own_tests.passed == 1
    assert attacked.own_checks.compiled and attacked.own_checks.discriminating == 0, attacked.own_checks
    assert rewards_from_report(attacked)["test_reward"] == 0.0
    assert honest.own_checks.discriminating == 1 and rewards_from_report(honest)["test_reward"] == 2.0


def test_the_notes_command_counts_a_task_file_and_refuses_a_missing_one(tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(EASY_TASKS.read_text().splitlines()[0] + "\n")
    assert main(["notes", "--tasks", str(tasks)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tasks.jsonl: 1 tasks, ") and " judged by std values; by their seal alone: 0 comparing" in out
    assert main(["notes", "--tasks", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
