"""Preference pairs ranked by real cargo reports (``rust_rewards.data.dpo_pairs``) and ``train.py --stage dpo``."""

import json

import pytest
from conftest import ROOT

from rust_rewards.data.dpo_pairs import FORMAT_REWARDS, PairRule, build_pairs, read_pairs, write_pairs
from rust_rewards.data.importers import load_tasks
from rust_rewards.data.sft_rows import sft_answer
from rust_rewards.prompts import SYSTEM_PROMPT, chat_messages
from rust_rewards.rewards import rewards_from_report, weighted_total
from rust_rewards.rust.extract import extract_rust
from rust_rewards.verify.verifier import Verifier

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
FENCE = "```"
REVERSE, PALINDROME = "rr-004-reverse-words", "rr-002-normalized-palindrome"
NO_CODE = "Sorry, I cannot write this in Rust."
WRONG = (f"{FENCE}rust\npub fn reverse_words(s: &str) -> String {{\n    s.to_string()\n}}\n\n"
         f"#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn one() {{\n"
         f"        assert_eq!(reverse_words(\"a\"), \"a\");\n    }}\n}}\n{FENCE}")
BROKEN = (f"{FENCE}rust\npub fn reverse_words(s: &str) -> String {{\n    s.split(\n}}\n\n#[cfg(test)]\nmod tests {{\n"
          f"    #[test]\n    fn t() {{}}\n}}\n{FENCE}")


@pytest.fixture(scope="module")
def tasks():
    by_id = {t.task_id: t for t in load_tasks(str(BUNDLED))}
    return [by_id[REVERSE], by_id[PALINDROME]]


@pytest.fixture(scope="module")
def rows(tasks):
    """Real reports: per task, sampled answers of every kind (sample index = position)."""
    reverse, palindrome = tasks
    answers = [(reverse, sft_answer(reverse)), (reverse, WRONG), (reverse, BROKEN), (reverse, NO_CODE),
               (reverse, sft_answer(reverse)), (palindrome, sft_answer(palindrome)), (palindrome, NO_CODE)]
    v = Verifier()
    try:
        reports = v.verify_many([extract_rust(a) or "" for _, a in answers],
                                hidden=[t.hidden_tests() for t, _ in answers], raw_code=True)
    finally:
        v.close()
    samples: dict[str, int] = {}
    out = []
    for (task, answer), report in zip(answers, reports, strict=True):
        sample = samples[task.task_id] = samples.get(task.task_id, -1) + 1
        out.append({"task_id": task.task_id, "sample": sample, "completion": answer, "report": report})
    return out


def total(row) -> float:
    return weighted_total(rewards_from_report(row["report"]))


def test_reports_rank_the_answers_as_expected(rows):
    good, wrong, broken, no_code, good_again = rows[:5]
    assert good["report"].build_ok and good["report"].hidden_ok
    assert wrong["report"].build_ok and not wrong["report"].hidden_ok
    assert not broken["report"].build_ok
    assert total(good) == total(good_again) > total(wrong) > total(broken) > total(no_code)
    # broken vs no code: only the format rewards differ
    diff = {k for k, v in rewards_from_report(broken["report"]).items()
            if v != rewards_from_report(no_code["report"])[k]}
    assert diff and diff <= set(FORMAT_REWARDS)


def test_pairs_follow_the_rule(rows, tasks):
    pairs = build_pairs(rows, tasks, PairRule(max_pairs_per_prompt=100))
    by_task = [(p["task_id"], p["chosen_sample"], p["rejected_sample"]) for p in pairs]
    # ties (0 vs 4) and the format-only pair (broken 2 vs no code 3) are dropped
    assert (REVERSE, 0, 4) not in by_task and (REVERSE, 4, 0) not in by_task
    assert (REVERSE, 2, 3) not in by_task
    assert {(REVERSE, 0, 1), (REVERSE, 0, 2), (REVERSE, 0, 3), (REVERSE, 1, 2), (REVERSE, 1, 3),
            (PALINDROME, 0, 1)} <= set(by_task)
    for p in pairs:
        assert p["margin"] >= 1.0
        chosen = rows[[r["task_id"] for r in rows].index(p["task_id"]) + p["chosen_sample"]]
        rejected = rows[[r["task_id"] for r in rows].index(p["task_id"]) + p["rejected_sample"]]
        assert p["margin"] == pytest.approx(total(chosen) - total(rejected))
        assert p["chosen"] == [{"role": "assistant", "content": chosen["completion"]}]
        assert p["rejected"] == [{"role": "assistant", "content": rejected["completion"]}]
    task = tasks[0]
    assert pairs[0]["prompt"] == chat_messages(task.prompt, SYSTEM_PROMPT)
    # order: tasks' order, then widest margin first; deterministic whatever the rows' order
    assert [p["task_id"] for p in pairs] == sorted([p["task_id"] for p in pairs], key=[t.task_id for t in tasks].index)
    margins = [p["margin"] for p in pairs if p["task_id"] == REVERSE]
    assert margins == sorted(margins, reverse=True)
    assert build_pairs(list(reversed(rows)), tasks, PairRule(max_pairs_per_prompt=100)) == pairs


def test_format_only_pairs_kept_when_asked_and_margin_filters(rows, tasks):
    keep = build_pairs(rows, tasks, PairRule(drop_format_only=False, max_pairs_per_prompt=100))
    assert (REVERSE, 2, 3) in {(p["task_id"], p["chosen_sample"], p["rejected_sample"]) for p in keep}
    wrong_margin = total(rows[0]) - total(rows[1])
    strict = build_pairs(rows, tasks, PairRule(min_margin=wrong_margin + 0.01, max_pairs_per_prompt=100))
    assert strict and all(p["margin"] > wrong_margin for p in strict)
    assert (REVERSE, 0, 1) not in {(p["task_id"], p["chosen_sample"], p["rejected_sample"]) for p in strict}
    assert build_pairs(rows, tasks, PairRule(min_margin=100.0)) == []


def test_cap_per_prompt_keeps_the_widest_margins(rows, tasks):
    every = build_pairs(rows, tasks, PairRule(max_pairs_per_prompt=100))
    capped = build_pairs(rows, tasks, PairRule(max_pairs_per_prompt=2))
    assert [p for p in capped if p["task_id"] == REVERSE] == [p for p in every if p["task_id"] == REVERSE][:2]
    assert len([p for p in capped if p["task_id"] == PALINDROME]) == 1
    assert build_pairs(rows, tasks, PairRule(max_pairs_per_prompt=0)) == []


def test_unknown_task_and_internal_errors(rows, tasks):
    with pytest.raises(ValueError, match="not among the tasks"):
        build_pairs(rows, tasks[1:])


def test_pairs_from_predictions_verify_then_rank(rows, tasks, tmp_path):
    import pandas as pd

    from rust_rewards.data.dpo_pairs import main

    predictions = [{"task_id": r["task_id"], "completion": r["completion"]} for r in rows]  # sample: the row's rank
    path = tmp_path / "preds.parquet"
    pd.DataFrame(predictions).to_parquet(path)
    out = tmp_path / "pairs.jsonl"
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks))
    assert main(["--tasks", str(tasks_file), "--predictions", str(path), "--out", str(out)]) == 0
    expected = build_pairs(rows, tasks)
    got = read_pairs(out)
    assert [(p["task_id"], p["chosen_sample"], p["rejected_sample"], p["margin"]) for p in got] == \
        [(p["task_id"], p["chosen_sample"], p["rejected_sample"], p["margin"]) for p in expected]


def test_pairs_round_trip_and_file_errors_name_the_flag(rows, tasks, tmp_path):
    pairs = build_pairs(rows, tasks)
    path = write_pairs(pairs, tmp_path / "pairs.jsonl")
    assert read_pairs(path) == json.loads(json.dumps(pairs))
    with pytest.raises(ValueError, match="--dpo-pairs .*no such file"):
        read_pairs(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="--dpo-pairs .*no preference pairs"):
        read_pairs(tmp_path / "empty.jsonl")


def test_dpo_stage_flags_are_checked_before_anything_runs(tmp_path):
    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.loop import run_training
    from rust_rewards.train.resolve import resolve_params

    with pytest.raises(ValueError, match="--dpo-pairs"):
        resolve_params(params_from_mapping({"preset": "tiny", "stage": "dpo"}))
    with pytest.raises(ValueError, match="--dpo-pairs .*no such file"):
        resolve_params(params_from_mapping({"preset": "tiny", "stage": "dpo", "dpo-pairs": str(tmp_path / "x.jsonl")}))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="--dpo-pairs .*no preference pairs"):
        run_training(params_from_mapping({"preset": "tiny", "stage": "dpo", "dpo-pairs": str(tmp_path / "empty.jsonl"),
                                          "output-dir": str(tmp_path / "out")}))
    p = resolve_params(params_from_mapping({"preset": "tiny", "stage": "dpo",
                                            "dpo-pairs": str(tmp_path / "empty.jsonl")}))
    assert p.output_dir == str(ROOT / "outputs" / "dpo-tiny") and p.dpo_beta == 0.1


@pytest.mark.slow
def test_dpo_stage_trains_writes_an_adapter_and_resumes(rows, tasks, tmp_path, tiny_model_dir, capsys):
    import time

    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.loop import run_training

    pairs = write_pairs(build_pairs(rows, tasks), tmp_path / "pairs.jsonl")
    out = tmp_path / "dpo"
    common = {"preset": "tiny", "stage": "dpo", "model": str(tiny_model_dir), "data": str(BUNDLED),
              "dpo-pairs": str(pairs), "output-dir": str(out), "per-device-train-batch-size": 2,
              "gradient-accumulation-steps": 1, "num-generations": 2, "save-steps": 2}
    start = time.monotonic()
    first = run_training(params_from_mapping({**common, "max-steps": 2}))
    first_s = time.monotonic() - start
    assert first.global_step == 2 and (out / "adapter" / "adapter_config.json").is_file()
    assert (out / "checkpoint-2").is_dir()
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in line and any(k.startswith("rewards/") for k in line) for line in lines), lines
    start = time.monotonic()
    resumed = run_training(params_from_mapping({**common, "max-steps": 3}))
    resume_s = time.monotonic() - start
    assert resumed.global_step == 3 and resumed.resumed_from.endswith("checkpoint-2")
    params = json.loads((out / "params.json").read_text())
    assert params["stage"] == "dpo" and params["derived"]["dpo"]["pairs"] == len(read_pairs(pairs))
    assert "step 3/3" in capsys.readouterr().out
    with capsys.disabled():
        print(f"\ndpo tiny: {len(read_pairs(pairs))} pairs, 2 steps {first_s:.1f}s, resume to 3 {resume_s:.1f}s")


@pytest.mark.slow
def test_dpo_adapter_evaluates_beside_a_grpo_adapter(rows, tasks, tmp_path, tiny_model_dir, script_run):
    """Inference with each stage's adapter (DPO's here, GRPO's the shared script run's), then one eval over both:
    one summary per model, same tasks."""
    from rust_rewards.eval.inference import InferenceParams, run_inference
    from rust_rewards.eval.scoring import EvalParams, run_eval
    from rust_rewards.train.config import params_from_mapping
    from rust_rewards.train.loop import run_training

    pairs = write_pairs(build_pairs(rows, tasks), tmp_path / "pairs.jsonl")
    run_training(params_from_mapping({"preset": "tiny", "model": str(tiny_model_dir), "data": str(BUNDLED),
                                      "max-steps": 1, "per-device-train-batch-size": 2,
                                      "gradient-accumulation-steps": 1, "num-generations": 2, "stage": "dpo",
                                      "dpo-pairs": str(pairs), "output-dir": str(tmp_path / "dpo")}))
    predictions = []
    for stage, adapter in (("dpo", tmp_path / "dpo" / "adapter"), ("grpo", script_run.out / "adapter")):
        out = tmp_path / f"pred_{stage}.parquet"
        run_inference(InferenceParams(model=str(tiny_model_dir), adapter=str(adapter), tasks=str(BUNDLED), limit=2,
                                      n=2, max_new_tokens=24, backend="hf", name=stage, out=str(out)))
        predictions.append(str(out))
    run_eval(EvalParams(tasks=str(BUNDLED), predictions=predictions, out=str(tmp_path / "eval"), k=[1]))
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert set(summary) == {"dpo", "grpo"}
    assert all(summary[m]["n"] == 4 and summary[m]["n_tasks"] == 2 for m in summary)
