"""The dashboard's readers and charts on a training dir written in train.py's format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from run_folders import GOOD, REWARD_NAMES, TYPE_ERROR, write_eval_dir, write_training_dir

from rust_rewards.runs.overview import VizParams, pass_rate_lines, run_overview
from rust_rewards.runs.records import (
    PASS_CHECKS,
    RunLogError,
    completion_table,
    ema,
    error_code_counts,
    filter_completions,
    inspect_eval,
    inspect_run,
    load_completions,
    load_eval,
    load_metrics,
    load_run,
    pass_rates,
    reward_names,
    reward_range,
    reward_series,
    top_error_codes,
)
from rust_rewards.ui import charts


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_training_dir(tmp_path_factory.mktemp("run") / "out")


def test_load_run_reads_every_step(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.params["model"] == "tiny"
    assert run.metrics["step"].tolist() == [1, 2, 3]
    assert reward_names(run.metrics) == list(REWARD_NAMES)
    assert len(run.completions) == 12
    assert run.last_step == 3
    assert run.completions["verdict"].value_counts().to_dict() == {
        "tests pass": 4, "build error": 3, "clippy": 2, "tests fail": 2, "no code": 1}
    assert run.completions.loc[0, "error_codes"] == ["E0308"]


def test_pass_rates_match_the_verdicts(run_dir: Path) -> None:
    rates = pass_rates(load_completions(run_dir)).set_index(["step", "check"])["rate"]
    assert rates[(1, "build")] == pytest.approx(0.25)
    assert rates[(2, "build")] == pytest.approx(0.75)
    assert rates[(3, "clippy")] == pytest.approx(0.75)
    assert rates[(3, "tests")] == pytest.approx(0.75)
    # step 1: the no-code completion counts as a hidden-test failure, so the rate is over all four
    assert rates[(1, "hidden tests")] == pytest.approx(1 / 4)


def test_error_codes_over_time(run_dir: Path) -> None:
    completions = load_completions(run_dir)
    assert top_error_codes(completions) == [("E0308", 3)]
    counts = error_code_counts(completions).set_index("step")["count"].to_dict()
    assert counts == {1: 2, 2: 1, 3: 0}


def test_filter_completions(run_dir: Path) -> None:
    completions = load_completions(run_dir)
    assert len(filter_completions(completions, steps=(2, 3))) == 8
    best = float(completions["reward"].max())
    top = filter_completions(completions, rewards=(best - 0.01, best + 0.01))
    assert len(top) == 4 and set(top["verdict"]) == {"tests pass"}
    assert len(filter_completions(completions, error_code="E0308")) == 3
    assert len(filter_completions(completions, steps=(1, 1), error_code="none")) == 2
    table = completion_table(filter_completions(completions, error_code="E0308"))
    assert set(table["errors"]) == {"E0308"}
    assert "completion" not in table.columns


def test_reward_range_is_the_reward_filters_bounds() -> None:
    assert reward_range(pd.DataFrame({"reward": [0.25, 1.04, None]})) == (0.0, 1.1)  # a null reward counts as 0
    assert reward_range(pd.DataFrame({"reward": [0.5, 0.5]})) == (0.5, 0.6)  # never empty


def test_ema() -> None:
    values = pd.Series([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert ema(values, 0.0).tolist() == values.tolist()
    assert ema(pd.Series([2.0] * 5), 0.9).tolist() == pytest.approx([2.0] * 5)
    smoothed = ema(values, 0.8)
    assert smoothed.std() < values.std() / 2
    with pytest.raises(ValueError, match="smoothing"):
        ema(values, 1.0)


def test_reward_series_is_tidy(run_dir: Path) -> None:
    series = reward_series(load_metrics(run_dir), smoothing=0.5)
    assert sorted(series["series"].unique()) == sorted(REWARD_NAMES)
    assert len(series) == 3 * len(REWARD_NAMES)
    build = series[series["series"] == "build_reward"]
    assert build["value"].tolist() == pytest.approx([0.25, 0.75, 1.0])
    assert build["smoothed"].iloc[0] == pytest.approx(0.25)


def test_inspect_run_states(tmp_path: Path, run_dir: Path) -> None:
    assert inspect_run("").kind == "missing"
    assert inspect_run(tmp_path / "nope").kind == "missing"
    (tmp_path / "notes.txt").write_text("hi")
    assert inspect_run(tmp_path / "notes.txt").kind == "invalid"
    assert inspect_run(tmp_path).kind == "invalid"
    starting = tmp_path / "starting"
    starting.mkdir()
    (starting / "params.json").write_text("{}")
    (starting / "metrics.jsonl").write_text("")
    assert inspect_run(starting).kind == "empty"
    assert inspect_run(run_dir).ok


def test_metrics_being_written(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 1.0}\n{"step": 2, "rew')
    assert load_metrics(tmp_path)["step"].tolist() == [1]
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward": 1.0}\n{"step": 2, "rew\n{"step": 3}\n')
    with pytest.raises(RunLogError, match=r"metrics.jsonl:2"):
        load_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"reward": 1.0}\n')
    with pytest.raises(RunLogError, match=r"metrics.jsonl:1: .*'step'"):
        load_metrics(tmp_path)


def test_metrics_merge_repeated_steps(tmp_path: Path) -> None:
    lines = [{"step": 1, "reward": 1.0}, {"step": 2, "reward": 2.0}, {"step": 2, "reward": 3.0},
             {"step": 2, "train_runtime": 9.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    metrics = load_metrics(tmp_path)
    assert metrics["reward"].tolist() == [1.0, 3.0]
    assert metrics["train_runtime"].iloc[1] == 9.0


def test_bad_completion_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "completions").mkdir()
    bad = tmp_path / "completions" / "step_000001.parquet"
    pd.DataFrame({"step": [1], "completion": ["x"]}).to_parquet(bad)
    with pytest.raises(RunLogError, match=r"step_000001.parquet: missing column\(s\) reward, build_ok"):
        load_completions(tmp_path)
    bad.write_text("not parquet")
    with pytest.raises(RunLogError, match="step_000001.parquet: cannot read parquet"):
        load_completions(tmp_path)


def test_new_step_files_are_picked_up(tmp_path: Path) -> None:
    out = write_training_dir(tmp_path / "out", {1: [GOOD, TYPE_ERROR]})
    assert load_run(out).last_step == 1
    write_training_dir(out, {1: [GOOD, TYPE_ERROR], 2: [GOOD, GOOD]})
    run = load_run(out)
    assert run.last_step == 2
    assert len(run.completions) == 4


def test_charts_have_data(run_dir: Path) -> None:
    run = load_run(run_dir)
    for make in (charts.reward_chart, charts.components_chart, charts.length_chart, charts.signal_chart,
                 charts.time_chart, charts.share_chart):
        spec = make(run.metrics, 0.5).to_dict()
        assert spec["datasets"] and next(iter(spec["datasets"].values())), make.__name__
    policy = charts.policy_chart(run.metrics, 0.0).to_dict()
    series = {row["series"] for row in next(iter(policy["datasets"].values()))}
    assert series == {"entropy"}  # kl is not logged (beta = 0)
    assert charts.pass_rate_chart(run.completions).to_dict()["datasets"]
    assert charts.error_code_chart(run.completions).to_dict()["datasets"]
    flat = run.metrics.assign(reward=0.0)
    assert charts.reward_chart(flat, 0.5).to_dict()["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0.0, 1.0]
    empty = run.metrics[["step"]]
    assert charts.reward_chart(empty, 0.5) is None
    assert charts.error_code_chart(run.completions[run.completions["build_ok"]]) is None


def test_eval_dir(tmp_path: Path) -> None:
    out = write_eval_dir(tmp_path / "eval")
    assert inspect_eval(out).ok
    logs = load_eval(out)
    assert list(logs.summaries) == ["base", "grpo"]
    assert logs.summaries["grpo"].build_rate == pytest.approx(0.75)
    spec = charts.eval_chart(logs).to_dict()
    rows = next(iter(spec["datasets"].values()))
    build = {r["model"]: r for r in rows if r["metric"] == "build"}  # the table's wording
    assert build["base"]["value"] == pytest.approx(0.5)
    assert build["base"]["lo"] < 0.5 < build["base"]["hi"]
    assert charts.eval_error_chart(logs) is not None

    without_summary = write_eval_dir(tmp_path / "eval2", with_summary=False)
    assert load_eval(without_summary).summaries["base"].build_rate == pytest.approx(0.5)
    (out / "summary.json").write_text(json.dumps({"base": {"n": 3}}))
    with pytest.raises(RunLogError, match=r"summary.json: entry for model 'base'"):
        load_eval(out)
    assert inspect_eval(tmp_path).kind == "invalid"


def test_params_from_args() -> None:
    params = VizParams.from_args({"run": "runs/a", "smoothing": "0.3"})
    assert (params.run, params.smoothing, params.eval) == ("runs/a", 0.3, "")
    with pytest.raises(ValueError, match="--bogus"):
        VizParams.from_args({"bogus": "1"})
    with pytest.raises(ValueError, match="--smoothing"):
        VizParams.from_args({"smoothing": "2"})


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "viz.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, check=False)


@pytest.mark.slow
def test_script_mode_prints_a_summary(run_dir: Path, tmp_path: Path) -> None:
    done = _script("--run", str(run_dir))
    assert done.returncode == 0, done.stderr
    assert "last_step: 3" in done.stdout
    assert "\n  build: 1 (4 of 4)\n" in done.stdout and "\n  clippy: 0.75 (3 of 4)\n" in done.stdout
    assert "E0308 (3)" in done.stdout
    eval_dir = write_eval_dir(tmp_path / "eval")
    done = _script("--run", str(run_dir), "--eval", str(eval_dir))
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["model", "n", "tasks", "build", "clippy", "test"] == lines[-3][:6]
    assert [float(x) for x in lines[-2][1:4]] == [4, 4, 0.5] and lines[-2][0] == "base"
    assert [float(x) for x in lines[-1][1:4]] == [4, 4, 0.75] and lines[-1][0] == "grpo"
    done = _script("--run", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "nothing to show" in done.stdout and "not a training run" in done.stdout


def test_the_text_summary_says_what_each_pass_rate_is_a_share_of(run_dir: Path) -> None:
    head, *rates = pass_rate_lines(load_run(run_dir))
    assert head.startswith("pass rates of step 3's sampled completions") and "on-task answers only" in head
    assert "  build: 1 (4 of 4)" in rates and "  clippy: 0.75 (3 of 4)" in rates
    names = [line.split(":")[0].strip() for line in rates]
    assert len(names) >= 3 and names == [check for check in PASS_CHECKS if check in names]
    assert not any("pass" in key for key in run_overview(load_run(run_dir)))  # the rates are in these lines only


def test_a_supervised_run_shows_its_loss_and_no_rewards(tmp_path: Path) -> None:
    """``train.py --stage sft`` logs loss and token accuracy, no rewards and no completions."""
    (tmp_path / "params.json").write_text(json.dumps({"stage": "sft"}))
    lines = [{"step": s, "loss": 4.0 - s / 2, "mean_token_accuracy": 0.3 + s / 20, "learning_rate": 1e-4}
             for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert inspect_run(tmp_path).ok
    run = load_run(tmp_path)
    loss = next(iter(charts.loss_chart(run.metrics, 0.0).to_dict()["datasets"].values()))
    assert [row["value"] for row in loss] == [3.5, 3.0, 2.5]
    assert charts.token_accuracy_chart(run.metrics, 0.0) is not None
    assert charts.reward_chart(run.metrics, 0.5) is None and charts.pass_rate_chart(run.completions) is None
    assert run_overview(run)["loss"] == 2.5 and "reward" not in run_overview(run)
    done = _script("--run", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "loss: 2.5\n" in done.stdout and "last_step: 3" in done.stdout


def test_pass_rates_agree_with_the_rewards_for_answers_to_another_task() -> None:
    completions = pd.DataFrame({"step": [1, 1], "build_ok": [True, True], "clippy_ok": [True, False],
                                "tests_ok": [None, None], "hidden_ok": [False, True],
                                "off_task": [["add"], []], "forbidden": [[], ["unsafe code"]],
                                "mismatched": [[], ["add: expected fn(i32, i32) -> i32, found fn(i64, i64) -> i64"]]})
    rates = pass_rates(completions).set_index("check")["rate"].to_dict()
    # a signature mismatch is named apart from the hack flags (banned constructs)
    assert rates == {"on task": 0.5, "signatures match": 0.5, "no hack flag": 0.5, "build": 0.5,
                     "clippy": 0.0, "hidden tests": 0.5}
    encoding = charts.pass_rate_chart(completions).to_dict()["encoding"]
    assert encoding["strokeDash"]["field"] == encoding["color"]["field"] == "check"  # equal lines stay apart
