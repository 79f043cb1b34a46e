"""train.py on CPU with the tiny local model and the real cargo-backed rewards.

One 2-step run is shared by the output, resume and adapter tests (module fixture); the logging path is
also checked directly with completions that cargo really compiles. Infrastructure failures of the
verifier are injected by replacing the local executor's ``verify_code`` in a fresh process verifier.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import ROOT
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerControl, TrainerState
from transformers.integrations import WandbCallback

import rust_rewards.verify.executors as executors
import rust_rewards.verify.verifier as verifier_module
from rust_rewards.report import Report
from rust_rewards.rewards import ASYNC_REWARD_FUNCS, RECIPES, REWARD_FUNCS
from rust_rewards.runs.records import load_completions
from rust_rewards.tasks import Task
from rust_rewards.train.callbacks import RunLogCallback
from rust_rewards.train.checkpoints import find_checkpoint
from rust_rewards.train.config import TrainParams, params_from_mapping, preset_params
from rust_rewards.train.loop import run_training
from rust_rewards.train.oxen_upload import upload_to_oxen
from rust_rewards.train.resolve import Machine, resolve_params, select_rewards
from rust_rewards.train.run_log import (
    InfrastructureError,
    RewardBatch,
    RewardRecorder,
    format_log_line,
)
from rust_rewards.train.trainers import build_grpo_trainer, eval_callbacks, sft_data, task_reports
from rust_rewards.train.trl_configs import grpo_config
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.verifier import Verifier, configure_verifier, get_verifier

pytestmark = pytest.mark.slow  # every test here launches a whole run, a cluster or an install

REWARD_NAMES = list(RECIPES["published"].weights)  # what the tiny preset trains with
FLAT_KEYS = list(Report(has_code=False).flat())
TASKS = [
    Task("add", "Write `pub fn add(a: i32, b: i32) -> i32` that returns the sum.",
         "pub fn add(a: i32, b: i32) -> i32 { a + b }",
         "#[test]\nfn adds() { assert_eq!(add(2, 3), 5); }", "unit"),
    Task("rev", "Write `pub fn rev(s: &str) -> String` that reverses a string.",
         "pub fn rev(s: &str) -> String { s.chars().rev().collect() }",
         "#[test]\nfn reverses() { assert_eq!(rev(\"ab\"), \"ba\"); }", "unit"),
    Task("sq", "Write `pub fn sq(x: i64) -> i64` that squares x.", "pub fn sq(x: i64) -> i64 { x * x }"),
    Task("max", "Write `pub fn max_of(v: &[i32]) -> Option<i32>`.",
         "pub fn max_of(v: &[i32]) -> Option<i32> { v.iter().copied().max() }",
         "#[test]\nfn finds() { assert_eq!(max_of(&[1, 3]), Some(3)); }", "unit"),
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("train")


@pytest.fixture(scope="module")
def tasks_file(workdir) -> Path:
    path = workdir / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in TASKS))
    return path


@pytest.fixture(scope="module")
def tiny_dir(tiny_model_dir) -> Path:
    return tiny_model_dir


def tiny_params(out: Path, tasks_file: Path, tiny_dir: Path, **overrides) -> TrainParams:
    """The tiny preset at half its group size and batch (4 x 2 prompts per step): the mechanics, faster."""
    return params_from_mapping({"preset": "tiny", "output-dir": str(out), "data": str(tasks_file),
                                "model": str(tiny_dir), "num-generations": 4, "per-device-train-batch-size": 8,
                                **overrides})


@pytest.fixture(scope="module")
def run(workdir, tasks_file, tiny_dir):
    """One tiny 2-step run (progress lines collected) shared by the tests below."""
    lines: list[str] = []
    params = tiny_params(workdir / "run", tasks_file, tiny_dir, max_steps=2, save_steps=2)
    result = run_training(params, progress=lambda s, m, logs: lines.append(format_log_line(s, m, logs)))
    return result, lines


def test_presets_and_cli_values():
    real = preset_params("real")
    assert (real.model, real.num_generations, real.max_completion_length) == (
        "Qwen/Qwen2.5-Coder-1.5B-Instruct", 8, 768)
    assert (real.lora_r, real.lora_alpha, real.lora_dropout, real.lora_target_modules) == (16, 64, 0.05, "all-linear")
    assert (real.lr, real.beta, real.temperature, real.max_grad_norm) == (2e-5, 0.0, 1.0, 0.1)
    assert (real.per_device_train_batch_size, real.gradient_accumulation_steps, real.prompts_per_step()) == (8, 4, 4)
    assert real.gradient_checkpointing and real.lr_scheduler_type == "cosine" and real.warmup_ratio == 0.1
    tiny = preset_params("tiny")
    assert tiny.build_tiny_model and tiny.num_generations == 8 and tiny.max_completion_length == 128
    assert (tiny.lr, tiny.max_grad_norm, tiny.prompts_per_step()) == (5e-4, 1.0, 2)

    p = params_from_mapping({"preset": "real", "max-steps": 3, "lr": 1e-5, "loss_type": "grpo", "resume": "",
                             "wandb": "", "bf16": "auto", "use-vllm": "false", "run-name": 7})
    assert (p.preset, p.max_steps, p.lr, p.loss_type, p.resume, p.wandb) == ("real", 3, 1e-5, "grpo", "yes", True)
    assert (p.bf16, p.use_vllm, p.run_name, p.num_generations) == (None, False, "7", 8)
    assert params_from_mapping({}).preset == "tiny"
    with pytest.raises(ValueError, match="unknown parameter --max-stepz"):
        params_from_mapping({"max-stepz": 2})
    with pytest.raises(ValueError, match="--max-steps: expected int"):
        params_from_mapping({"max-steps": "many"})
    with pytest.raises(ValueError, match="--wandb: expected true/false"):
        params_from_mapping({"wandb": "maybe"})
    with pytest.raises(ValueError, match="^--preset: expected one of tiny, smollm2-cpu, real; got huge$"):
        params_from_mapping({"preset": "huge"})


PATHS = Machine.here(files=False)
"""This machine, its files not asked: resolution's paths and values alone (the data and model checks:
tests/train/test_resolve.py)."""


def test_relative_paths(tmp_path, monkeypatch):
    """Preset defaults live under the repository root; paths the user types are relative to the cwd, else found
    under the workspace."""
    monkeypatch.chdir(tmp_path)
    defaults = resolve_params(params_from_mapping({}), PATHS)
    assert defaults.model == str(ROOT / "outputs" / "tiny-model")
    tools = resolve_params(params_from_mapping({"feedback-turns": 1, "max-completion-length": 320}), PATHS)
    assert tools.model == str(ROOT / "outputs" / "tiny-model-tools")  # warm-started to call cargo_check
    assert defaults.data == str(ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl") and defaults.max_tasks == 12
    assert defaults.output_dir == str(ROOT / "outputs" / "train-tiny") and defaults.run_name == "train-tiny"
    (tmp_path / "mine.jsonl").write_text("")
    typed = resolve_params(params_from_mapping({"output-dir": "runs/a", "data": "mine.jsonl", "model": "m"}), PATHS)
    assert (typed.output_dir, typed.data, typed.model) == (
        str(tmp_path / "runs" / "a"), str(tmp_path / "mine.jsonl"), str(tmp_path / "m"))
    # the one rule (workspace.find_path): a typed path that exists only under the workspace is that one, as the
    # form offers it
    easy = resolve_params(params_from_mapping({"data": "qwen3-rust-finetune/easy_tasks.jsonl"}), PATHS)
    assert easy.data == str(ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl")
    real = resolve_params(params_from_mapping({"preset": "real"}), PATHS)
    assert real.model == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert real.data == str(ROOT / "qwen3-rust-finetune" / "processed" / "train.parquet")
    assert resolve_params(params_from_mapping({"preset": "real", "data": "org/dataset"}), PATHS).data == "org/dataset"
    sft = resolve_params(params_from_mapping({"preset": "real", "stage": "sft"}), PATHS)
    assert sft.output_dir == str(ROOT / "outputs" / "sft-real") and sft.run_name == "sft-real"


def test_one_output_dir_holds_one_stage(tmp_path):
    """GRPO in an SFT run's folder would resume the SFT checkpoints: refused before anything loads."""
    (tmp_path / "params.json").write_text(json.dumps({"stage": "sft"}))
    with pytest.raises(ValueError, match="holds a sft run .*: the grpo stage needs its own --output-dir"):
        run_training(params_from_mapping({"output-dir": str(tmp_path)}), progress=None)


def test_real_preset_config_on_this_machine():
    p = resolve_params(params_from_mapping({"preset": "real"}), PATHS)
    if not torch.cuda.is_available():
        assert (p.bf16, p.use_cpu, p.use_vllm) == (False, True, False)
    cfg = grpo_config(p, [1.0] * len(REWARD_NAMES))
    assert (cfg.num_generations, cfg.max_completion_length, cfg.learning_rate, cfg.beta) == (8, 768, 2e-5, 0.0)
    assert cfg.generation_batch_size == 32 and cfg.steps_per_generation == 4
    assert cfg.loss_type == "dr_grpo" and cfg.scale_rewards == "none" and cfg.warmup_steps == 0.1
    assert cfg.mask_truncated_completions
    assert cfg.gradient_checkpointing and cfg.max_grad_norm == 0.1 and cfg.report_to == []
    with pytest.raises(ValueError, match="--num-generations 3 must divide the completions per step"):
        resolve_params(params_from_mapping({"preset": "real", "num-generations": 3}), PATHS)
    with pytest.raises(ValueError, match="--reward-weights"):
        select_rewards(dataclasses.replace(p, reward_weights="build_reward=x"))


def test_one_verifier_per_run_reaches_sft_rows_held_out_eval_and_step_logs(workdir, tasks_file, tiny_dir):
    """The run's verifier (here batch mode) verifies the SFT references, the held-out evaluation and the step logs;
    the process-wide one (direct mode here) is not asked."""
    bundled = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
    mine = Verifier(VerifierConfig(mode="batch"), workers=1)
    other = configure_verifier(VerifierConfig(mode="direct"), workers=1)
    try:
        p = resolve_params(tiny_params(workdir / "one-verifier", tasks_file, tiny_dir, stage="sft",
                                       eval_tasks=str(bundled)))
        rows = sft_data(p, TASKS, mine).rows
        assert rows and mine.stats["requested"] >= len(rows)
        (held_out,) = eval_callbacks(p, mine)
        assert held_out.verifier is mine
        grpo = build_grpo_trainer(resolve_params(tiny_params(workdir / "one-verifier-grpo", tasks_file, tiny_dir)),
                             TASKS, verifier=mine)
        log = next(c for c in grpo.callback_handler.callbacks if isinstance(c, RunLogCallback))
        assert log.verifier is mine and log.forget == mine.forget_failures
        assert other.stats["requested"] == 0
    finally:
        mine.close()
        configure_verifier()


def test_run_writes_params_metrics_completions_checkpoint(run, tasks_file):
    result, lines = run
    out = result.output_dir
    assert result.global_step == 2 and result.resumed_from is None
    assert (out / "checkpoint-2" / "adapter_model.safetensors").is_file()
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    card = (out / "README.md").read_text()
    assert "[None]" not in card and "a fine-tuned version of `" in card  # the local base model, named

    params = json.loads((out / "params.json").read_text())
    assert params["max_steps"] == 2 and params["data"] == str(tasks_file) and params["use_cpu"] is True
    assert set(params["derived"]["reward_weights"]) == set(REWARD_NAMES)
    assert (params["max_internal_error_share"], params["max_internal_error_steps"]) == (0.5, 3)
    history = [json.loads(line) for line in (out / "params_history.jsonl").read_text().splitlines()]
    assert len(history) == 1 and history[0].pop("started_at") and history[0] == params

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        for name in REWARD_NAMES:
            assert f"rewards/{name}/mean" in row
        assert row["step_time"] > 0 and row["reward_time"] > 0
        assert row["reward_share"] == pytest.approx(row["reward_time"] / row["step_time"])
        assert 0 < row["generation_time"] < row["step_time"]
        assert row["generation_share"] == pytest.approx(row["generation_time"] / row["step_time"])
        assert {"reward", "reward_std", "completions/mean_length", "learning_rate", "entropy"} <= set(row)
        assert (row["verify/completions"], row["verify/internal_errors"]) == (8, 0)
        assert isinstance(row["verify/timeouts"], int) and 0 <= row["verify/timeouts"] <= 8
    assert not any("INTERNAL ERRORS" in line for line in lines)
    assert len(lines) == 3 and lines[0].startswith("step 1/2 | reward") and lines[-1].startswith("done: 2 steps")

    for step in (1, 2):
        frame = pd.read_parquet(out / "completions" / f"step_{step:06d}.parquet")
        assert len(frame) == 8 and set(frame["step"]) == {step}
        assert set(frame["task_id"]) <= {t.task_id for t in TASKS} and frame["task_id"].nunique() == 2
        assert sorted(frame["sample"]) == [0, 0, 1, 1, 2, 2, 3, 3]
        assert {"prompt", "completion", "reward", *REWARD_NAMES, *FLAT_KEYS} <= set(frame.columns)
        prompts = {t.task_id: t.prompt for t in TASKS}
        assert all(prompts[t] == p for t, p in zip(frame["task_id"], frame["prompt"], strict=True))
        assert frame["completion"].str.len().gt(0).all()
        totals = frame[REWARD_NAMES].fillna(0).sum(axis=1)
        assert frame["reward"].fillna(0).tolist() == pytest.approx(totals.tolist())

    # The warm-started tiny model writes ```rust blocks that cargo really judges, so rewards vary.
    logged = pd.concat(pd.read_parquet(out / "completions" / f"step_{step:06d}.parquet") for step in (1, 2))
    judged = logged["has_code"] & (logged["build_ok"] | logged["error_codes"].map(len).gt(0))
    assert judged.any(), logged[["completion", "diagnostics"]].head().to_dict()
    assert any(row["reward_std"] > 0 for row in rows)


def test_resume_continues_from_checkpoint(run, tasks_file, tiny_dir):
    out = run[0].output_dir
    first_params = (out / "params.json").read_bytes()
    with pytest.raises(FileExistsError, match="checkpoint-2"):
        find_checkpoint(out, "no")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        find_checkpoint(out / "nothing-here", "yes")

    result = run_training(tiny_params(out, tasks_file, tiny_dir, max_steps=3, save_steps=2), progress=None)
    assert result.resumed_from == str(out / "checkpoint-2") and result.global_step == 3
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2, 3]
    assert (out / "completions" / "step_000003.parquet").is_file()
    assert (out / "params.json").read_bytes() == first_params
    starts = [json.loads(line) for line in (out / "params_history.jsonl").read_text().splitlines()]
    assert [(s["max_steps"], s["derived"]["resumed_from"]) for s in starts] == [
        (2, None), (3, str(out / "checkpoint-2"))]
    assert all(s["started_at"] for s in starts)

    shutil.rmtree(out / "adapter")
    again = run_training(tiny_params(out, tasks_file, tiny_dir, max_steps=3), progress=None)
    assert again.global_step == 3 and again.resumed_from == str(out / "checkpoint-3")
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3 and not (out / "checkpoint-4").exists()
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    assert not (out / "adapter" / "optimizer.pt").exists()
    assert (out / "params.json").read_bytes() == first_params

    # killed after step 3 was logged but before its checkpoint: the resumed run trains step 3 again, recorded once
    shutil.rmtree(out / "checkpoint-3")
    shutil.rmtree(out / "adapter")
    redone = run_training(tiny_params(out, tasks_file, tiny_dir, max_steps=3, save_steps=2), progress=None)
    assert redone.resumed_from == str(out / "checkpoint-2") and redone.global_step == 3
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    assert (out / "completions" / "step_000003.parquet").is_file()


def test_adapter_reloads_and_generates(run, tiny_dir):
    from peft import PeftModel

    adapter = run[0].adapter_dir
    assert (adapter / "adapter_config.json").is_file()
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == 16
    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    model = PeftModel.from_pretrained(base, adapter)
    assert any("lora_A" in name for name, _ in model.named_parameters())
    tok = AutoTokenizer.from_pretrained(adapter)
    enc = tok.apply_chat_template([{"role": "user", "content": "Reverse a string."}], add_generation_prompt=True,
                                  return_dict=True, return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=5, min_new_tokens=5, do_sample=False)
    assert out.shape[1] == enc["input_ids"].shape[1] + 5


GOOD = ("```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n"
        "    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n}\n```")
BAD = "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    \"a + b\"\n}\n```"


def test_logging_with_real_cargo_verdicts(tmp_path):
    """The recorder and the log callback on completions cargo really builds (one good, one broken)."""
    names = [f.__name__ for f in REWARD_FUNCS]  # every reward, not only the tiny preset's recipe
    recorder = RewardRecorder(ASYNC_REWARD_FUNCS)
    assert [f.__name__ for f in recorder.wrapped] == names
    assert all(asyncio.iscoroutinefunction(f) for f in recorder.wrapped)
    sync = RewardRecorder(REWARD_FUNCS).wrapped
    assert [f.__name__ for f in sync] == names and not any(map(asyncio.iscoroutinefunction, sync))
    assert RewardBatch([], [], {}, intervals=[(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]).reward_time == 4.0
    row = TASKS[0].to_row()
    columns = {k: [row[k]] * 2 for k in ("task_id", "reference_tests", "test_shape", "crate_name", "edition",
                                          "extra_files", "test_release")}
    completions = [[{"role": "assistant", "content": GOOD}], [{"role": "assistant", "content": BAD}]]
    prompts = [[{"role": "user", "content": TASKS[0].prompt}]] * 2
    logged: dict[str, float] = {}

    async def score_all():
        return await asyncio.gather(*(f(prompts=prompts, completions=completions, completion_ids=[[1], [2]],
                                        log_metric=logged.__setitem__, log_extra=None, trainer_state=None,
                                        **columns) for f in recorder.wrapped))

    scores = dict(zip(names, asyncio.run(score_all()), strict=True))
    assert scores["build_reward"] == [1.0, 0.0] and scores["hidden_test_reward"] == [2.0, 0.0]
    assert logged["reward_time"] > 0 and {f"reward_time/{n}" for n in names} <= set(logged)

    weights = {name: 1.0 for name in names} | {"test_reward": 2.0}
    callback = RunLogCallback(tmp_path, recorder, weights, task_reports(get_verifier()))
    state = TrainerState(global_step=5)
    callback.on_step_end(None, state, TrainerControl())
    frame = pd.read_parquet(tmp_path / "completions" / "step_000005.parquet")
    assert frame["build_ok"].tolist() == [True, False] and frame["tests_ok"].tolist() == [True, False]
    assert frame["hidden_ok"].tolist() == [True, False] and frame["hidden_total"].tolist() == [1, 1]
    assert "E0308" in list(frame["error_codes"][1])
    expected = [sum(weights[n] * (scores[n][i] or 0.0) for n in names) for i in (0, 1)]
    assert expected[1] == weights["format_reward"]  # the broken answer: only its format pays
    assert frame["reward"].tolist() == pytest.approx(expected)
    assert frame["completion"][0] == GOOD and frame["prompt"][0] == TASKS[0].prompt

    logs = {"loss": 0.5, "step_time": 4.0, "reward_time": 1.0, "generation_time": 2.0, "rewards/build_reward/mean": 0.5}
    callback.on_log(None, state, TrainerControl(), logs=logs)
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert line["step"] == 5 and line["reward_share"] == 0.25 and logs["reward_share"] == 0.25
    assert line["generation_share"] == 0.5
    assert (line["verify/completions"], line["verify/internal_errors"], line["verify/timeouts"]) == (2, 0, 0)
    assert "build 0.50" in format_log_line(5, 10, logs)
    assert "4.0 s/step (generation 50%, rewards 25%)" in format_log_line(5, 10, logs)


def test_wandb_sees_reward_share(tasks_file, tiny_dir, tmp_path, monkeypatch):
    """Our log callback runs before wandb's (it adds reward_share to the logs wandb receives)."""
    from transformers import PrinterCallback

    monkeypatch.setenv("WANDB_MODE", "offline")
    p = resolve_params(tiny_params(tmp_path / "out", tasks_file, tiny_dir, wandb=True))
    trainer = build_grpo_trainer(p, TASKS)
    kinds = [type(cb) for cb in trainer.callback_handler.callbacks]
    assert kinds.index(RunLogCallback) < kinds.index(WandbCallback)
    assert PrinterCallback not in kinds
    names = [f.__name__ for f in trainer.reward_funcs]
    assert names == REWARD_NAMES and trainer.args.report_to == ["wandb"]


def test_the_main_job_gives_grpo_groups_with_mixed_rewards(script_run):
    """README's main job must show GRPO at work: the tiny model recalls its starter tasks in part, so a group's
    completions earn different rewards (GRPO's advantage is zero in a tied group) and the loss is not zero."""
    completions = load_completions(script_run.out)
    distinct = completions.groupby(["step", "task_id"])["reward"].nunique()
    assert (distinct > 1).any(), distinct
    assert completions["hidden_ok"].any() and not completions["hidden_ok"].all()
    losses = [json.loads(line).get("loss") for line in (script_run.out / "metrics.jsonl").read_text().splitlines()]
    assert any(loss for loss in losses), losses


def test_script_mode_cli_with_offline_wandb(script_run):
    assert "step 2/2 | reward" in script_run.stdout and "done: 2 steps" in script_run.stdout
    assert "what changed: mean reward" in script_run.stdout.splitlines()[-1]
    assert json.loads((script_run.out / "params.json").read_text())["wandb"] is True
    assert (script_run.out / "adapter" / "adapter_model.safetensors").is_file()
    assert list((script_run.wandb_dir / "wandb").glob("offline-run-*"))


def test_oxen_upload_failure_only_warns(run, tmp_path, monkeypatch):
    monkeypatch.setenv("OXEN_CONFIG_DIR", str(tmp_path))
    with pytest.warns(UserWarning, match="Oxen upload to nobody/nothing"):
        error = upload_to_oxen(run[0].output_dir, "nobody/nothing", "runs/test")
    assert error and "nobody/nothing" in error


SANDBOX_DOWN = "sandbox did not start: bwrap: setting up uid map: Permission denied"


@pytest.fixture
def broken_verifier(monkeypatch):
    """A fresh process verifier (no cached verdicts) whose every verification fails for infrastructure reasons."""
    calls: list[str] = []

    def sandbox_down(code, *args, **kwargs):
        calls.append(code)
        raise RuntimeError(SANDBOX_DOWN)

    verifier = Verifier(workers=2)
    monkeypatch.setattr(verifier_module, "_DEFAULT", verifier)
    monkeypatch.setattr(executors, "verify_code", sandbox_down)
    yield verifier, calls
    verifier.close()


def test_internal_errors_stop_the_run_and_keep_the_last_checkpoint(workdir, tasks_file, tiny_dir, request):
    out = workdir / "broken"
    run_training(tiny_params(out, tasks_file, tiny_dir, max_steps=1, save_steps=1), progress=None)
    adapter = (out / "adapter" / "adapter_model.safetensors").read_bytes()

    verifier, calls = request.getfixturevalue("broken_verifier")
    lines: list[str] = []
    params = tiny_params(out, tasks_file, tiny_dir, max_steps=4, save_steps=1, max_internal_error_share=1.0,
                         max_internal_error_steps=2)
    with pytest.raises(InfrastructureError) as stopped:
        run_training(params, progress=lambda s, m, logs: lines.append(format_log_line(s, m, logs)))
    message = str(stopped.value)
    assert message.startswith("training stopped at step 3: 2 consecutive steps had internal errors")
    assert "step 2: 8/8, step 3: 8/8" in message and f"RuntimeError: {SANDBOX_DOWN}" in message
    assert message.endswith("resume from checkpoint-1.")

    # step 2's checkpoint was due but postponed (its step had internal errors), step 3 stopped: neither saved
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert (out / "adapter" / "adapter_model.safetensors").read_bytes() == adapter
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    counts = [(r["step"], r["verify/completions"], r["verify/internal_errors"]) for r in rows]
    assert counts == [(1, 8, 0), (2, 8, 8), (3, 8, 8)] and rows[1]["verify/timeouts"] == 0
    assert [line.split(" | ")[-1] for line in lines[:2]] == ["INTERNAL ERRORS 8/8"] * 2

    # Each step verified each distinct completion once: the seven rewards and the step's log shared one
    # (cached) internal-error report, and the next step retried it (forget_failures after each step).
    per_step = 8 * (len(REWARD_NAMES) + 1)
    assert verifier.stats["requested"] == 2 * per_step
    assert verifier.stats["verified"] == len(calls) <= 16
    assert verifier.forget_failures() == 0


def test_script_exits_with_the_infrastructure_message(workdir, tasks_file, tiny_dir):
    """More than half of step 1's completions failed: a fresh run stops there, writes nothing to resume from."""
    out = workdir / "broken-cli"
    script = (
        "import runpy, sys\n"
        "import rust_rewards.verify.executors as v\n"
        "def down(*a, **k):\n"
        f"    raise OSError({SANDBOX_DOWN!r})\n"
        "v.verify_code = down\n"
        f"sys.argv = ['train.py', '--preset', 'tiny', '--max-steps', '2', '--output-dir', {str(out)!r}, "
        f"'--model', {str(tiny_dir)!r}, '--data', {str(tasks_file)!r}, '--num-generations', '4', "
        "'--per-device-train-batch-size', '8']\n"
        f"runpy.run_path({str(ROOT / 'train.py')!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=workdir, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "INTERNAL ERRORS 8/8" in proc.stdout
    error = next(line for line in proc.stderr.splitlines() if line.startswith("train.py: "))
    assert error.startswith("train.py: training stopped at step 1: 8 of 8 completions (100%) had internal errors, "
                            "more than --max-internal-error-share 0.5"), proc.stderr[-3000:]
    assert f"OSError: {SANDBOX_DOWN}" in error and "no checkpoint was saved before" in error
    assert "Traceback" not in proc.stderr
    assert not list(out.glob("checkpoint-*")) and not (out / "adapter").exists()
    row = json.loads((out / "metrics.jsonl").read_text())
    assert (row["step"], row["verify/internal_errors"], row["verify/completions"]) == (1, 8, 8)


def test_ctrl_c_stops_in_one_line_and_the_resumed_run_records_each_step_once(tmp_path, tasks_file, tiny_dir):
    """Ctrl-C (SIGINT) during a real run: one line saying which checkpoint is kept, exit 130, no traceback; the same
    command resumes from it, says so, and ``metrics.jsonl`` holds each step once."""
    import signal

    out = tmp_path / "run"
    argv = [sys.executable, "train.py", "--preset", "tiny", "--model", str(tiny_dir), "--data", str(tasks_file),
            "--num-generations", "4", "--per-device-train-batch-size", "8", "--save-steps", "2",
            "--output-dir", str(out)]
    proc = subprocess.Popen([*argv, "--max-steps", "40"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    for line in proc.stdout:  # interrupt once step 3 is logged (checkpoint-2 written)
        lines.append(line)
        if line.startswith("step 3/"):
            proc.send_signal(signal.SIGINT)
            break
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Task was destroyed" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == ("train.py: stopped by Ctrl-C; checkpoint-2 kept; run the same command to "
                                            "resume from it")
    again = subprocess.run([*argv, "--max-steps", "4"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from checkpoint-2 (step 2 of 4)" in again.stdout
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
