"""Held-out evaluation during training (``train.py --eval-tasks``, ``rust_rewards.train.evaluation``)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ROOT

from rust_rewards.data.bundled import EASY_TASKS
from rust_rewards.data.importers import load_tasks
from rust_rewards.report import Report
from rust_rewards.runs.records import load_metrics
from rust_rewards.sampling.engines import SamplingParams, render_chat
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.evaluation import (
    EVAL_KEYS,
    HeldOutEvalCallback,
    eval_file,
    eval_metrics,
    eval_mode,
    evaluate_policy,
    preserved_rng,
)
from rust_rewards.train.loop import run_training
from rust_rewards.train.resolve import validate_params

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
TRAJECTORY = ("reward", "reward_std", "loss", "grad_norm", "completions/mean_length", "learning_rate")


def row(task_id: str, sample: int, build: bool, clippy: bool, tests: bool, hidden: bool | None) -> dict:
    return {"model": "policy", "task_id": task_id, "sample": sample, "completion": "",
            **Report(has_code=True).flat(), "build_ok": build, "clippy_ok": clippy, "tests_ok": tests,
            "hidden_ok": hidden}


def test_eval_metrics_of_hand_made_rows():
    results = pd.DataFrame([
        row("a", 0, True, True, True, True),
        row("a", 1, True, False, False, False),
        row("b", 0, False, False, False, False),
        row("b", 1, True, True, False, True),
    ])
    m = eval_metrics(results)
    assert m["eval/build_rate"] == 0.75 and m["eval/clippy_rate"] == 0.5 and m["eval/test_rate"] == 0.25
    assert m["eval/hidden_pass_at_1"] == 0.5  # mean over tasks of c/n: (1/2 + 1/2) / 2
    assert m["eval/n"] == 4
    assert m["eval/hidden_pass_at_1_lo"] == pytest.approx(0.1500, abs=1e-4)  # Wilson 95% of 2/4
    assert m["eval/hidden_pass_at_1_hi"] == pytest.approx(0.8500, abs=1e-4)


def test_eval_metrics_without_hidden_tests():
    m = eval_metrics(pd.DataFrame([row("a", 0, True, False, False, None)]))
    assert m["eval/build_rate"] == 1.0
    assert m["eval/hidden_pass_at_1"] is None and m["eval/hidden_pass_at_1_lo"] is None


def test_rng_and_mode_are_restored():
    model = torch.nn.Linear(2, 2)
    model.train()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    with preserved_rng(), eval_mode(model):
        assert not model.training
        torch.manual_seed(99), random.random(), np.random.rand(5), torch.rand(10)
    assert model.training
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


class StandInEngine:
    """TRL's ``VLLMGeneration`` surface that the held-out evaluation uses (vLLM itself needs a GPU): rollout
    settings as attributes, ``sync_weights()`` and ``generate(prompts, images, num_generations)`` on token ids."""

    def __init__(self, answer_ids: list[int]) -> None:
        self.temperature, self.top_p, self.max_completion_length = 1.0, 1.0, 768
        self.answer_ids = answer_ids
        self.calls: list[tuple] = []

    def sync_weights(self) -> None:
        self.calls.append(("sync",))

    def generate(self, prompts, images, num_generations):
        self.calls.append(("generate", prompts, images, num_generations,
                           (self.temperature, self.top_p, self.max_completion_length)))
        return prompts, [list(self.answer_ids) for _ in prompts], None, None


def test_held_out_eval_samples_through_the_rollout_engine(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir, padding_side="left")
    task = next(t for t in load_tasks(str(EASY_TASKS)) if t.task_id == "ez-001-add-two-numbers")
    answer = "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```"
    engine = StandInEngine(tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    model = torch.nn.Linear(2, 2)
    sampling = SamplingParams(n=2, temperature=0.7, top_p=0.9, max_new_tokens=64, seed=3)
    rows = evaluate_policy(model, tokenizer, [task], sampling, engine=engine)
    assert engine.calls[0] == ("sync",) and len(engine.calls) == 2  # current weights first, one generate call
    _, prompts, images, per_prompt, settings = engine.calls[1]
    rendered = tokenizer(render_chat(tokenizer, task.prompt), add_special_tokens=False)["input_ids"]
    assert prompts == [rendered, rendered] and images is None and per_prompt == 1
    assert settings == (0.7, 0.9, 64)  # the evaluation's sampling during the call...
    assert (engine.temperature, engine.top_p, engine.max_completion_length) == (1.0, 1.0, 768)  # ...restored
    assert list(rows["completion"]) == [answer, answer] and not rows["truncated"].any()
    assert rows["hidden_ok"].all() and rows["build_ok"].all()


def test_held_out_eval_picks_the_rollout_engine_only_in_one_process(tmp_path):
    class Trainer:
        def __init__(self, use_vllm: bool, processes: int) -> None:
            self.use_vllm, self.vllm_generation = use_vllm, StandInEngine([])
            self.accelerator = type("Accelerator", (), {"num_processes": processes})()

    def backend(trainer: Trainer) -> tuple[str, bool]:
        callback = HeldOutEvalCallback(tmp_path, [], None, SamplingParams())
        return callback.use_rollout_engine(trainer), callback.engine is trainer.vllm_generation

    assert backend(Trainer(False, 1)) == ("hf", False)
    assert backend(Trainer(True, 1)) == ("vllm-rollouts", True)
    assert backend(Trainer(True, 2)) == ("hf", False)


def test_validation_names_the_flag(tmp_path):
    def check(**values):
        return validate_params(params_from_mapping({"preset": "tiny", **values}))

    with pytest.raises(ValueError, match="--eval-tasks .*no such file"):
        check(eval_tasks=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="--eval-n"):
        check(eval_tasks=str(BUNDLED), eval_n=0)
    with pytest.raises(ValueError, match="--eval-every"):
        check(eval_tasks=str(BUNDLED), eval_every=-1)
    with pytest.raises(ValueError, match="--eval-limit"):
        check(eval_tasks=str(BUNDLED), eval_limit=-2)
    with pytest.raises(ValueError, match="--eval-every 9 is more than --max-steps 4"):
        check(eval_tasks=str(BUNDLED), eval_every=9, max_steps=4)
    with pytest.raises(ValueError, match="--eval-every 2: needs --eval-tasks"):
        check(eval_every=2)
    assert check(eval_tasks=str(BUNDLED), eval_every=2, eval_limit=3).eval_n == 1


def tiny_run(out: Path, tiny_dir: Path, **extra):
    params = params_from_mapping({"preset": "tiny", "output-dir": str(out), "model": str(tiny_dir),
                                  "max-steps": 4, "save-steps": 4, "num-generations": 4,
                                  "per-device-train-batch-size": 8, **extra})
    return run_training(params, progress=None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir):
    """The same tiny 4-step run (same seed, 8 completions a step) with held-out evaluation every 2 steps and without
    any."""
    root = tmp_path_factory.mktemp("train_eval")
    tiny_run(root / "with", tiny_model_dir, eval_tasks=str(BUNDLED), eval_every=2, eval_limit=3, eval_n=1)
    tiny_run(root / "without", tiny_model_dir)
    return root / "with", root / "without"


@pytest.mark.slow
def test_eval_logged_at_steps_2_and_4_with_parquet(runs):
    out, _ = runs
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [x for x in lines if "eval/n" in x]
    assert [x["step"] for x in evals] == [2, 4]  # step 4 is the last: on_train_end does not evaluate it again
    for x in evals:
        assert set(EVAL_KEYS) <= set(x) and x["eval/n"] == 3 and x["eval/seconds"] > 0
        assert 0.0 <= x["eval/build_rate"] <= 1.0
        assert x["eval/hidden_pass_at_1_lo"] <= x["eval/hidden_pass_at_1"] <= x["eval/hidden_pass_at_1_hi"]
        print(f"step {x['step']}: eval/seconds {x['eval/seconds']:.2f}")
    metrics = load_metrics(out)  # viz's view: the eval line merges into its step's row
    assert metrics.set_index("step").loc[2, "eval/n"] == 3 and metrics.set_index("step").loc[2, "reward"] is not None
    for step in (2, 4):
        frame = pd.read_parquet(eval_file(out, step))
        assert len(frame) == 3 and frame["step"].eq(step).all()
        assert {"task_id", "sample", "completion", "build_ok", "hidden_ok", "internal_error"} <= set(frame.columns)
    assert not eval_file(out, 1).exists() and not eval_file(out, 3).exists()


@pytest.mark.slow
def test_eval_does_not_change_the_training_trajectory(runs):
    with_eval, without = (load_metrics(out).set_index("step") for out in runs)
    assert list(with_eval.index) == list(without.index) == [1, 2, 3, 4]
    for column in TRAJECTORY:
        assert with_eval[column].tolist() == without[column].tolist(), column
    assert not any(c.startswith("eval/") for c in without.columns)
    for step in range(1, 5):  # the rollouts themselves (sampled from torch's RNG) are identical
        name = f"completions/step_{step:06d}.parquet"
        a, b = (pd.read_parquet(out / name) for out in runs)
        assert a["completion"].tolist() == b["completion"].tolist(), step


def test_viz_draws_the_held_out_curve_only_when_logged(tmp_path):
    from rust_rewards.train.run_log import append_metrics
    from rust_rewards.ui.charts import held_out_chart

    for step in (1, 2, 3, 4):
        append_metrics(tmp_path, step, {"reward": 0.1 * step, "loss": 0.0})
    assert held_out_chart(load_metrics(tmp_path)) is None
    for step, rate in ((2, 0.25), (4, 0.5)):
        append_metrics(tmp_path, step, {"eval/hidden_pass_at_1": rate, "eval/build_rate": 2 * rate})
    spec = held_out_chart(load_metrics(tmp_path)).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert {(r["series"], r["step"], r["value"]) for r in rows} == {
        ("held-out hidden pass@1", 2, 0.25), ("held-out hidden pass@1", 4, 0.5),
        ("held-out build rate", 2, 0.5), ("held-out build rate", 4, 1.0)}
