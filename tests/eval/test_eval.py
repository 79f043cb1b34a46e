"""Eval with the real verifier: prediction loading, benchmark sanity checks, and tiny-model end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT

from rust_rewards.data.importers import load_tasks
from rust_rewards.eval.metrics import RoundSummary, comparison_table, rounds_table, summarize, summarize_model
from rust_rewards.eval.scoring import EvalParams, read_predictions, run_eval, score_predictions
from rust_rewards.report import Report
from rust_rewards.runs.records import load_eval
from rust_rewards.ui.charts import eval_rounds_chart, pass_at_k_chart, rates_chart, rounds_chart
from rust_rewards.ui.entry_points import EVAL
from rust_rewards.ui.forms import param_controls

BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
EXERCISM = BENCHMARKS / "exercism_rust.jsonl"
MULTIPL_E = BENCHMARKS / "multiple_humaneval_rs.jsonl"
BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
FLAT_KEYS = list(Report(has_code=False).flat())
SUMMARY_KEYS = {"n", "n_tasks", "build_rate", "clippy_rate", "test_rate", "hidden_pass_at_1", "pass_at_k", "ci",
                "top_error_codes", "top_clippy_lints", "hack_flag_rate"}


def _benchmark(path: Path) -> list[dict]:
    if not path.exists():
        pytest.skip(f"benchmark file {path} is absent")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fenced(code: str) -> str:
    return f"```rust\n{code}\n```"


def test_params_from_cli_style_values() -> None:
    params = EVAL.read({"tasks": "t.jsonl", "predictions": ["a.parquet", "b.jsonl"], "k": "1,5,10",
                        "workers": 2, "out": "o"})
    assert params == EvalParams(tasks="t.jsonl", predictions=["a.parquet", "b.jsonl"], out="o", k=[1, 5, 10],
                                workers=2)
    assert EVAL.read({"predictions": "a.parquet,b.parquet", "k": 1}).k == [1]
    assert EVAL.read({"predictions": "a.parquet,b.parquet"}).predictions == ["a.parquet", "b.parquet"]
    with pytest.raises(ValueError, match="unknown parameter --bogus"):
        EVAL.read({"bogus": "x"})
    with pytest.raises(ValueError, match="--k"):
        EVAL.read({"k": "one"})
    with pytest.raises(ValueError, match="--k values must be >= 1"):
        EVAL.read({"k": "0,5"})


@pytest.mark.parametrize("values, flag", [({"verifier": "gpu"}, "--verifier"), ({"top": -1}, "--top"),
                                         ({"workers": -2}, "--workers"), ({"k": "1,x"}, "--k")])
def test_parameter_definitions_refuse_bad_values_naming_the_flag(values, flag) -> None:
    with pytest.raises(ValueError, match=flag):
        EVAL.read(values)


def test_form_controls_come_from_the_parameter_definitions(tmp_path) -> None:
    controls = param_controls(EvalParams, EvalParams(), ROOT)
    assert set(controls.value) == {f.name for f in fields(EvalParams)}
    assert EVAL.read(controls.value) == EvalParams()
    assert controls["verifier"].options == {"local": "local", "ray": "ray"}

    predictions = tmp_path / "qwen3-rust-finetune" / "predictions"
    predictions.mkdir(parents=True)
    pd.DataFrame({"task_id": ["a"], "completion": ["x"]}).to_parquet(predictions / "base.parquet")
    (tmp_path / "qwen3-rust-finetune" / "notes.txt").write_text("not a prediction file")
    offered = param_controls(EvalParams, EvalParams(), tmp_path)["predictions"].options
    assert list(offered) == ["qwen3-rust-finetune/predictions/base.parquet"]
    cli = EVAL.read({"predictions": str(tmp_path / "cli.parquet")})
    prefilled = param_controls(EvalParams, cli, tmp_path)
    assert prefilled["predictions"].value == [str(tmp_path / "cli.parquet")]
    assert EVAL.read(prefilled.value) == cli


def test_checked_params_resolve_repository_paths_and_refuse_what_the_run_would(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="no predictions file given"):
        EVAL.check(EvalParams())
    with pytest.raises(ValueError, match="--predictions: no such file: missing.parquet"):
        EVAL.check(EvalParams(predictions=["missing.parquet"]))
    (tmp_path / "here.parquet").write_bytes(b"")
    bundled = "qwen3-rust-finetune/bundled_tasks.jsonl"
    params = EVAL.check(EvalParams(tasks=bundled, predictions=["here.parquet"]))
    assert (params.tasks, params.predictions) == (str(ROOT / bundled), ["here.parquet"])
    with pytest.raises(ValueError, match="--tasks: no such file"):
        EVAL.check(EvalParams(tasks="nowhere.parquet", predictions=["here.parquet"]))


def test_read_predictions_defaults_and_errors(tmp_path) -> None:
    pd.DataFrame({"task_id": ["a", "a", "b"], "completion": ["x", "y", "z"]}).to_parquet(tmp_path / "base.parquet")
    (tmp_path / "tuned.jsonl").write_text(
        "".join(json.dumps({"task_id": t, "completion": "c", "sample": s}) + "\n" for t, s in [("a", 3), ("b", 0)]))
    preds = read_predictions([tmp_path / "base.parquet", tmp_path / "tuned.jsonl"])
    assert preds["model"].tolist() == ["base", "base", "base", "tuned", "tuned"]
    assert preds["sample"].tolist() == [0, 1, 0, 3, 0]
    assert preds["origin"].iloc[3] == f"{tmp_path / 'tuned.jsonl'}:1"

    pd.read_parquet(tmp_path / "base.parquet").assign(model="base").to_parquet(tmp_path / "copy.parquet")
    with pytest.raises(ValueError, match=r"duplicate prediction .*model='base'.*base\.parquet:1.*copy\.parquet:1"):
        read_predictions([tmp_path / "base.parquet", tmp_path / "copy.parquet"])
    pd.DataFrame({"task_id": ["a"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet: missing column\(s\) \['completion'\]"):
        read_predictions([tmp_path / "bad.parquet"])
    pd.DataFrame({"task_id": ["a", "b"], "completion": ["x", None]}).to_parquet(tmp_path / "null.parquet")
    with pytest.raises(ValueError, match=r"null\.parquet:2: null"):
        read_predictions([tmp_path / "null.parquet"])
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        read_predictions([tmp_path / "missing.parquet"])
    with pytest.raises(ValueError, match="no predictions file"):
        read_predictions([])


def test_unknown_task_id_names_the_row(tmp_path) -> None:
    _benchmark(EXERCISM)
    tasks = load_tasks(EXERCISM)
    pd.DataFrame({"task_id": [tasks[0].task_id, "no/such/task"], "completion": ["", ""]}).to_parquet(
        tmp_path / "p.parquet")
    with pytest.raises(KeyError, match=r"p\.parquet:2: task_id 'no/such/task' is not in the tasks file"):
        score_predictions(tasks, read_predictions([tmp_path / "p.parquet"]))


def test_completion_without_code_fails_hidden_tests() -> None:
    """No ```rust block: hidden_ok is False (not null), so it stays in the pass@1 denominator."""
    _benchmark(EXERCISM)
    tasks = load_tasks(EXERCISM)
    preds = pd.DataFrame({"model": "m", "task_id": tasks[0].task_id, "sample": [0, 1],
                          "completion": ["I cannot solve this.", _fenced(tasks[0].reference_code)]})
    results = score_predictions(tasks, preds)
    assert results["hidden_ok"].tolist() == [False, True]
    assert results.loc[0, "hidden_passed"] == 0 and not results.loc[0, "has_code"]
    assert summarize(results)["m"].hidden_pass_at_1 == 0.5


def _sample(rows: list[dict], whole: bool) -> list[dict]:
    """Every row with ``--corpora all``, else every fifth (the suite's fixed sample of an external corpus)."""
    return rows if whole else rows[::5]


@pytest.mark.slow
def test_exercism_reference_solutions_all_pass_hidden_tests(tmp_path, whole_corpora) -> None:
    """The reference solutions (all 95 with ``--corpora all``), every test including the #[ignore]d ones, score
    hidden pass."""
    rows = _sample(_benchmark(EXERCISM), whole_corpora)
    preds = tmp_path / "reference.parquet"
    pd.DataFrame({"task_id": [r["task_id"] for r in rows],
                  "completion": [_fenced(r["reference_solution"]) for r in rows]}).to_parquet(preds)
    results, summaries = run_eval(EvalParams(tasks=str(EXERCISM), predictions=[str(preds)],
                                             out=str(tmp_path / "out"), k=[1]))
    assert len(results) == len(rows) == (95 if whole_corpora else 19) and results["build_ok"].all()
    failing = results[~results["hidden_ok"].astype(bool)]
    assert failing.empty, failing[["task_id", "hidden_passed", "hidden_total", "hidden_failures",
                                   "test_output"]].to_string()
    # Tests cargo runs with default features: the benchmark's count minus its doctests (fizzy, macros, react
    # have doc examples, never hidden tests here) and num_test_fns minus feature-gated tests (binary-search...).
    expected = {r["task_id"]: min(r["num_test_fns"], r["verify_tests_passed"]) for r in rows}
    assert (results["hidden_passed"] == results["task_id"].map(expected)).all()
    assert summaries["reference"].hidden_pass_at_1 == 1.0
    assert summaries["reference"].pass_at_k == {"1": 1.0}


@pytest.mark.slow
def test_multipl_e_todo_bodies_pass_nothing(tmp_path, whole_corpora) -> None:
    """MultiPL-E signatures with ``todo!()`` bodies compile and fail every hidden test (all 155 with
    ``--corpora all``)."""
    rows = _sample(_benchmark(MULTIPL_E), whole_corpora)
    tasks = load_tasks(MULTIPL_E)
    preds = pd.DataFrame({"model": "todo", "task_id": [r["task_id"] for r in rows], "sample": 0,
                          "completion": [_fenced(r["prompt"] + "    todo!()\n}") for r in rows]})
    results = score_predictions(tasks, preds)
    assert len(results) == len(rows) == (155 if whole_corpora else 31)
    assert results["build_ok"].all(), results.loc[~results["build_ok"], "task_id"].tolist()
    assert results["hidden_ok"].notna().all() and not results["hidden_ok"].astype(bool).any()
    assert summarize(results)["todo"].hidden_pass_at_1 == 0.0


def test_side_by_side_reference_versus_stub(tmp_path) -> None:
    """Two prediction files -> two models in one results table, summary and charts."""
    rows = [r for r in _benchmark(EXERCISM) if r["stub_compiles_with_tests"]][:3]
    for name, field in (("reference", "reference_solution"), ("stub", "stub")):
        pd.DataFrame({"task_id": [r["task_id"] for r in rows],
                      "completion": [_fenced(r[field]) for r in rows]}).to_parquet(tmp_path / f"{name}.parquet")
    out = tmp_path / "out"
    params = EvalParams(tasks=str(EXERCISM), predictions=[str(tmp_path / "reference.parquet"),
                                                          str(tmp_path / "stub.parquet")], out=str(out), k=[1])
    results, summaries = run_eval(params)
    assert list(summaries) == ["reference", "stub"]
    assert summaries["reference"].hidden_pass_at_1 == 1.0
    assert summaries["stub"].hidden_pass_at_1 == 0.0
    assert summaries["stub"].build_rate == 1.0
    written = json.loads((out / "summary.json").read_text())
    assert written["stub"]["hidden_pass_at_1"] == 0.0
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet", "summary.json"]
    rates = rates_chart(summaries).to_dict()
    assert {d["model"] for d in rates["datasets"][next(iter(rates["datasets"]))]} == {"reference", "stub"}
    assert pass_at_k_chart(summaries).to_dict()["layer"][0]["mark"]["type"] == "line"


def test_repair_rounds_are_scored_per_round(tmp_path) -> None:
    """Without a ``round`` column the summary is what it always was; with rounds, round 0 gives the same
    headline numbers and each round the metrics of the answers standing after it (unrepaired ones carried)."""
    tasks = load_tasks(BUNDLED)[:2]
    a, b = (t.task_id for t in tasks)
    good = {t.task_id: _fenced(t.reference_code) for t in tasks}
    broken = _fenced('pub fn broken() -> i32 {\n    "x"\n}')
    one_shot = pd.DataFrame({"model": "m", "task_id": [a, a, b, b], "sample": [0, 1, 0, 1],
                             "completion": [broken, good[a], broken, broken]})
    repaired = pd.DataFrame({"model": "m", "task_id": [a, a, b], "sample": [0, 1, 0], "round": 1,
                             "completion": [good[a], good[a], good[b]]})  # (b, 1) was not repaired
    one_shot.to_parquet(tmp_path / "plain.parquet")
    pd.concat([one_shot.assign(round=0), repaired]).to_parquet(tmp_path / "rounds.parquet")
    pd.concat([repaired, repaired]).to_parquet(tmp_path / "twice.parquet")
    with pytest.raises(ValueError, match=r"duplicate prediction \(model='m', task_id=.*, sample=0, round=1\)"):
        read_predictions([tmp_path / "twice.parquet"])

    plain_results, plain = run_eval(EvalParams(tasks=str(BUNDLED), predictions=[str(tmp_path / "plain.parquet")],
                                               out=str(tmp_path / "plain"), k=[1, 2]))
    assert "round" not in plain_results.columns
    assert plain["m"] == summarize_model(plain_results, [1, 2]) and plain["m"].rounds == []
    assert "rounds" not in json.loads((tmp_path / "plain" / "summary.json").read_text())["m"]
    assert rounds_chart(plain) is None and "repair rounds" not in comparison_table(plain).columns

    results, summaries = run_eval(EvalParams(tasks=str(BUNDLED), predictions=[str(tmp_path / "rounds.parquet")],
                                             out=str(tmp_path / "rounds"), k=[1, 2]))
    assert list(results.columns[:5]) == ["model", "task_id", "sample", "round", "completion"]
    summary = summaries["m"]
    headline = {k: v for k, v in summary.to_dict().items() if k != "rounds"}
    assert headline == plain["m"].to_dict() and summary.hidden_pass_at_1 == 0.25
    zero, one = summary.rounds
    assert (zero.round, zero.n, zero.revised, zero.hidden_pass_at_1, zero.build_rate) == (0, 4, 0, 0.25, 0.25)
    assert zero.ci == plain["m"].ci
    assert (one.round, one.n, one.revised, one.hidden_pass_at_1, one.build_rate) == (1, 4, 2, 0.75, 0.75)
    low, high = one.ci["hidden_pass_at_1"]
    assert one.pass_at_k == {"1": 0.75, "2": 1.0} and low < 0.75 < high

    table = comparison_table(summaries)
    assert table.loc[0, "repair rounds"] == 1 and table.loc[0, "hidden pass@1 after repair"] == 0.75
    assert rounds_table(summaries)["hidden pass@1"].tolist() == [0.25, 0.75]
    spec = rounds_chart(summaries).to_dict()
    assert spec["facet"]["column"]["field"] == "metric"
    loaded = load_eval(tmp_path / "rounds").summaries["m"]
    assert loaded.rounds == [zero, one] and isinstance(loaded.rounds[1], RoundSummary)
    assert eval_rounds_chart(load_eval(tmp_path / "rounds")) is not None
    assert eval_rounds_chart(load_eval(tmp_path / "plain")) is None


@pytest.mark.slow
def test_tiny_model_end_to_end_scripts(tmp_path, tiny_model_dir) -> None:
    """inference.py then eval.py, both run as scripts, on 4 bundled tasks with the tiny warm-started model."""
    if not BUNDLED.exists():
        pytest.fail(f"{BUNDLED} is missing")
    model = tiny_model_dir
    preds, out = tmp_path / "preds" / "tiny.parquet", tmp_path / "eval"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([sys.executable, str(ROOT / "inference.py"), "--model", str(model), "--tasks", str(BUNDLED),
                    "--out", str(preds), "--n", "2", "--max-new-tokens", "32", "--temperature", "0.7",
                    "--limit", "4", "--backend", "hf", "--name", "tiny"], cwd=tmp_path, env=env, check=True,
                   timeout=600)
    generated = pd.read_parquet(preds)
    assert len(generated) == 8 and generated["task_id"].nunique() == 4
    assert set(generated["model"]) == {"tiny"} and (generated["completion_tokens"] <= 32).all()

    subprocess.run([sys.executable, str(ROOT / "eval.py"), "--tasks", str(BUNDLED), "--predictions", str(preds),
                    "--out", str(out), "--k", "1,2"], cwd=tmp_path, env=env, check=True, timeout=600)
    results = pd.read_parquet(out / "results.parquet")
    assert len(results) == 8
    assert list(results.columns[:4]) == ["model", "task_id", "sample", "completion"]
    assert set(FLAT_KEYS) <= set(results.columns)
    assert results["completion"].tolist() == generated["completion"].tolist()
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["tiny"]
    assert SUMMARY_KEYS <= set(summary["tiny"])
    assert summary["tiny"]["n"] == 8 and summary["tiny"]["n_tasks"] == 4
    assert set(summary["tiny"]["pass_at_k"]) == {"1", "2"}
    assert 0.0 <= summary["tiny"]["build_rate"] <= 1.0


@pytest.mark.slow
@pytest.mark.browser
def test_notebook_form_in_the_browser(tmp_path) -> None:
    """``marimo run eval.py -- --tasks T --predictions A --predictions B``: the form opens filled from the command
    line, a bad value is refused under the form before anything runs, and Evaluate renders the comparison table
    and both charts."""
    from browser import chromium_page, free_port, page_errors, screenshot, serve, wait_for_charts

    rows = [r for r in _benchmark(EXERCISM) if r["stub_compiles_with_tests"]][:2]
    for name, field in (("reference", "reference_solution"), ("stub", "stub")):
        pd.DataFrame({"task_id": [r["task_id"] for r in rows],
                      "completion": [_fenced(r[field]) for r in rows]}).to_parquet(tmp_path / f"{name}.parquet")
    port = free_port()
    argv = [sys.executable, "-m", "marimo", "run", "eval.py", "--headless", "--host", "127.0.0.1",
            "--port", str(port), "--", "--tasks", str(EXERCISM), "--predictions", str(tmp_path / "reference.parquet"),
            "--predictions", str(tmp_path / "stub.parquet")]
    with serve(argv, port, tmp_path / "server.log") as server, chromium_page() as page:
        page.goto(server.url)
        page.wait_for_selector("text=Ready: score", timeout=60_000)
        for label, value in (("k", "0,1"), ("out", str(tmp_path / "out"))):
            page.get_by_label(label, exact=True).fill(value)
            page.get_by_label(label, exact=True).press("Enter")
        page.wait_for_selector("text=--k values must be >= 1", timeout=30_000)
        from playwright.sync_api import expect

        expect(page.get_by_text("Cannot evaluate yet")).to_have_count(1, timeout=30_000)  # may paint after the line
        assert not (tmp_path / "out").exists()
        page.get_by_label("k", exact=True).fill("1")
        page.get_by_label("k", exact=True).press("Enter")
        page.wait_for_selector(f"text=results go to {tmp_path / 'out'}", timeout=30_000)
        page.get_by_role("button", name="Evaluate").click()
        assert wait_for_charts(page, 2) >= 2
        assert page.get_by_text("stub", exact=True).count() >= 1
        page.get_by_text("Side by side").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        screenshot(page, "eval", tmp_path)
        assert page_errors(page) == []
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["reference"]["hidden_pass_at_1"] == 1.0
