"""Reference hints in GRPO prompts (``rust_rewards.train.hints``): the hint is the reference's first lines after
the answer's opening, the rewards judge hint + completion as one answer, the curriculum moves per task (adaptive) or
over the run (anneal), a tiny-model run records each step's hints, and evaluation never sees one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from test_train import TASKS, tiny_params

from rust_rewards.data.importers import load_tasks
from rust_rewards.rewards.functions import build_reward, hidden_test_reward
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.hints import OPENING, HintCurriculum, hint_text, hinted_rows, parse_levels
from rust_rewards.train.loop import run_training
from rust_rewards.train.resolve import resolve_params
from rust_rewards.train.trainers import sft_data
from rust_rewards.verify.verifier import get_verifier

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
REFERENCE = "pub fn add(a: i32, b: i32) -> i32 {\n    let sum = a + b;\n    sum\n}\n"
HIDDEN = {"reference_tests": ["#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}\n"], "test_shape": ["unit"],
          "reference_code": [REFERENCE], "task_id": ["add"]}


def test_a_hint_is_the_references_first_lines():
    assert hint_text(REFERENCE, 0.5) == "pub fn add(a: i32, b: i32) -> i32 {\n    let sum = a + b;\n"
    assert hint_text(REFERENCE, 0.0) == "" and hint_text(REFERENCE, 0.99) == REFERENCE.rsplit("}", 1)[0]


def test_the_rewards_judge_hint_and_completion_as_one_answer():
    build, hidden = build_reward, hidden_test_reward
    hint = OPENING + hint_text(REFERENCE, 0.5)
    rest = "    sum\n}\n```"
    assert build([rest], hint=[hint], **HIDDEN) == [1.0] and hidden([rest], hint=[hint], **HIDDEN) == [2.0]
    assert build([rest], hint=[""], **HIDDEN) == [0.0]  # the same continuation alone is no answer
    wrong = "    sum - 1\n}\n```"
    assert hidden([wrong], hint=[hint], **HIDDEN) == [0.0]


def test_hinted_rows_render_text_prompts_and_a_hint_column_only_where_a_hint_is_shown():
    curriculum = HintCurriculum((0.5, 0.0), mode="adaptive")
    curriculum.index["sq"] = 1  # this task already at no hint
    rows = hinted_rows(curriculum, lambda m: "<chat>" + m[-1]["content"] + "<assistant>", lambda: 3)(
        {"prompt": [[{"role": "user", "content": "add"}], [{"role": "user", "content": "sq"}]],
         "task_id": ["add", "sq"], "reference_code": [REFERENCE, "pub fn sq(x: i64) -> i64 {\n    x * x\n}\n"]})
    assert rows["prompt"] == ["<chat>add<assistant>" + OPENING + hint_text(REFERENCE, 0.5), "<chat>sq<assistant>"]
    assert rows["hint"] == [OPENING + hint_text(REFERENCE, 0.5), ""] and rows["task_id"] == ["add", "sq"]


def test_the_adaptive_curriculum_moves_each_task_by_its_group():
    c = HintCurriculum((0.75, 0.5, 0.25, 0.0), mode="adaptive", start=1, lower_at=0.5)
    seen = c.observe(1, [("a", True), ("a", True), ("b", False), ("b", False), ("c", True), ("c", False),
                         ("c", False)])
    assert seen == {"a": 0.5, "b": 0.5, "c": 0.5}
    assert (c.fraction("a", 2), c.fraction("b", 2), c.fraction("c", 2)) == (0.25, 0.75, 0.5)
    for step in range(2, 6):
        c.observe(step, [("a", True)])
    assert c.fraction("a", 9) == 0.0  # down to none, and it stays there while it passes
    for step in range(6, 12):
        c.observe(step, [("b", False)])
    assert c.fraction("b", 12) == 0.75  # never more than the most hint


def test_the_anneal_schedule_ends_without_hints():
    c = HintCurriculum((0.75, 0.5, 0.0), mode="anneal", max_steps=30)
    fractions = [c.fraction("any", step) for step in range(1, 31)]
    assert fractions[0] == 0.75 and fractions[-1] == 0.0 and fractions == sorted(fractions, reverse=True)
    assert fractions.count(0.0) >= 9  # the last share of the run trains without hints


@pytest.mark.parametrize(("levels", "why"), [("0.5,0.25", "ending with 0"), ("0.2,0.5,0", "decreasing"),
                                             ("x,0", "not a comma-separated list")])
def test_bad_hint_levels_are_one_clear_error(levels, why):
    with pytest.raises(ValueError, match=why):
        parse_levels(levels)
    with pytest.raises(ValueError, match="--hint-levels"):
        resolve_params(params_from_mapping({"preset": "tiny", "hints": "adaptive", "hint-levels": levels}))


def test_hints_need_grpo_rollouts_without_tool_turns():
    with pytest.raises(ValueError, match="--hints adaptive with --feedback-turns"):
        resolve_params(params_from_mapping({"preset": "tiny", "hints": "adaptive", "feedback-turns": 1,
                                            "max-completion-length": 512}))
    assert resolve_params(params_from_mapping({"preset": "tiny"})).hints == "off"  # off unless asked


@pytest.mark.slow
def test_a_tiny_run_with_hints_records_each_steps_hints(tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_row()) + "\n" for t in TASKS))
    params = tiny_params(tmp_path / "run", tasks, tiny_model_dir, max_steps=2, save_steps=2, hints="adaptive",
                         hint_levels="0.75,0.5,0", eval_tasks=str(tasks), eval_every=2, eval_n=1)
    result = run_training(params)
    out = Path(result.output_dir)
    lines = [json.loads(line) for line in (out / "hints.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(set(line["hints"]) <= {t.task_id for t in TASKS} and line["groups"] == 2 for line in lines)
    assert lines[0]["hints"] == {task: 0.75 for task in lines[0]["hints"]}  # every task starts at the first level
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in metrics if "reward" in row]  # the held-out evaluation's rows stand apart
    assert len(steps) == 2 and all(0 < row["hint_fraction"] <= 0.75 and 0 <= row["groups_with_spread"] <= 1
                                   for row in steps)
    saved = json.loads((out / "hint_levels.json").read_text())
    assert saved["levels"] == [0.75, 0.5, 0.0] and set(saved["index"]) <= {t.task_id for t in TASKS}
    references = {t.task_id: t.reference_code for t in TASKS}
    frame = pd.read_parquet(out / "completions" / "step_000001.parquet")
    for task, prompt in zip(frame["task_id"], frame["prompt"], strict=True):  # the hint ends the rendered prompt
        hint = hint_text(references[task], 0.75)  # none for a one-line reference
        assert prompt.endswith(OPENING + hint if hint else "<|im_start|>assistant\n"), prompt[-200:]
    held_out = pd.read_parquet(out / "eval" / "step_000002.parquet")  # evaluation: the task's prompt, no hint
    assert len(held_out) == len(TASKS)
    assert (held_out["has_code"] == held_out["completion"].str.contains("```rust", regex=False)).all()


@pytest.mark.slow
def test_a_supervised_warm_start_teaches_finishing_each_hint_cut(tmp_path, tiny_model_dir):
    chosen = [t for t in load_tasks(BUNDLED) if 3 <= len(t.reference_code.strip().splitlines()) <= 8][:3]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t.to_row()) + "\n" for t in chosen))
    params = tiny_params(tmp_path / "run", tasks, tiny_model_dir, max_steps=1, save_steps=1, stage="sft",
                         sft_hints=True, hint_levels="0.75,0.5,0", max_completion_length=512)
    rows = sft_data(params, chosen, get_verifier()).rows
    references = {t.task_id: t.reference_code for t in chosen}
    whole = [r for r in rows if r["completion"].startswith(OPENING)]
    cuts = [r for r in rows if not r["completion"].startswith(OPENING)]
    assert whole and cuts and len(whole) + len(cuts) == len(rows)
    by_prompt = {r["prompt"]: r["completion"] for r in whole}
    for row in cuts:  # a cut row: the whole row's prompt + opening + hint, then the rest of that same answer
        base = next(prompt for prompt in by_prompt if row["prompt"].startswith(prompt + OPENING))
        hint = row["prompt"][len(base) + len(OPENING):]
        assert hint and any(hint in (hint_text(ref, 0.75), hint_text(ref, 0.5)) for ref in references.values())
        assert OPENING + hint + row["completion"] == by_prompt[base]
    result = run_training(params)  # the supervised stage trains on text rows
    assert json.loads((Path(result.output_dir) / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
    with pytest.raises(ValueError, match="--sft-hints"):
        resolve_params(params_from_mapping({"preset": "tiny", "sft-hints": True}))  # GRPO has no supervised rows


def test_the_learning_benchmark_reports_pass_at_k_and_what_the_hints_did():
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from learning import pass_at_k_lines

    rows = [{"model": model, "task_id": task, "hidden_ok": bool(ok) and task == "a"}
            for model, oks in (("sft", [0, 0, 0, 1]), ("grpo", [1, 0, 0, 1])) for task in ("a", "b") for ok in oks]
    assert pass_at_k_lines(pd.DataFrame(rows), ["sft", "grpo"], 2, 0) == [
        "| hidden pass@2 | 25.0% | 41.7% | +16.7% [+0.0%, +33.3%], 1/1/0 |"]
    assert pass_at_k_lines(pd.DataFrame(rows), ["sft", "grpo"], 8, 0) == []  # fewer than 8 samples a task
