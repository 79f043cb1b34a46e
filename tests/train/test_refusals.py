"""train.py refuses, in one line and before any model loads, data that cannot train (too few tasks for a step, an
empty split, rows that all fail validation) and a run folder that holds another run (another stage, other settings);
``--overwrite`` moves that run aside, a resume may change what ``RESUMABLE`` allows. No test here trains: a model
folder that does not exist stays so, or the model build and the training are stubbed out."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

import rust_rewards.train.loop as loop
from rust_rewards.tasks import Task
from rust_rewards.train.cli import run_command_line
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.resolve import resolve_params
from rust_rewards.train.trainers import too_few_tasks

TASKS = [Task(name, f"Write `pub fn {name}(a: i32) -> i32`.", f"pub fn {name}(a: i32) -> i32 {{ a }}",
              f"#[test]\nfn t() {{ assert_eq!({name}(1), 1); }}", "unit") for name in ("one", "two", "three")]


def task_file(path: Path, tasks: list[Task]) -> Path:
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks))
    return path


def flags(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The tiny preset on the three tasks, its model in a folder that does not exist (a build would make it)."""
    return {"preset": "tiny", "data": str(task_file(tmp_path / "tasks.jsonl", TASKS)), "max-steps": "2",
            "model": str(tmp_path / "model"), "build-tiny-model": "true", "output-dir": str(tmp_path / "run"), **extra}


def refusal(values: dict[str, str], capsys) -> str:
    """The one line ``train.py`` refuses ``values`` with (exit code 2)."""
    with pytest.raises(SystemExit) as stop:
        run_command_line(values)
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def fake_run(out: Path, values: dict[str, str], trained: bool = True, **settings) -> dict:
    """A run folder as a run of ``values`` with ``settings`` changed left it: params.json and, when ``trained``, a
    finished checkpoint-2 and a metrics line."""
    record = {**dataclasses.asdict(resolve_params(params_from_mapping(values))), **settings, "derived": {}}
    out.mkdir(parents=True)
    (out / "params.json").write_text(json.dumps(record))
    if trained:
        (out / "checkpoint-2").mkdir()
        (out / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(
            {"global_step": 2, "max_steps": 2, "log_history": [{"step": 2, "loss": 0.5}]}))
        (out / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 0.5}) + "\n")
    return record


def test_fewer_tasks_than_a_grpo_step_samples_are_refused(tmp_path, capsys):
    values = flags(tmp_path, data=str(task_file(tmp_path / "one.jsonl", TASKS[:1])))
    assert refusal(values, capsys) == (
        f"train.py: --data {tmp_path / 'one.jsonl'}: 1 task, fewer than the 2 distinct prompts a GRPO step samples "
        "(--per-device-train-batch-size 16 x --gradient-accumulation-steps 1 / --num-generations 8), so not one step "
        "would train: give at least 2 tasks, or lower --per-device-train-batch-size to 8")
    line = refusal(flags(tmp_path, **{"max-tasks": "1"}), capsys)
    assert line.startswith("train.py: --max-tasks 1: 1 task, fewer than the 2 distinct prompts")
    assert not (tmp_path / "model").exists() and not (tmp_path / "run").exists()


def test_the_prompts_a_step_needs_count_every_process(monkeypatch):
    p = params_from_mapping({"preset": "tiny"})
    assert too_few_tasks(p, 2) is None
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert too_few_tasks(p, 4) is None
    assert too_few_tasks(p, 3) == (
        "3 tasks, fewer than the 4 distinct prompts a GRPO step samples (--per-device-train-batch-size 16 x "
        "--gradient-accumulation-steps 1 x 2 processes / --num-generations 8), so not one step would train: give at "
        "least 4 tasks, or lower --per-device-train-batch-size to 8")


def test_an_empty_eval_split_and_rows_that_all_fail_are_refused(tmp_path, capsys):
    empty = tmp_path / "eval.jsonl"
    empty.write_text("")
    assert refusal(flags(tmp_path, **{"eval-tasks": str(empty)}), capsys) == (
        f"train.py: --eval-tasks {empty}: no tasks in it (an empty eval split: give a task file with tasks, or leave "
        "--eval-tasks out)")
    assert "no tasks to train on" in refusal(flags(tmp_path, data=str(empty)), capsys)
    bad = task_file(tmp_path / "bad.jsonl", [dataclasses.replace(TASKS[0], task_id=f"t{i}", prompt=" ")
                                             for i in range(5)])
    line = refusal(flags(tmp_path, data=str(bad)), capsys)
    assert line.startswith(f"train.py: --data {bad}: 5 problem(s) in its rows (bad.jsonl row 1, field 'prompt': ")
    assert line.endswith("; and 2 more): fix them (process_data.py --source FILE validates a task file and names "
                         "every one)")
    assert not (tmp_path / "model").exists() and not (tmp_path / "run").exists()


def test_another_runs_settings_are_refused_naming_a_few(tmp_path, capsys):
    values = flags(tmp_path)
    out = tmp_path / "run"
    fake_run(out, values, preset="smollm2-cpu", model="smollm2-135m", data="easy.jsonl", lr=1e-4, temperature=0.7,
             max_steps=80)
    before = sorted(p.name for p in out.iterdir())
    line = refusal(values, capsys)
    assert line.startswith(f"train.py: --output-dir {out} holds another run, with other settings (--preset "
                           "'smollm2-cpu' -> 'tiny', --model 'smollm2-135m' -> '")
    assert ", --data 'easy.jsonl' -> '" in line and "--lr" not in line and "..." in line  # long paths cut
    assert line.endswith("tasks.jsonl' and 2 more; its params.json): add --overwrite to move it aside (to "
                         "run.old-<time>) and start anew, choose another --output-dir, or resume it with its own "
                         "settings (a resume may raise --max-steps)")
    assert sorted(p.name for p in out.iterdir()) == before and not (tmp_path / "model").exists()


def test_a_finished_run_names_a_changed_setting_and_resumes_with_resumable_ones(tmp_path, capsys):
    values = flags(tmp_path)
    out = tmp_path / "run"
    fake_run(out, values)
    assert refusal({**values, "lr": "1e-3"}, capsys).startswith(
        f"train.py: --output-dir {out} holds another run, with other settings (--lr 0.0005 -> 0.001; its params.json)")
    assert refusal({**values, "resume": "no"}, capsys) == (
        f"train.py: {out} already holds checkpoint-2: resume it (default) or choose another --output-dir")
    run_command_line({**values, "save-steps": "1", "wandb-project": "elsewhere"})  # only what a resume may change
    printed = capsys.readouterr().out
    assert f"{out / 'checkpoint-2'} is already at step 2 of 2: nothing to train (raise --max-steps" in printed
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(("earlier", "stage"), [("grpo", "sft"), ("sft", "grpo")])
def test_a_folder_of_another_stage_is_refused_in_one_line(tmp_path, capsys, earlier, stage):
    values = flags(tmp_path, stage=stage)
    out = tmp_path / "run"
    fake_run(out, values, trained=stage == "sft", stage=earlier)
    assert refusal(values, capsys) == (
        f"train.py: --output-dir {out} holds a {earlier} run (params.json): the {stage} stage needs its own "
        "--output-dir (it would resume the other stage's checkpoints), or add --overwrite to move it aside (to "
        "run.old-<time>) and start anew")


class Trained(Exception):
    """Raised where the stubbed run would train."""


@pytest.mark.parametrize("trained", [True, False])
def test_overwrite_moves_the_other_run_aside_and_an_untrained_one_is_restarted(tmp_path, capsys, monkeypatch,
                                                                               trained):
    """``--overwrite``: the other run moves to ``run.old-<time>`` and this start records its own settings; a folder
    whose start trained nothing takes the new settings without it (its other files stay)."""
    monkeypatch.setattr(loop, "build_tiny_model", lambda *args, **kwargs: None)
    monkeypatch.setattr(loop, "train_stage", lambda *args, **kwargs: (_ for _ in ()).throw(Trained()))
    values = flags(tmp_path, **({"overwrite": "true"} if trained else {}))
    out = tmp_path / "run"
    old = fake_run(out, values, trained=trained, lr=1e-4)
    (out / "pass_rates.json").write_text("{}")
    with pytest.raises(Trained):
        loop.run_training(params_from_mapping(values), progress=None)
    printed = capsys.readouterr().out
    assert json.loads((out / "params.json").read_text())["lr"] == 5e-4
    aside = sorted(tmp_path.glob("run.old-*"))
    if trained:
        assert len(aside) == 1 and f"--overwrite: the run that was in {out} (other settings) moved to {aside[0]}" \
            in printed
        assert json.loads((aside[0] / "params.json").read_text()) == old
        assert (aside[0] / "checkpoint-2" / "trainer_state.json").is_file()
        assert not (out / "checkpoint-2").exists() and not (out / "pass_rates.json").exists()
    else:
        assert not aside and f"{out}: its earlier start trained nothing; this start's settings replace its " \
            "params.json" in printed
        assert (out / "pass_rates.json").is_file()


def test_move_aside_keeps_the_log_its_process_writes(tmp_path):
    """A run the form started writes its output to ``OUT/train.log``: moving the old run aside leaves it there."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "params.json").write_text("{}")
    code = ("import sys; from pathlib import Path; from rust_rewards.train.checkpoints import move_aside; "
            "print('moved to', move_aside(Path(sys.argv[1])), flush=True)")
    with open(out / "train.log", "ab") as log:
        subprocess.run([sys.executable, "-c", code, str(out)], cwd=ROOT, stdout=log, check=True, timeout=120)
    (aside,) = tmp_path.glob("run.old-*")
    assert sorted(p.name for p in out.iterdir()) == ["train.log"] and (aside / "params.json").is_file()
    assert (out / "train.log").read_text() == f"moved to {aside}\n"


@pytest.mark.parametrize("free_gib", [0.5, 64.0])
def test_a_cpu_run_says_its_expected_peak_and_is_refused_when_it_cannot_fit(tmp_path, capsys, monkeypatch,
                                                                         tiny_model_dir, free_gib):
    """Before the model loads, a CPU GRPO run prints the peak memory it expects (``cpu_memory``); when that is above
    the machine's free memory it stops there, in one line naming the flag and the way out (exit 2)."""
    monkeypatch.setattr(loop, "build_tiny_model", lambda *args, **kwargs: None)
    monkeypatch.setattr(loop, "available_gib", lambda: free_gib)
    monkeypatch.setattr(loop, "train_stage", lambda *args, **kwargs: (_ for _ in ()).throw(Trained()))
    values = flags(tmp_path, model=str(tiny_model_dir))
    if free_gib < 1:
        line = refusal(values, capsys)
        assert line.startswith("train.py: --per-device-train-batch-size 16: this run needs about "), line
        assert "and this machine has 0.5 GiB free: lower --per-device-train-batch-size (to 8" in line
        assert not (tmp_path / "run").exists()  # refused before the run folder is claimed for training
        return
    with pytest.raises(Trained):
        loop.run_training(params_from_mapping(values), progress=None)
    printed = capsys.readouterr().out
    assert re.search(r"^memory: about \d+\.\d GiB peak on the CPU \(estimate: micro-batch 16, prompts up to \d+ \+ "
                     r"128 completion tokens\); 64\.0 GiB free$", printed, re.M), printed


def test_the_smollm2_preset_plans_under_4_gb_where_16_at_once_does_not():
    """``smollm2-cpu``'s micro-batches are set so its expected peak (SmolLM2-135M's shape, the easy tier's longest
    prompt, 259 tokens) stays under 4 GB; its 16 completions in one pass would not (measured: 9.55 GiB)."""
    from rust_rewards.train.config import preset_params
    from rust_rewards.train.cpu_memory import CpuRun, peak_gib
    from rust_rewards.train.gpu_plan import ModelShape

    smollm2 = ModelShape(hidden=576, intermediate=1536, layers=30, heads=9, kv_heads=3, vocab=49152, tied=True)
    p = preset_params("smollm2-cpu")
    run = CpuRun(p.per_device_train_batch_size, 16, 259, p.max_completion_length, p.lora_r, p.gradient_checkpointing)
    assert p.per_device_train_batch_size * p.gradient_accumulation_steps == 16
    assert peak_gib(smollm2, run) * 2**30 < 4e9
    assert peak_gib(smollm2, dataclasses.replace(run, micro_batch=16)) * 2**30 > 8e9
