"""train.py's form and job control: parameters <-> command-line flags, form values -> validated params, the typed
controls built from ``TrainParams``, and a clean stop (``STOP`` file -> checkpoint -> resume), in process and
through ``start_job``'s subprocess.

The flags are parsed with marimo's own parser (``marimo._cli.parse_args.parse_args``: what ``mo.cli_args()``
gives ``python train.py FLAGS``), so the round trip is the one a job started from the form goes through.
The two training tests use the tiny model at its smallest group (2 completions of 1 prompt per step).
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from conftest import ROOT
from marimo._cli.parse_args import parse_args

from rust_rewards.layout import STOP_FILE
from rust_rewards.params import info_of
from rust_rewards.rewards import DEFAULT_WEIGHTS, RECIPES, REWARD_FUNCS
from rust_rewards.tasks import Task
from rust_rewards.train.config import (
    LOSS_TYPES,
    PRESETS,
    REWARD_CHOICES,
    TrainParams,
    params_from_mapping,
    preset_params,
)
from rust_rewards.train.jobs import cli_flags, cli_text, start_job
from rust_rewards.train.loop import run_training
from rust_rewards.train.resolve import select_rewards, validate_params
from rust_rewards.ui.forms import NONE_LABEL, control, param_controls
from rust_rewards.ui.train_view import field_problem, form_params, reward_weight_controls

REWARD_NAMES = [f.__name__ for f in REWARD_FUNCS]
FORM_SKIP = ("preset", "rewards", "reward_weights")  # the notebook's own controls for these
TASKS = [
    Task("add", "Write `pub fn add(a: i32, b: i32) -> i32` that returns the sum.",
         "pub fn add(a: i32, b: i32) -> i32 { a + b }",
         "#[test]\nfn adds() { assert_eq!(add(2, 3), 5); }", "unit"),
    Task("sq", "Write `pub fn sq(x: i64) -> i64` that squares x.", "pub fn sq(x: i64) -> i64 { x * x }"),
]


def from_flags(flags: list[str]) -> TrainParams:
    """``flags`` as ``python train.py FLAGS`` reads them: marimo's CLI parser, then ``params_from_mapping``."""
    return params_from_mapping(parse_args(flags))


def form_of(params: TrainParams):
    """The notebook's controls for ``params``: the typed fields, the reward multiselect, the reward weights."""
    controls = param_controls(TrainParams, params, ROOT, skip=FORM_SKIP)
    rewards = control("rewards", list[str], params.rewards, info_of(TrainParams)["rewards"], ROOT)
    return controls, rewards, reward_weight_controls(rewards.value, params)


def callout_text(element) -> str:
    return html.unescape(html.unescape(element.text))


# --- flags ---------------------------------------------------------------------------------------------------


def test_cli_text_writes_values_as_the_command_line_reads_them():
    assert [cli_text(v) for v in (None, True, False, ["a", "b"], 3, 2.5e-4, "x y")] == [
        "auto", "true", "false", "a,b", "3", "0.00025", "x y"]


@pytest.mark.parametrize("preset, changes", [
    ("tiny", dict(max_steps=3, lr=3e-4, rewards=["build_reward", "test_reward"], wandb=True,
                  gradient_checkpointing=True, use_vllm=None, bf16=False, loss_type="grpo", temperature=0.7,
                  output_dir="/tmp/runs/a b", run_name="seven", lora_target_modules="q_proj,v_proj")),
    ("real", dict(max_steps=2, dry_run=True, rewards=["hidden_test_reward"], use_cpu=True, num_generations=4,
                  verifier_mode="batch", resume="no")),
])
def test_flags_round_trip(preset, changes):
    p = dataclasses.replace(preset_params(preset), **changes)
    flags = cli_flags(p)
    assert flags[:2] == ["--preset", preset]
    named = [flag.partition("=")[0] for flag in flags[2:]]
    assert sorted(named) == sorted("--" + k.replace("_", "-") for k in changes)  # only what differs
    back = from_flags(flags)
    assert back == p
    assert back.rewards == changes["rewards"] and isinstance(back.rewards, list)
    assert cli_flags(preset_params(preset)) == ["--preset", preset]
    # the flags' text also reads back without marimo's number and true/false conversions
    texts = dict(flag.lstrip("-").partition("=")[::2] for flag in flags[2:])
    assert params_from_mapping({"preset": preset, **texts}) == p


@pytest.mark.parametrize("changes", [
    dict(max_steps=-1),  # marimo's parser reads `--max-steps -1` as two flags
    dict(reward_weights="test_reward=2,build_reward=0.5"),  # and splits `--reward-weights a=2` at the `=`
])
def test_flags_the_form_can_produce_round_trip(changes):
    """max steps -1 (epochs) and a changed reward weight are both reachable from the form."""
    p = validate_params(dataclasses.replace(preset_params("tiny"), **changes))
    assert from_flags(cli_flags(p)) == p


def test_flags_as_a_user_types_them_survive_marimos_parser():
    """``--max-steps -1`` and ``--reward-weights a=2,b=0.5`` typed with a space, as README shows them."""
    p = from_flags(["--preset", "tiny", "--max-steps", "-1", "--reward-weights", "test_reward=2,build_reward=0.5",
                    "--wandb", "--lr", "0.001"])
    assert (p.max_steps, p.reward_weights, p.wandb, p.lr) == (-1, "test_reward=2,build_reward=0.5", True, 0.001)
    with pytest.raises(ValueError, match=r"^--lr must be within \[0.0, 1.0\], got -0.5$"):
        from_flags(["--preset", "tiny", "--lr", "-0.5"])  # read as typed, then refused by its bounds
    with pytest.raises(ValueError, match="-1 is given more than once: write negative values as --flag=-1"):
        from_flags(["--max-steps", "-1", "--save-steps", "-1"])  # marimo's parser merges the two


# --- form values -> params -----------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_untouched_form_gives_the_preset(preset):
    controls, rewards, weights = form_of(preset_params(preset))
    assert form_params(preset, {**controls.value, "rewards": rewards.value}, weights.value) == preset_params(preset)


def test_form_values_and_weights_apply_onto_the_preset():
    controls, _, _ = form_of(preset_params("tiny"))
    values = {**controls.value, "max_steps": 5, "lr": 1e-4, "loss_type": "grpo", "use_vllm": "auto", "bf16": "false",
              "wandb": True, "num_generations": 4, "per_device_train_batch_size": 8, "init_adapter": "",
              "rewards": ["build_reward", "test_reward", "clippy_reward"]}
    weights = {"build_reward": 1.0, "test_reward": 2.5, "clippy_reward": 0.0}
    p = form_params("tiny", values, weights)
    assert p == dataclasses.replace(
        preset_params("tiny"), max_steps=5, lr=1e-4, loss_type="grpo", use_vllm=None, bf16=False, wandb=True,
        num_generations=4, per_device_train_batch_size=8, rewards=["build_reward", "test_reward", "clippy_reward"],
        reward_weights="test_reward=2.5,clippy_reward=0")
    funcs, applied = select_rewards(p)
    assert [f.__name__ for f in funcs] == ["build_reward", "test_reward", "clippy_reward"]
    assert applied == {"build_reward": 1.0, "test_reward": 2.5, "clippy_reward": 0.0}
    # the weights' controls start from the params' weights
    assert reward_weight_controls(p.rewards, p).value == applied


@pytest.mark.parametrize("values, weights, message", [
    ({"num_generations": 3}, {}, r"^--num-generations 3 must divide .* \(16\)"),
    ({"gradient_accumulation_steps": 3, "per_device_train_batch_size": 2, "num_generations": 4}, {},
     r"^--num-generations 4 must divide .* \(6\)"),
    ({"max_steps": -2}, {}, r"^--max-steps must be >= -1, got -2$"),
    ({"max_steps": 0}, {}, r"^--max-steps 0 would still train one step"),
    ({"loss_type": "ppo"}, {}, r"^--loss-type: expected one of dapo, grpo, .*; got ppo$"),
    ({"feedback_turns": 2}, {}, r"^--feedback-turns 2: .* --max-completion-length 128, .*use at least"),
    ({"resume": "nowhere/checkpoint-9"}, {}, r"^--resume: expected one of .* or a checkpoint folder"),
    ({"rewards": []}, {}, r"^--rewards: expected one recipe \(correctness, published\) or reward names"),
    ({"rewards": ["correctness", "build_reward"]}, {}, r"^--rewards: expected one recipe"),
    ({"rewards": ["correctness"]}, {"build_reward": -1.0}, r"^--reward-weights: 'build_reward=-1' needs a weight"),
    ({"rewards": ["test_reward"], "answer_format": "solution"}, {},
     r"^--rewards test_reward: pays for the model's own tests, which --answer-format solution does not ask"),
    ({"rewards": ["build_reward"]}, {"test_reward": 2.0}, r"^--reward-weights: expected name=weight"),
])
def test_form_rejects_with_the_flag_named(values, weights, message):
    with pytest.raises(ValueError, match=message):
        form_params("tiny", values, weights)


def test_field_problem_places_a_flag_in_its_group():
    text = callout_text(field_problem("--max-steps must be >= -1, got -2"))
    assert "Run › max steps" in text and "--max-steps must be >= -1, got -2" in text
    assert "Optimizer › lr" in callout_text(field_problem("--lr: expected float, got 'x'"))


def test_field_problem_renders_bold_not_asterisks():
    for message in ("--max-steps must be >= -1, got -2", "something without a flag"):
        assert "**" not in callout_text(field_problem(message))


def test_batch_problem_is_placed_in_its_group():
    with pytest.raises(ValueError) as err:
        form_params("tiny", {"num_generations": 3}, {})
    assert "GRPO › num generations" in callout_text(field_problem(str(err.value)))


# --- controls --------------------------------------------------------------------------------------------------


def test_controls_follow_the_parameter_definitions():
    p = preset_params("tiny")
    infos = info_of(TrainParams)
    controls, rewards, weights = form_of(p)
    names = [f.name for f in dataclasses.fields(TrainParams)]
    assert list(controls.elements) == [n for n in names if n not in FORM_SKIP]

    for name, info in infos.items():
        if name in FORM_SKIP:
            continue
        element = controls[name]
        if info.choices:  # a dropdown of exactly the declared choices, holding the preset's value
            assert list(element.options) == list(info.choices), name
            assert element.value == getattr(p, name)
        elif info.files:
            assert getattr(p, name) in element.options.values() and "searchable" in element.text, name
        elif info.bounds != (None, None) and isinstance(getattr(p, name), int | float) \
                and not isinstance(getattr(p, name), bool):
            assert (element.start, element.stop) == info.bounds, name
            assert element.value == getattr(p, name)
    assert list(controls["loss_type"].options) == list(LOSS_TYPES)
    assert (controls["num_generations"].start, controls["num_generations"].stop, controls["num_generations"].step) \
        == (2, 256, 1)
    assert (controls["lr"].start, controls["lr"].stop, controls["lr"].step) == (0.0, 1.0, 1e-6)
    assert (controls["max_steps"].start, controls["max_steps"].stop) == (-1, None)
    assert (controls["feedback_turns"].start, controls["feedback_turns"].stop) == (0, 16)
    # flags: a switch; optional flags: auto/true/false; an empty path: the (none) entry
    assert controls["wandb"].value is False and controls["gradient_checkpointing"].value is False
    assert list(controls["bf16"].options) == ["auto", "true", "false"] and controls["bf16"].value == "auto"
    assert controls["use_vllm"].value == "false"
    assert controls["init_adapter"].value == "" and NONE_LABEL in controls["init_adapter"].options

    assert list(rewards.options) == list(REWARD_CHOICES) and rewards.value == p.rewards
    assert list(weights.elements) == list(RECIPES[p.rewards[0]].weights)
    assert weights.value == RECIPES[p.rewards[0]].weights
    published = reward_weight_controls(["published"], p)
    assert published.value == DEFAULT_WEIGHTS and "format_reward" not in published.value
    two = reward_weight_controls(["test_reward", "build_reward"],
                                 dataclasses.replace(p, reward_weights="test_reward=3"))
    assert two.value == {"test_reward": 3.0, "build_reward": 1.0}
    assert (two["test_reward"].start, two["test_reward"].stop) == (0.0, 100.0)
    assert reward_weight_controls([], p).value == {}


def test_a_value_outside_the_choices_stays_visible():
    """A command-line value the choices lack is kept as an option (shown, then rejected by validation)."""
    odd = dataclasses.replace(preset_params("tiny"), loss_type="custom")
    controls = param_controls(TrainParams, odd, ROOT, skip=FORM_SKIP)
    assert list(controls["loss_type"].options) == [*LOSS_TYPES, "custom"] and controls["loss_type"].value == "custom"
    with pytest.raises(ValueError, match="--loss-type: expected one of"):
        form_params("tiny", controls.value, {})


# --- stop and resume ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in TASKS))
    return path


def tiny_run(out: Path, tasks_file: Path, model: Path, **overrides) -> TrainParams:
    """The tiny preset at its smallest: 2 completions of 1 prompt per step, short completions, no periodic
    checkpoints (only the one a stop or the end writes)."""
    return validate_params(params_from_mapping({
        "preset": "tiny", "output-dir": str(out), "data": str(tasks_file), "model": str(model),
        "num-generations": 2, "per-device-train-batch-size": 2, "max-completion-length": 64, "save-steps": 100,
        **overrides}))


def logged_steps(out: Path) -> list[int]:
    steps = []
    file = out / "metrics.jsonl"
    for line in file.read_text().splitlines() if file.is_file() else []:
        try:
            steps.append(json.loads(line)["step"])
        except (json.JSONDecodeError, KeyError):
            pass  # a line being written
    return steps


def checkpoints(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("checkpoint-*"))


def test_stop_file_ends_the_run_with_a_checkpoint_and_resume_finishes(tmp_path, tasks_file, tiny_model_dir, capsys):
    """Stop pressed once step 1 is logged: the run ends after the step in progress (step 2) with its checkpoint,
    says it stopped, removes the STOP file; a rerun resumes there and finishes (a stale STOP does not stop it)."""
    out = tmp_path / "run"
    pressed: list[int] = []

    def press_stop_after_step_1(step, max_steps, logs):
        if step == 1 and not pressed:
            (out / STOP_FILE).touch()
            pressed.append(step)

    result = run_training(tiny_run(out, tasks_file, tiny_model_dir, max_steps=3), progress=press_stop_after_step_1)
    assert pressed == [1]
    assert result.stopped and result.global_step == 2 and result.resumed_from is None
    assert checkpoints(out) == ["checkpoint-2"]
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    assert not (out / STOP_FILE).exists()
    assert logged_steps(out) == [1, 2]
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()
    assert "stopped on request at step 2 of 3: checkpoint-2 kept" in capsys.readouterr().out

    (out / STOP_FILE).touch()  # left over from a run before this process: removed at the start, stops nothing
    os.utime(out / STOP_FILE, (time.time() - 3600, time.time() - 3600))
    resumed = run_training(tiny_run(out, tasks_file, tiny_model_dir, max_steps=3), progress=None)
    assert not resumed.stopped and resumed.global_step == 3
    assert resumed.resumed_from == str(out / "checkpoint-2")
    assert logged_steps(out) == [1, 2, 3] and "checkpoint-3" in checkpoints(out)
    assert not (out / STOP_FILE).exists()
    assert "stopped on request" not in capsys.readouterr().out


def kill_job(job) -> None:
    """End a job's whole process group (``start_job`` starts a new session) if it is still running."""
    if job.process.poll() is None:
        os.killpg(job.process.pid, signal.SIGKILL)
        job.process.wait(timeout=30)


@pytest.mark.slow
def test_start_job_runs_in_its_own_process_and_stops_cleanly(tmp_path, tasks_file, tiny_model_dir):
    """Stop pressed once step 1 is logged: the process ends with exit 0 after the step in progress, with its
    checkpoint and the adapter; the log says so. (Tiny steps take under a second: many steps of margin.)"""
    out = tmp_path / "job"
    job = start_job(tiny_run(out, tasks_file, tiny_model_dir, max_steps=20))
    try:
        assert (job.output_dir, job.max_steps, job.log) == (out, 20, out / "train.log")
        deadline = time.monotonic() + 300
        while not logged_steps(out) and job.returncode() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.returncode() is None and logged_steps(out), job.log_tail(40)
        assert not job.stopping()
        job.stop()
        assert job.stopping() and (out / STOP_FILE).is_file()
        job.process.wait(timeout=300)
        tail = job.log_tail(40)
        assert job.returncode() == 0, tail
        assert not job.stopping() and not (out / STOP_FILE).exists()
        stopped = re.search(r"stopped on request at step (\d+) of 20: checkpoint-(\d+) kept", tail)
        assert stopped and stopped[1] == stopped[2], tail
        step = int(stopped[1])
        assert 1 < step < 20  # after the step in progress when Stop was pressed, well before the last
        assert checkpoints(out) == [f"checkpoint-{step}"]
        assert logged_steps(out) == list(range(1, step + 1))
        assert (out / "adapter" / "adapter_model.safetensors").is_file()
        assert "step 1/20 | reward" in job.log.read_text()
        job.stop()  # the run has ended: nothing to stop, no STOP file left behind for the next run
        assert not (out / STOP_FILE).exists()
    finally:
        kill_job(job)


@pytest.mark.slow
def test_stop_pressed_while_the_job_starts_is_kept(tmp_path, tasks_file, tiny_model_dir):
    out = tmp_path / "job"
    job = start_job(tiny_run(out, tasks_file, tiny_model_dir, max_steps=3))
    try:
        job.stop()
        assert job.stopping()
        job.process.wait(timeout=300)
        assert job.returncode() == 0, job.log_tail(40)
        assert "stopped on request at step 1 of 3" in job.log_tail(40)
    finally:
        kill_job(job)


def test_a_problem_shows_under_its_control_and_leaves_the_fold():
    """The validation message appears in red under the field its flag names; an advanced field is unfolded."""
    from rust_rewards.ui.forms import param_panel, problem_field

    controls, _, _ = form_of(preset_params("tiny"))
    assert info_of(TrainParams)["beta"].advanced
    assert problem_field(TrainParams, "sampling needs --nothing-here and --beta >= 0") == "beta"
    assert problem_field(TrainParams, "no flag at all") is None
    message = "--beta must be >= 0.0, got -1.0"
    plain = callout_text(param_panel(controls, TrainParams))
    shown = callout_text(param_panel(controls, TrainParams, problem=message))
    assert message not in plain and shown.count(message) == 1
    assert shown.index(message) < shown.index("Advanced: ")  # beta moved out of the folded section
    assert plain.index("beta") > plain.index("Advanced: ")
