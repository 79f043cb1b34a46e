"""``python NOTEBOOK.py --help`` prints every parameter with its help and exits 0, for all five notebooks."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from rust_rewards.data.pipeline import ProcessParams
from rust_rewards.eval.inference import InferenceParams
from rust_rewards.eval.scoring import EvalParams
from rust_rewards.params import flag_name, usage
from rust_rewards.runs.overview import VizParams
from rust_rewards.train.config import TrainParams


def _flags(notebook: str) -> list[str]:
    params = {"train.py": TrainParams, "eval.py": EvalParams, "inference.py": InferenceParams,
              "process_data.py": ProcessParams, "viz.py": VizParams}[notebook]
    return [flag_name(f.name) for f in dataclasses.fields(params)]


@pytest.mark.parametrize("notebook", ["train.py", "eval.py", "inference.py", "process_data.py", "viz.py"])
def test_help_lists_every_parameter_and_exits_0(notebook):
    out = subprocess.run([sys.executable, notebook, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith(f"usage: python {notebook}")
    missing = [flag for flag in _flags(notebook) if f"{flag} " not in out.stdout]
    assert missing == []


def test_usage_prints_each_group_once():
    for cls in (TrainParams, InferenceParams, EvalParams, ProcessParams, VizParams):
        headers = [line for line in usage(cls).splitlines() if line and not line.startswith(" ")]
        assert len(headers) == len(set(headers)), (cls.__name__, headers)
        assert sum(line.startswith("  --") for line in usage(cls).splitlines()) == len(dataclasses.fields(cls))


@pytest.mark.parametrize("argv, line", [
    (["eval.py", "--tasks", "qwen3-rust-finetune/easy_tasks.jsonl", "--predictions", "no/such.parquet"],
     "eval.py: --predictions: no such file: no/such.parquet"),
    (["inference.py", "--model", "no/such/model", "--tasks", "no/such.jsonl"],
     "inference.py: --tasks: no such file: no/such.jsonl"),
    (["process_data.py", "--source", "no/such.jsonl"], "process_data.py: --source: no such file: no/such.jsonl"),
])
def test_a_users_mistake_in_a_script_is_one_line_and_exit_2(argv, line, tmp_path):
    """Refused before torch, transformers or TRL are imported (``-X importtime`` names every module imported)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv, "--out", str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [x for x in proc.stderr.splitlines() if not x.startswith("import time:")][-1] == line
    assert not re.search(r"\|\s+(torch|transformers|trl)$", proc.stderr, re.MULTILINE)


@pytest.mark.parametrize("argv, line", [
    (["--smoothing", "2"], "viz.py: --smoothing must be within [0.0, 0.99], got 2.0"),
    (["--runs", "x"], "viz.py: unknown parameter --runs (did you mean --run?)"),
])
def test_a_users_mistake_in_viz_is_one_line_and_exit_2(argv, line):
    proc = subprocess.run([sys.executable, "viz.py", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == line


MODEL_REFUSALS = [
    ("./no-such-folder", "--model ./no-such-folder: no model folder there (expected a folder with config.json, or a "
                         "Hugging Face hub id such as Qwen/Qwen2.5-Coder-1.5B-Instruct)"),
    ("no/such/folder", "--model no/such/folder: no such folder, and not a Hugging Face hub id (owner/name)"),
    ("someone/not-cached-model", "--model someone/not-cached-model: not a folder here, not in the Hugging Face "
                                 "cache, and the Hub cannot be reached (offline?): pass a local model folder"),
]
SCRIPT_ARGS = {
    "train.py": ["--preset", "smollm2-cpu", "--output-dir"],
    "inference.py": ["--tasks", "qwen3-rust-finetune/easy_tasks.jsonl", "--out"],
}


@pytest.mark.parametrize("script", list(SCRIPT_ARGS))
@pytest.mark.parametrize("model, line", MODEL_REFUSALS)
def test_a_model_that_cannot_load_is_one_line_before_anything_is_written(script, model, line, tmp_path):
    """One check for every script that loads a model (rust_rewards.models.source)."""
    proc = subprocess.run([sys.executable, script, "--model", model, *SCRIPT_ARGS[script], str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"{script}: {line}"
    assert not (tmp_path / "run").exists()


BENCHMARK_ARGS = {
    "benchmarks/learning.py": ["--preset", "smollm2-cpu", "--model", "./no-such-folder", "--out", "OUT"],
    "benchmarks/generation.py": ["--models", "tiny,./no-such-folder", "--out", "OUT"],
    "benchmarks/cpu_generation.py": ["--model", "./no-such-folder"],
}


@pytest.mark.parametrize("script", list(BENCHMARK_ARGS))
def test_benchmarks_refuse_a_missing_model_folder_in_one_line(script, tmp_path):
    """Before the tiny model is built or anything is written (the shared check of models.source)."""
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in BENCHMARK_ARGS[script]]
    proc = subprocess.run([sys.executable, script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    flag = "--models" if "--models" in argv else "--model"
    assert proc.stderr.strip().splitlines() == [f"{flag} ./no-such-folder: no model folder there (expected a folder "
                                                "with config.json, or a Hugging Face hub id such as "
                                                "Qwen/Qwen2.5-Coder-1.5B-Instruct)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("script, flag", [("train.py", "--init-adapter"), ("inference.py", "--adapter")])
def test_an_adapter_that_is_no_adapter_folder_is_one_line(script, flag, tiny_model_dir, tmp_path):
    for adapter, what in ((tmp_path / "no-such-adapter", "no such folder"),
                          (tiny_model_dir, "no adapter_config.json there")):
        proc = subprocess.run([sys.executable, script, "--model", str(tiny_model_dir), flag, str(adapter),
                               *SCRIPT_ARGS[script], str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == (
            f"{script}: {flag} {adapter}: {what} (expected a LoRA adapter folder such as an SFT run's OUT/adapter)")
        assert not (tmp_path / "run").exists()


def test_an_output_dir_that_is_a_file_is_one_line_before_any_model_loads(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    proc = subprocess.run([sys.executable, "train.py", "--preset", "tiny", "--output-dir", str(taken / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = f"train.py: --output-dir {taken / 'run'}: {taken} is a file, not a folder"
    assert proc.stderr.strip().splitlines()[-1] == line


def test_an_unknown_task_id_in_eval_is_one_line(tmp_path):
    import pandas as pd

    predictions = tmp_path / "p.parquet"
    pd.DataFrame({"task_id": ["no-such-task"], "completion": ["x"]}).to_parquet(predictions)
    proc = subprocess.run([sys.executable, "eval.py", "--tasks", "qwen3-rust-finetune/easy_tasks.jsonl",
                           "--predictions", str(predictions), "--out", str(tmp_path / "e")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"eval.py: {predictions}:1: task_id 'no-such-task' is not")


def test_eval_names_the_file_and_row_of_a_malformed_predictions_line(tmp_path):
    predictions = tmp_path / "bad.jsonl"
    predictions.write_text('{"task_id": "ez-001-add-two-numbers", "completion": "x"}\n{"task_id": broken\n')
    proc = subprocess.run([sys.executable, "eval.py", "--tasks", "qwen3-rust-finetune/easy_tasks.jsonl",
                           "--predictions", str(predictions), "--out", str(tmp_path / "e")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"eval.py: {predictions}:2: not valid JSON")


def test_an_empty_task_file_is_refused_before_anything_is_written(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = subprocess.run([sys.executable, "process_data.py", "--source", str(empty), "--out", str(tmp_path / "o")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"process_data.py: --source {empty}: no tasks in it (nothing to " \
                                                   "process)"
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.parquet"))


@pytest.mark.parametrize(("content", "why"), [
    (None, "task file not found"), ("", "no tasks to train on"), ("{not json\n", "row 1: invalid JSON")])
def test_train_refuses_a_bad_task_file_in_one_line_before_any_model_loads(tmp_path, content, why):
    data = tmp_path / "tasks.jsonl"
    if content is not None:
        data.write_text(content)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "train.py", "--preset", "tiny", "--data", str(data), "--model",
                           str(tmp_path / "model"), "--build-tiny-model", "true", "--output-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"train.py: --data {data}: ") and why in line, line
    assert not (tmp_path / "model").exists()  # refused before the tiny model is built


def test_the_tiny_preset_refuses_a_model_folder_that_does_not_exist(tmp_path):
    """A mistyped --model would build and train a new tiny model there; only the preset's own folder, or an
    explicit --build-tiny-model true, builds one."""
    typo = tmp_path / "no-such-model"
    proc = subprocess.run([sys.executable, "train.py", "--preset", "tiny", "--model", str(typo), "--output-dir",
                           str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"train.py: --model {typo}: no such folder (the tiny "
                                                           "preset builds its model only at ")
    assert not typo.exists() and not (tmp_path / "run").exists()


def test_train_help_shows_the_defaults_a_bare_run_uses():
    from rust_rewards.train.config import DEFAULT_PRESET, params_from_mapping, preset_params

    bare = params_from_mapping({})
    assert bare == preset_params(DEFAULT_PRESET)
    text = usage(TrainParams, bare)
    assert f"[default: {bare.output_dir!r}]" in text and f"[default: {bare.max_steps!r}]" in text
