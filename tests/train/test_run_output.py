"""What a newcomer sees (issue 48): a short summary before step 1 (not the whole config), progress while the tiny model
is built, no library warnings they cannot act on, one line for an inference rerun with nothing left to do, and a
model card of the run instead of TRL's stock one."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings

import pytest
from conftest import ROOT

from rust_rewards.eval.inference import InferenceParams, log_progress, run_inference
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.loop import run_training, start_summary
from rust_rewards.train.model_card import RunDescription
from rust_rewards.train.tiny_model import PROGRESS_LINES, WarmStart, build_tiny_model

TASKS = str(ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl")
LIBRARY_WARNING = re.compile(r"site-packages/(transformers|trl|peft)/")


def library_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """The future and deprecation warnings among ``caught`` (any FutureWarning; a DeprecationWarning from
    transformers, TRL or peft)."""
    return [f"{w.filename}: {w.message}" for w in caught if issubclass(w.category, FutureWarning)
            or issubclass(w.category, DeprecationWarning) and LIBRARY_WARNING.search(w.filename)]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_model_dir):
    """One tiny 1-step GRPO run in this process: its result, what it printed and the warnings it raised."""
    out = tmp_path_factory.mktemp("newcomer") / "run"
    params = params_from_mapping({"preset": "tiny", "output-dir": str(out), "model": str(tiny_model_dir),
                                  "max-steps": 1, "num-generations": 4, "per-device-train-batch-size": 8})
    printed = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(printed):
        warnings.simplefilter("always")
        result = run_training(params)
    return result, printed.getvalue(), caught


def test_start_summary_names_the_run_in_a_few_lines(tmp_path):
    out = tmp_path / "sft-run"
    p = params_from_mapping({"preset": "tiny", "stage": "sft", "output-dir": str(out), "max-steps": 3,
                             "init-adapter": "outputs/a/adapter"})
    lines = start_summary(p, RunDescription.of(p, {"build_reward": 1.0}, 12, 1.0))
    assert len(lines) <= 8
    assert lines[0] == "model: outputs/tiny-model + adapter outputs/a/adapter"
    assert "stage: sft (preset tiny), 3 steps" in lines and "each step: 16 rows" in lines
    assert not any(line.startswith("rewards:") for line in lines)  # the supervised stage has none
    assert lines[-1] == f"output: {out} (full settings: {out / 'params.json'})"


@pytest.mark.slow
def test_run_prints_a_summary_not_the_config(tiny_run, tiny_model_dir):
    result, printed, _ = tiny_run
    before_step = printed.split("step 1/1 |")[0].splitlines()
    assert '"derived"' not in printed and '"preset": ' not in printed
    assert len(before_step) <= 8, before_step
    assert f"model: {tiny_model_dir}" in before_step
    assert f"data: {TASKS}, 12 tasks" in before_step
    assert "each step: 2 prompts, a group of 4 completions each" in before_step
    assert any(line.startswith("rewards: build_reward (up to 1) x1, ") for line in before_step)
    assert f"output: {result.output_dir} (full settings: {result.output_dir / 'params.json'})" in before_step


@pytest.mark.slow
def test_run_raises_no_library_warnings(tiny_run):
    assert library_warnings(tiny_run[2]) == []


@pytest.mark.slow
def test_run_folder_readme_is_the_runs_model_card(tiny_run, tiny_model_dir):
    result, _, _ = tiny_run
    card = (result.output_dir / "README.md").read_text()
    assert "time machine" not in card and "pipeline(" not in card
    assert f"a fine-tuned version of `{tiny_model_dir}`" in card
    assert f"**adapter:** `{result.output_dir / 'adapter'}`\n" in card
    assert "**steps done:** 1 of 1" in card and "**final mean reward:** " in card
    assert f"marimo run viz.py -- --run {result.output_dir}" in card
    assert (f"python inference.py --model {tiny_model_dir} --adapter {result.output_dir / 'adapter'} "
            "--answer-format solution+tests") in card


@pytest.mark.slow
def test_inference_with_an_adapter_raises_no_library_warnings(tiny_run, tiny_model_dir, tmp_path):
    params = InferenceParams(model=str(tiny_model_dir), adapter=str(tiny_run[0].adapter_dir), tasks=TASKS, limit=1,
                             max_new_tokens=4, out=str(tmp_path / "preds.parquet"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_inference(params)
    assert library_warnings(caught) == []


def test_inference_rerun_says_nothing_is_left(tiny_model_dir, tmp_path, caplog):
    params = InferenceParams(model=str(tiny_model_dir), tasks=TASKS, limit=2, n=2, max_new_tokens=4,
                             out=str(tmp_path / "preds.parquet"))
    caplog.set_level(logging.INFO, logger="inference")
    run_inference(params, progress=log_progress)
    caplog.clear()
    run_inference(params, progress=log_progress)
    assert [r.getMessage() for r in caplog.records] == [
        f"all 4 completions already in {params.out}; nothing to generate"]


def test_tiny_model_build_says_what_it_does(tmp_path, capsys):
    folder = tmp_path / "tiny"
    build_tiny_model(folder, warm_start=WarmStart(steps=16, batch_size=4))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"building the tiny model in {folder} (once")
    assert len(lines) == PROGRESS_LINES + 2 and lines[-1] == f"tiny model ready in {folder}"
    assert re.fullmatch(rf"building the tiny model in {folder}, warm start: 16/16 steps \(loss \d+\.\d\d\), "
                        r"[\d.]+ steps/(s|min), took \d+ s", lines[-2])
    build_tiny_model(folder, warm_start=WarmStart(steps=16, batch_size=4))
    assert capsys.readouterr().out == ""  # reused: nothing to say
