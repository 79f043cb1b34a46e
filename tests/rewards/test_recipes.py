"""Rewards that pay for correctness: no reward for a cut-off answer, named recipes and their weights, one parser of
weights for the form and the command line, the answer format reaching every consumer, the pass-rate filter."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from rust_rewards.data.bundled import EASY_TASKS
from rust_rewards.data.dpo_pairs import build_pairs
from rust_rewards.data.importers import load_tasks
from rust_rewards.data.sft_rows import sft_answer, sft_rows
from rust_rewards.eval.metrics import detectable_gain, paired_difference
from rust_rewards.eval.predictions import generate_predictions
from rust_rewards.prompts import SYSTEM_PROMPTS, system_prompt
from rust_rewards.report import Report
from rust_rewards.rewards import (
    DEFAULT_WEIGHTS,
    MAX_TOTAL,
    RECIPES,
    VerifiedReward,
    resolve_weights,
    reward_functions,
    rewards_from_report,
    weighted_total,
)
from rust_rewards.rewards.feedback import feedback_message
from rust_rewards.rewards.recipes import parse_weights
from rust_rewards.sampling.engines import SamplingParams, make_generator, render_chat
from rust_rewards.tasks import REWARD_COLUMNS
from rust_rewards.train.config import params_from_mapping, preset_params
from rust_rewards.train.pass_rates import NoSignalError, PassRates, sample_pass_rates, tasks_with_signal
from rust_rewards.train.resolve import select_rewards, validate_params
from rust_rewards.train.trainers import task_dataset
from rust_rewards.train.trl_configs import grpo_config
from rust_rewards.verify.verifier import get_verifier

ADD = next(t for t in load_tasks(str(EASY_TASKS)) if t.task_id.startswith("ez-001"))
CORRECT = f"```rust\n{ADD.reference_code.strip()}\n```"
END = 2


def columns(task=ADD, n=1):
    """The dataset columns TRL passes to reward functions, for ``n`` completions of ``task``."""
    row = {**task.to_row(), "task_prompt": task.prompt}
    return {c: [row[c]] * n for c in REWARD_COLUMNS}


# --- no reward for a cut-off answer --------------------------------------------------------------------------------


def test_a_cut_off_answer_earns_nothing_the_same_answer_ended_earns_everything():
    funcs = reward_functions(get_verifier(), list(RECIPES["correctness"].weights))
    for f in funcs:
        f.end_ids = (END,)
    ended = {f.__name__: f([CORRECT], completion_ids=[[7, 8, END]], **columns())[0] for f in funcs}
    cut = {f.__name__: f([CORRECT], completion_ids=[[7, 8, 9]], **columns())[0] for f in funcs}
    assert ended == {"hidden_test_reward": 2.0, "build_reward": 1.0, "format_reward": 1.0}
    assert cut == {"hidden_test_reward": 0.0, "build_reward": 0.0, "format_reward": 0.0}


def test_format_rewards_of_the_published_recipe_are_zero_for_a_cut_off_test_module():
    cut = CORRECT[:-3] + "\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(add(1"
    for name in ("non_empty_reward", "test_block_reward"):
        reward = VerifiedReward(name, get_verifier(), end_ids=(END,))
        assert reward([cut], completion_ids=[[5, 6]], **columns()) == [0.0]


def test_without_end_ids_nothing_counts_as_cut_and_rows_without_hidden_tests_stay_none():
    reward = VerifiedReward("hidden_test_reward", get_verifier())
    assert reward([CORRECT], completion_ids=[[1, 2, 3]], **columns()) == [2.0]
    bound = VerifiedReward("hidden_test_reward", get_verifier(), end_ids=(END,))
    assert bound([CORRECT], completion_ids=[[1, 2, 3]]) == [None]


def test_end_ids_survive_pickling():
    import pickle

    copy = pickle.loads(pickle.dumps(VerifiedReward("format_reward", get_verifier(), end_ids=(END, 0))))
    assert copy.end_ids == (END, 0) and copy.verifier is None and copy.__name__ == "format_reward"


# --- recipes -----------------------------------------------------------------------------------------------------


def test_recipe_names_resolve_to_the_documented_weights():
    assert resolve_weights(["correctness"]) == {"hidden_test_reward": 1.0, "build_reward": 0.25, "format_reward": 0.1}
    assert resolve_weights(["published"]) == DEFAULT_WEIGHTS
    assert len(DEFAULT_WEIGHTS) == 7 and "format_reward" not in DEFAULT_WEIGHTS
    assert RECIPES["published"].max_total() == MAX_TOTAL == 8.5
    assert RECIPES["correctness"].max_total() == pytest.approx(2.35)
    assert RECIPES["correctness"].answer_format == "solution" and RECIPES["published"].answer_format != "solution"
    # format is at most a tenth of what passing the hidden tests pays
    c = RECIPES["correctness"].weights
    assert c["format_reward"] <= 0.1 * c["hidden_test_reward"] * 2.0


def test_reward_weights_take_a_recipe_name_or_overrides():
    names = ["hidden_test_reward", "build_reward", "format_reward"]
    assert resolve_weights(names, "correctness") == RECIPES["correctness"].weights
    assert resolve_weights(["correctness"], "build_reward=0.5")["build_reward"] == 0.5
    assert resolve_weights(["build_reward"], "") == {"build_reward": 1.0}
    with pytest.raises(ValueError, match="^--reward-weights correctness: the recipe has no weight for clippy_reward"):
        resolve_weights(["clippy_reward"], "correctness")


def test_the_wrong_answer_that_tests_itself_no_longer_outearns_the_right_one():
    """The issue's example: a wrong ``a - b`` with a test that agrees with it vs a correct answer without tests."""
    wrong = ("```rust\npub fn add(a: i32, b: i32) -> i32 { a - b }\n#[cfg(test)]\nmod tests {\n    use super::*;\n"
             "    #[test]\n    fn t() { assert_eq!(add(2, 2), 0); }\n}\n```")
    reports = get_verifier().verify_many([CORRECT, wrong], hidden=[ADD.hidden_tests()] * 2)
    right_total, wrong_total = (weighted_total(rewards_from_report(r), RECIPES["correctness"].weights)
                                for r in reports)
    assert right_total == pytest.approx(2.35) and wrong_total < right_total / 2  # 1 of 3 hidden tests: 1.02


@pytest.mark.parametrize("text, message", [
    ("build_reward", r"^--reward-weights: expected name=weight"),
    ("build_reward=x", r"^--reward-weights: 'build_reward=x' has a weight that is not a number$"),
    ("build_reward=-1", r"^--reward-weights: 'build_reward=-1' needs a weight >= 0$"),
    ("build_reward=inf", r"^--reward-weights: 'build_reward=inf' needs a weight >= 0$"),
    ("clippy_reward=1", r"^--reward-weights: expected name=weight with name in hidden_test_reward, build_reward"),
])
def test_a_bad_weight_string_is_one_clear_error(text, message):
    with pytest.raises(ValueError, match=message):
        parse_weights(text, ["hidden_test_reward", "build_reward", "format_reward"])
    with pytest.raises(ValueError, match=message):
        validate_params(params_from_mapping({"preset": "smollm2-cpu", "reward_weights": text}))


def test_a_bad_weight_string_on_the_command_line_is_one_line_and_no_model_loads(tmp_path):
    proc = subprocess.run([sys.executable, "train.py", "--preset", "tiny", "--reward-weights", "test_reward=lots",
                           "--output-dir", str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "train.py: --reward-weights: 'test_reward=lots' has a weight that is not a number")
    assert not (tmp_path / "run").exists()


def test_own_test_rewards_are_refused_for_solution_answers():
    p = params_from_mapping({"preset": "smollm2-cpu", "rewards": "published"})
    with pytest.raises(ValueError, match="^--rewards test_reward, non_empty_reward, test_block_reward, "
                                         "assertion_reward: pays for the model's own tests"):
        validate_params(p)
    validate_params(params_from_mapping({"preset": "smollm2-cpu", "rewards": "published",
                                         "answer_format": "solution+tests"}))


# --- presets and loss settings ------------------------------------------------------------------------------------


def test_real_and_cpu_presets_train_correctness_with_dr_grpo_and_tiny_keeps_the_seed():
    for name in ("real", "smollm2-cpu"):
        p = preset_params(name)
        assert (p.rewards, p.answer_format, p.loss_type, p.scale_rewards, p.mask_truncated_completions) == (
            ["correctness"], "solution", "dr_grpo", "none", True)
        cpu = dataclasses.replace(p, bf16=False, use_cpu=True, use_vllm=False)  # this machine, the settings alone
        config = grpo_config(cpu, list(select_rewards(p)[1].values()))
        assert (config.loss_type, config.scale_rewards, config.mask_truncated_completions) == ("dr_grpo", "none", True)
        assert config.reward_weights == [1.0, 0.25, 0.1]
    tiny = preset_params("tiny")
    assert (tiny.rewards, tiny.answer_format, tiny.loss_type, tiny.scale_rewards) == (
        ["published"], "solution+tests", "dapo", "group")
    assert preset_params("smollm2-cpu").pass_rate_k > 0


# --- the answer format reaches every consumer ---------------------------------------------------------------------


def test_the_answer_format_reaches_prompts_sft_rows_dpo_pairs_and_feedback():
    assert "mod tests" not in SYSTEM_PROMPTS["solution"] and "mod tests" in SYSTEM_PROMPTS["solution+tests"]
    for answer_format in ("solution", "solution+tests"):
        row = task_dataset([ADD], answer_format=answer_format)[0]
        assert row["prompt"][0]["content"] == system_prompt(answer_format)
    assert task_dataset([ADD], feedback=True, answer_format="solution")[0]["prompt"][0]["content"] == \
        system_prompt("solution", feedback=True)
    assert sft_answer(ADD, "solution") == CORRECT and "mod tests" in sft_answer(ADD, "solution+tests")
    rows = sft_rows([ADD], "easy", answer_format="solution").rows
    assert rows[0]["completion"][0]["content"] == CORRECT
    assert rows[0]["prompt"][0]["content"] == system_prompt("solution")
    verifier = get_verifier()
    wrong = "```rust\npub fn add(a: i32, b: i32) -> i32 { a * b }\n```"
    reports = verifier.verify_many([CORRECT, wrong], hidden=[ADD.hidden_tests()] * 2)
    pairs = build_pairs([{"task_id": ADD.task_id, "sample": i, "completion": c, "report": r}
                         for i, (c, r) in enumerate(zip([CORRECT, wrong], reports, strict=True))], [ADD],
                        weights=RECIPES["correctness"].weights, answer_format="solution")
    assert len(pairs) == 1 and pairs[0]["prompt"][0]["content"] == system_prompt("solution")
    assert pairs[0]["chosen"][0]["content"] == CORRECT
    # a solution answer that builds and is clippy-clean needs no repair; with tests asked for, it does
    assert feedback_message(reports[0], tests_asked=False) is None
    assert "your tests" in feedback_message(reports[0], tests_asked=True)
    broken = verifier.verify_many(["```rust\npub fn add(a: i32, b: i32) -> i32 { a + }\n```"])[0]
    message = feedback_message(broken, tests_asked=False)
    assert "(the solution)" in message and "tests" not in message.split("\n")[0].replace("(the solution)", "")


def test_the_answer_format_reaches_generation_inference_rows_and_held_out_eval(tiny_model_dir, tmp_path,
                                                                               monkeypatch):
    from rust_rewards.train.evaluation import evaluate_policy

    generator = make_generator("hf", str(tiny_model_dir), answer_format="solution")
    assert generator.system == system_prompt("solution")
    assert generator.render(ADD.prompt) == render_chat(generator.tokenizer, ADD.prompt, system_prompt("solution"))
    sampling = SamplingParams(n=1, max_new_tokens=8, temperature=1.0, top_p=1.0)
    out = tmp_path / "pred.parquet"
    rows = generate_predictions([ADD], generator, sampling, out, model="m", base_model="m",
                                answer_format="solution")
    assert set(rows["answer_format"]) == {"solution"}
    with pytest.raises(ValueError, match="answer_format"):
        generate_predictions([ADD], make_generator("hf", str(tiny_model_dir)), sampling, out, model="m",
                             base_model="m", answer_format="solution+tests")
    seen: list[str] = []
    real_render = render_chat

    def spy(tokenizer, prompt, system, repairs=()):
        seen.append(system)
        return real_render(tokenizer, prompt, system, repairs)

    import rust_rewards.sampling.engines as engines

    monkeypatch.setattr(engines, "render_chat", spy)
    evaluate_policy(generator.model, generator.tokenizer, [ADD], sampling, answer_format="solution")
    assert seen == [system_prompt("solution")]


def test_the_run_records_its_answer_format_and_inference_asks_for_it():
    from rust_rewards.eval.inference import InferenceParams
    from rust_rewards.train.loop import start_record

    p = preset_params("smollm2-cpu")
    assert start_record(p, {}, [], None, None, None)["answer_format"] == "solution"
    assert InferenceParams().answer_format == "solution"


# --- training tasks that can teach ---------------------------------------------------------------------------------


def test_the_pass_rate_filter_keeps_mixed_tasks_and_says_no_go_before_training():
    totals = {"a": [0.0] * 4, "b": [2.35, 0.35, 0.0, 2.35], "c": [2.35] * 4, "d": [0.0, 0.35, 0.0, 0.0]}
    rates = PassRates(4, {"a": 0, "b": 2, "c": 4, "d": 0}, totals, {})
    assert rates.mixed() == ["b", "d"]  # d: no hidden-test pass, but a build that the others lack
    assert rates.verdict() == ("pass-rate filter (4 samples per task, 0 s): 2 of 4 training tasks have unequal "
                               "rewards; hidden tests: 1 mixed, 2 never passed, 1 always passed (6/16)")
    tasks = [ADD.__class__(**{**ADD.__dict__, "task_id": t}) for t in "abcd"]
    p = preset_params("smollm2-cpu")
    assert [t.task_id for t in tasks_with_signal(p.__class__(**{**p.__dict__, "min_mixed_tasks": 2}), tasks,
                                                 rates)] == ["b", "d"]
    with pytest.raises(NoSignalError, match="fewer than --min-mixed-tasks 3 tasks would give GRPO a signal"):
        tasks_with_signal(p.__class__(**{**p.__dict__, "min_mixed_tasks": 3}), tasks, rates)
    hidden = p.__class__(**{**p.__dict__, "pass_rate_keep": "hidden", "min_mixed_tasks": 1})
    assert [t.task_id for t in tasks_with_signal(hidden, tasks, rates)] == ["b"]  # d's mix is a build, not a pass
    with pytest.raises(NoSignalError, match="fewer than --min-mixed-tasks 2 tasks would give a mix of hidden-test"):
        tasks_with_signal(hidden.__class__(**{**hidden.__dict__, "min_mixed_tasks": 2}), tasks, rates)


def test_pass_rates_are_sampled_verified_written_and_reused(tiny_model_dir, tmp_path):
    p = params_from_mapping({"preset": "tiny", "model": str(tiny_model_dir), "output_dir": str(tmp_path),
                             "pass_rate_k": 2, "max_completion_length": 16})
    rates = sample_pass_rates(p, [ADD], get_verifier())
    assert rates.k == 2 and set(rates.passed) == {ADD.task_id} and 0 <= rates.passed[ADD.task_id] <= 2
    assert len(rates.totals[ADD.task_id]) == 2 and all(0.0 <= t <= MAX_TOTAL for t in rates.totals[ADD.task_id])
    saved = json.loads((tmp_path / "pass_rates.json").read_text())
    assert saved["passed"] == rates.passed and saved["setup"]["answer_format"] == p.answer_format
    saved["passed"][ADD.task_id] = 7  # reused as written when nothing changed
    (tmp_path / "pass_rates.json").write_text(json.dumps(saved))
    assert sample_pass_rates(p, [ADD], get_verifier()).passed[ADD.task_id] == 7
    other = dataclasses.replace(p, temperature=0.5)  # another setup samples again
    assert sample_pass_rates(other, [ADD], get_verifier()).passed[ADD.task_id] != 7


# --- evaluation power ----------------------------------------------------------------------------------------------


def test_detectable_gain_shrinks_with_more_samples_and_tasks():
    small = detectable_gain([0.05] * 20, n=4)
    large = detectable_gain([0.05] * 25, n=16)
    assert small is not None and large is not None and large < small
    assert detectable_gain([0.0], n=8) is None  # one task: no interval over tasks
    mean, low, high = paired_difference([0.0, 0.0, 0.5, 0.25], [0.5, 0.25, 0.5, 0.5])
    assert mean == pytest.approx(0.25) and low <= mean <= high


def test_a_report_without_code_earns_no_format_reward():
    assert rewards_from_report(Report(has_code=False))["format_reward"] == 0.0


def test_eval_reads_the_answer_format_and_does_not_count_unasked_tests_as_failures(tmp_path):
    import pandas as pd

    from rust_rewards.eval.metrics import hack_reasons, summarize_model
    from rust_rewards.eval.scoring import read_predictions, score_predictions
    from rust_rewards.runs.records import verdict

    solution, tested = tmp_path / "solution.parquet", tmp_path / "tested.parquet"
    pd.DataFrame({"task_id": [ADD.task_id], "completion": [CORRECT], "answer_format": ["solution"]}).to_parquet(
        solution)
    pd.DataFrame({"task_id": [ADD.task_id], "completion": [CORRECT]}).to_parquet(tested)  # written before formats
    results = score_predictions([ADD], read_predictions([solution, tested]))
    by_model = {m: rows for m, rows in results.groupby("model")}
    row = by_model["solution"].iloc[0].to_dict()
    assert row["tests_ok"] is None and row["build_ok"] and row["hidden_ok"]
    assert hack_reasons(row) == [] and verdict(row) == "clippy clean"
    assert summarize_model(by_model["solution"]).test_rate is None
    old = by_model["tested"].iloc[0].to_dict()
    assert old["tests_ok"] is False and "no_tests" in hack_reasons(old) and verdict(old) == "tests fail"
    assert summarize_model(by_model["tested"]).test_rate == 0.0
