"""The supervised stage: verified reference answers as SFT data, ``--stage sft`` with the GRPO stage's outputs and
resume, GRPO from its adapter (``--init-adapter``), and the format rate moving on a random tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from safetensors.torch import load_file

from rust_rewards.data.sft_rows import sft_answer, sft_rows
from rust_rewards.prompts import SYSTEM_PROMPT
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import Task
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.loop import run_training
from rust_rewards.train.resolve import resolve_params

pytestmark = pytest.mark.slow  # every test here launches a whole run, a cluster or an install

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
ADD = Task("add", "Write `pub fn add(a: i32, b: i32) -> i32`.", "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}",
           "use super::*;\n\n#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n}", "unit")
TASKS = [
    ADD,
    Task("wrong", "Write `pub fn sub(a: i32, b: i32) -> i32`.", "pub fn sub(a: i32, b: i32) -> i32 {\n    a + b\n}",
         "#[test]\nfn subs() {\n    assert_eq!(sub(5, 3), 2);\n}", "unit"),
    Task("bare", "Write `pub fn one() -> i32`."),
    Task("main", "Write `pub fn two() -> i32`.", "pub fn two() -> i32 {\n    2\n}",
         "fn main() {\n    assert_eq!(two(), 2);\n}", "main"),
]


def test_rows_are_verified_answers_in_the_training_format_and_skips_are_counted():
    data = sft_rows(TASKS, "tasks.jsonl")
    assert data.counts() == {"rows": 1, "no_reference": 1, "tests_not_unit": 1, "answer_too_long": 0,
                             "failed_verification": 1, "verifier_error": 0}
    row = data.rows[0]
    assert row["prompt"] == [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": ADD.prompt}]
    answer = row["completion"][0]["content"]
    assert answer == sft_answer(ADD) and answer.count("```") == 2 and answer.count("use super::*;") == 1
    assert "#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds()" in extract_rust(answer)
    with pytest.raises(ValueError, match="'answer_too_long': 2"):  # longer than GRPO's completion budget
        sft_rows(TASKS, "tasks.jsonl", count_tokens=len, max_answer_tokens=50)


def test_an_empty_sft_set_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"tasks.jsonl: no task has a verified reference answer to train on "
                                         r"\(3 tasks; skipped: \{.*'failed_verification': 1"):
        sft_rows(TASKS[1:], "tasks.jsonl")
    with pytest.raises(ValueError, match="--stage: expected one of"):
        resolve_params(params_from_mapping({"stage": "pretrain"}))
    with pytest.raises(ValueError, match="--init-adapter .*: no adapter_config.json there"):
        resolve_params(params_from_mapping({"init-adapter": str(tmp_path)}))


def lora_b(adapter: Path) -> dict[str, torch.Tensor]:
    weights = load_file(adapter / "adapter_model.safetensors")
    return {k: v for k, v in weights.items() if "lora_B" in k}


@pytest.mark.timeout(900)
def test_sft_resumes_changes_the_answers_and_grpo_continues_its_adapter(tmp_path, tiny_model_dir):
    """10 SFT steps on the bundled reference answers, in two starts (5, then resumed to 10): the loss falls and
    what the model writes changes (the tiny model learns their longer layout, which it cannot finish within 128
    tokens; see README); GRPO then starts from the SFT adapter."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rust_rewards.data.importers import load_tasks
    from rust_rewards.prompts import chat_messages

    common = {"preset": "tiny", "model": str(tiny_model_dir), "data": str(BUNDLED), "max-completion-length": 512}
    sft_out = tmp_path / "sft"
    sft = {**common, "stage": "sft", "save-steps": 5, "lr": 1e-2, "logging-steps": 1, "output-dir": str(sft_out)}
    first = run_training(params_from_mapping({**sft, "max-steps": 5}), progress=None)
    resumed = run_training(params_from_mapping({**sft, "max-steps": 10}), progress=None)
    assert (first.global_step, resumed.global_step, resumed.resumed_from) == (5, 10, str(sft_out / "checkpoint-5"))
    metrics = [json.loads(line) for line in (sft_out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 11))
    assert all(m["loss"] > 0 and "reward" not in m for m in metrics)
    losses = [m["loss"] for m in metrics]
    assert sum(losses[5:]) < 0.85 * sum(losses[:5]), losses
    params = json.loads((sft_out / "params.json").read_text())
    assert params["stage"] == "sft" and params["derived"]["sft"]["rows"] > 0
    assert params["derived"]["sft"]["tests_not_unit"] > 0
    sft_b = lora_b(sft_out / "adapter")
    assert all(v.abs().sum() > 0 for v in sft_b.values())

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompts = [t.prompt for t in load_tasks(BUNDLED)[:6]]

    def answers(adapter: Path | None) -> list[str]:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter)
        torch.manual_seed(0)
        texts: list[str] = []
        for prompt in prompts:
            ids = tokenizer.apply_chat_template(chat_messages(prompt), add_generation_prompt=True, return_dict=True,
                                                return_tensors="pt")
            out_ids = model.generate(**ids, max_new_tokens=128, do_sample=True, temperature=1.0,
                                     num_return_sequences=4)
            texts += tokenizer.batch_decode(out_ids[:, ids["input_ids"].shape[1]:], skip_special_tokens=True)
        return texts

    # the same seed, the same prompts: what the model writes changed (the share of answers with code alone can stay
    # at 1.0 on some CPUs, so the texts are compared)
    before, after = answers(None), answers(sft_out / "adapter")
    changed = sum(a != b for a, b in zip(before, after, strict=True)) / len(before)
    assert changed >= 0.5, changed
    assert sum(bool(extract_rust(t)) for t in after) > 0

    grpo_out = tmp_path / "grpo"
    grpo = run_training(params_from_mapping({**common, "max-completion-length": 128, "max-steps": 2,
                                             "num-generations": 4, "per-device-train-batch-size": 8,
                                             "init-adapter": str(sft_out / "adapter"),
                                             "output-dir": str(grpo_out)}), progress=None)
    assert grpo.global_step == 2 and (grpo_out / "completions" / "step_000002.parquet").is_file()
    grpo_b = lora_b(grpo_out / "adapter")
    assert grpo_b.keys() == sft_b.keys()
    moved = sum((grpo_b[k] - sft_b[k]).norm() for k in sft_b)
    assert moved < 0.5 * sum(v.norm() for v in sft_b.values())  # continued the SFT adapter, not a fresh (zero) B
    assert json.loads((grpo_out / "params.json").read_text())["init_adapter"] == str(sft_out / "adapter")
