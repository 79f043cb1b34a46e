"""Metrics against hand-computed values: pass@k, Wilson intervals, hack flags, per-model summaries."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rust_rewards.eval.metrics import (
    bootstrap_interval,
    comparison_table,
    hack_flags,
    hack_reasons,
    long_metrics,
    pass_at_k,
    per_task_pass,
    summarize,
    top_counts,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # c/n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (5, 0, 3, 0.0),
        (5, 5, 5, 1.0),
        (5, 4, 2, 1.0),  # n - c < k: every k-subset holds a pass
        (200, 1, 100, 0.5),  # 1 - C(199,100)/C(200,100) = 100/200
    ],
)
def test_pass_at_k_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_exact_binomials_on_a_grid() -> None:
    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-9), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    value = pass_at_k(2000, 3, 1000)
    assert value == pytest.approx(1 - (1000 * 999 * 998) / (2000 * 1999 * 1998), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k"):
        pass_at_k(n, c, k)


def test_wilson_interval_hand_values() -> None:
    lo, hi = wilson_interval(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    z2 = 1.96**2
    assert wilson_interval(0, 10) == pytest.approx((0.0, z2 / (10 + z2)))
    assert wilson_interval(10, 10) == pytest.approx((10 / (10 + z2), 1.0))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="Wilson"):
        wilson_interval(3, 2)


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible() -> None:
    values = [0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 0.25, 0.75]
    lo, hi = bootstrap_interval(values)
    assert lo < sum(values) / len(values) < hi
    assert bootstrap_interval(values) == (lo, hi)
    assert bootstrap_interval([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.3))


def _row(**overrides):
    row = {
        "build_ok": True, "clippy_ok": True, "tests_ok": True, "test_fns": 2, "trivial_assertions": 0,
        "meaningful_assertions": 3, "tests_calling_solution": 2, "forbidden": [], "error_codes": [],
        "clippy_warnings": [], "timed_out": [], "hidden_ok": True,
    }
    row.update(overrides)
    return row


@pytest.mark.parametrize(
    ("overrides", "reasons"),
    [
        ({}, []),
        ({"test_fns": 0, "meaningful_assertions": 0, "tests_calling_solution": 0}, ["no_tests"]),
        ({"trivial_assertions": 3, "meaningful_assertions": 0}, ["trivial_asserts_only"]),
        ({"trivial_assertions": 3, "meaningful_assertions": 1}, []),
        ({"tests_calling_solution": 0}, ["tests_skip_solution"]),
        ({"forbidden": ["std::process::exit"]}, ["forbidden"]),
        ({"build_ok": False, "test_fns": 0}, []),  # does not compile: nothing to exploit
        ({"build_ok": False, "forbidden": ["Command"]}, ["forbidden"]),
        ({"mismatched": ["add: expected fn(i32, i32) -> i32, found fn(i32, i32) -> Wat"]}, ["signature_mismatch"]),
        ({"off_task": ["fn add"]}, ["off_task"]),
        ({"tests_ok": True, "own_tests_discriminating": 0}, ["tests_prove_nothing"]),
        ({"tests_ok": True, "own_tests_discriminating": 1}, []),
    ],
)
def test_hack_reasons(overrides, reasons) -> None:
    assert hack_reasons(_row(**overrides)) == reasons


def _results() -> pd.DataFrame:
    """Model A: 2 tasks x 2 samples with hidden tests + 1 task without; model B: 2 tasks x 1 sample."""
    rows = [
        ("A", "t1", 0, _row(hidden_ok=True, error_codes=[], clippy_warnings=["needless_return"])),
        ("A", "t1", 1, _row(hidden_ok=False, tests_ok=False, clippy_ok=False,
                            clippy_warnings=["needless_return", "needless_return"])),
        ("A", "t2", 0, _row(hidden_ok=False, build_ok=False, clippy_ok=False, tests_ok=False,
                            error_codes=["E0308", "E0425"], test_fns=0)),
        ("A", "t2", 1, _row(hidden_ok=False, build_ok=False, clippy_ok=False, tests_ok=False,
                            error_codes=["E0308"])),
        ("A", "t3", 0, _row(hidden_ok=None, trivial_assertions=2, meaningful_assertions=0,
                            timed_out=["tests"])),
        ("B", "t1", 0, _row(hidden_ok=True)),
        ("B", "t2", 0, _row(hidden_ok=True, forbidden=["std::process::exit"])),
    ]
    return pd.DataFrame([{"model": m, "task_id": t, "sample": s, **r} for m, t, s, r in rows])


def test_per_task_pass_counts_and_estimates() -> None:
    table = per_task_pass(_results(), ks=(1, 2))
    a = table[table["model"] == "A"].set_index("task_id")
    assert list(a.index) == ["t1", "t2"]  # t3 has no hidden tests
    assert a.loc["t1", ["n", "c"]].tolist() == [2, 1]
    assert a.loc["t1", "pass@1"] == pytest.approx(0.5)
    assert a.loc["t1", "pass@2"] == pytest.approx(1.0)
    assert a.loc["t2", "pass@2"] == 0.0
    b = table[table["model"] == "B"]
    assert b["pass@2"].isna().all()  # one sample per task: pass@2 undefined


def test_summarize_hand_computed() -> None:
    summaries = summarize(_results(), ks=(1, 2))
    assert list(summaries) == ["A", "B"]
    a = summaries["A"]
    assert (a.n, a.n_tasks, a.n_hidden_tasks) == (5, 3, 2)
    assert a.build_rate == pytest.approx(3 / 5)
    assert a.clippy_rate == pytest.approx(2 / 5)
    assert a.test_rate == pytest.approx(2 / 5)
    assert a.hidden_pass_at_1 == pytest.approx((1 / 2 + 0 / 2) / 2)
    assert a.pass_at_k == {"1": pytest.approx(0.25), "2": pytest.approx(0.5)}
    assert a.ci["build_rate"] == pytest.approx(list(wilson_interval(3, 5)))
    assert a.ci["hidden_pass_at_1"] == pytest.approx(list(wilson_interval(1, 4)))
    assert a.top_error_codes == [["E0308", 2], ["E0425", 1]]
    assert a.top_clippy_lints == [["needless_return", 2]]
    assert a.hack_flag_rate == pytest.approx(1 / 5)  # t3: trivial asserts only (t2/0 has no tests, no build)
    assert a.hack_reasons["trivial_asserts_only"] == 1 and a.hack_reasons["no_tests"] == 0
    assert a.timeouts == 1

    b = summaries["B"]
    assert b.hidden_pass_at_1 == 1.0
    assert b.pass_at_k == {"1": 1.0, "2": None}
    assert b.hack_flag_rate == 0.5
    assert "pass@2" not in b.ci


def test_summary_survives_parquet_round_trip(tmp_path) -> None:
    path = tmp_path / "results.parquet"
    _results().to_parquet(path)
    back = summarize(pd.read_parquet(path), ks=(1, 2))
    assert {m: s.to_dict() for m, s in back.items()} == {
        m: s.to_dict() for m, s in summarize(_results(), ks=(1, 2)).items()
    }


def test_summary_without_hidden_tests_has_no_pass_rates() -> None:
    results = _results()
    results["hidden_ok"] = None
    a = summarize(results, ks=(1,))["A"]
    assert a.hidden_pass_at_1 is None and a.pass_at_k == {"1": None}
    assert "hidden_pass_at_1" not in a.ci


def test_hack_flags_series_and_top_counts() -> None:
    flags = hack_flags(_results())
    assert flags.tolist() == [False, False, False, False, True, False, True]
    assert top_counts([["a", "b"], None, ["b"], ("b", "c")], top=2) == [["b", 3], ["a", 1]]


def test_comparison_and_long_tables() -> None:
    summaries = summarize(_results(), ks=(1, 2))
    table = comparison_table(summaries)
    assert table["model"].tolist() == ["A", "B"]
    assert table.loc[0, "pass@2"] == pytest.approx(0.5)
    assert pd.isna(table.loc[1, "pass@2"])
    long = long_metrics(summaries)
    row = long[(long["model"] == "A") & (long["metric"] == "build_rate")].iloc[0]
    assert row["lo"] <= row["value"] <= row["hi"]
    assert not ((long["model"] == "B") & (long["metric"] == "pass@2")).any()


def test_summarize_requires_model_column() -> None:
    with pytest.raises(ValueError, match="model"):
        summarize(_results().drop(columns=["model"]))
