"""``train.py --preset real --dry-run``: the real preset checked on CPU, and the vLLM fields the real run passes.

The end-to-end test runs the command as a user would (a subprocess, 2-4 minutes on 2 cores): the full
run's GRPOConfig and plan, a 2-layer model of Qwen2.5-Coder-1.5B's exact layer shape, one step with
checkpoint-1, then a resume to step 2.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from trl import GRPOConfig

from rust_rewards.cpus import cpu_has_native_bf16
from rust_rewards.rewards import REWARD_FUNCS
from rust_rewards.train.config import TrainParams, params_from_mapping
from rust_rewards.train.dry_run import run_dry_run
from rust_rewards.train.dry_run_settings import MARKER, SettingRejected, prepare_dir, reduce_params, run_shape
from rust_rewards.train.gpu_plan import CARDS, RunShape
from rust_rewards.train.model_setup import quantization_config, trainer_model
from rust_rewards.train.resolve import GPU_MACHINE, Machine, check_load_in_4bit, check_machine, resolve_params
from rust_rewards.train.trl_configs import grpo_config, vllm_kwargs

LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def real(tmp_path: Path, **flags) -> TrainParams:
    """The real preset with ``flags``, resolved as on a GPU machine with vLLM installed."""
    return resolve_params(params_from_mapping({"preset": "real", "output-dir": str(tmp_path / "out"), **flags}),
                          GPU_MACHINE)


def test_vllm_kwargs_are_grpo_config_fields(tmp_path):
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    colocate, server = real(tmp_path), real(tmp_path, vllm_mode="server", vllm_server_host="10.0.0.2")
    assert vllm_kwargs(colocate) == {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3,
                                     "vllm_enable_sleep_mode": True}
    assert vllm_kwargs(server) == {"use_vllm": True, "vllm_mode": "server", "vllm_server_host": "10.0.0.2",
                                   "vllm_server_port": 8000, "vllm_server_timeout": 240.0}
    assert vllm_kwargs(dataclasses.replace(colocate, use_vllm=False)) == {}
    for p in (colocate, server):
        kwargs = vllm_kwargs(p)
        assert set(kwargs) <= fields
        # GRPOConfig only records the vLLM fields (GRPOTrainer imports vllm), so it builds here without vllm;
        # use_cpu because TrainingArguments refuses bf16 without a GPU otherwise.
        config = grpo_config(dataclasses.replace(p, use_cpu=True), [1.0] * len(REWARD_FUNCS))
        assert {k: getattr(config, k) for k in kwargs} == kwargs and config.bf16
    with pytest.raises(ValueError, match="--vllm-mode"):
        real(tmp_path, vllm_mode="remote")


def test_plan_and_reductions_from_params(tmp_path):
    p = real(tmp_path)
    assert run_shape(p) == RunShape(micro_batch=8, completions_per_step=32, prompt_tokens=512, completion_tokens=768,
                                    lora_r=16, gradient_checkpointing=True, vllm_util=0.3, sleep_mode=True)
    assert run_shape(real(tmp_path, vllm_mode="server")).vllm_util is None
    dry, changes = reduce_params(p, tmp_path / "model", tmp_path / "run")
    changed = {c.name for c in changes}
    assert {"model", "max_completion_length", "gradient_accumulation_steps", "max_steps", "use_vllm",
            "num_generations", "per_device_train_batch_size"} <= changed
    kept = {f.name for f in dataclasses.fields(p)} - changed
    assert {"lr", "loss_type", "beta", "lora_target_modules", "gradient_checkpointing",
            "vllm_gpu_memory_utilization"} <= kept
    assert ("bf16" in kept) == cpu_has_native_bf16()
    assert all(getattr(dry, name) == getattr(p, name) for name in kept)
    assert dry.per_device_train_batch_size == dry.num_generations == 2 and dry.gradient_accumulation_steps == 1


def test_without_native_bf16_the_dry_run_computes_in_fp32(tmp_path, monkeypatch):
    import rust_rewards.train.dry_run_settings as dr

    p = real(tmp_path)
    monkeypatch.setattr(dr, "cpu_has_native_bf16", lambda: False)
    dry, changes = reduce_params(p, tmp_path / "model", tmp_path / "run")
    (change,) = [c for c in changes if c.name == "bf16"]
    assert (change.full, change.dry, dry.bf16) == (True, False, False)
    assert "no native bf16" in change.reason and "avx512_bf16" in change.reason
    monkeypatch.setattr(dr, "cpu_has_native_bf16", lambda: True)
    dry, changes = reduce_params(p, tmp_path / "model", tmp_path / "run")
    assert dry.bf16 and "bf16" not in {c.name for c in changes}


def test_form_choices_are_values_trl_accepts(tmp_path):
    """Every choice the form and the command line offer builds a GRPOConfig (no dropdown entry the run rejects)."""
    from transformers.trainer_utils import SchedulerType

    from rust_rewards.train.config import LOSS_TYPES, LR_SCHEDULERS, SCALE_REWARDS

    assert set(LR_SCHEDULERS) <= {s.value for s in SchedulerType}
    for loss_type, scale, scheduler in zip(LOSS_TYPES, SCALE_REWARDS * 3, LR_SCHEDULERS * 2, strict=False):
        config = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, loss_type=loss_type,
                            scale_rewards=scale, lr_scheduler_type=scheduler)
        assert (config.loss_type, config.scale_rewards, config.lr_scheduler_type.value) == (loss_type, scale, scheduler)


def test_rejected_settings_fail_before_anything_runs(tmp_path):
    """Refused by the parameter checks (choices, bounds, combinations), before any output, whatever built the
    params; the command line refuses the same values with the same message."""
    cases = {("lr_scheduler_type", "sometimes"): "--lr-scheduler-type: expected one of cosine",
             ("num_generations", 3): "--num-generations 3 must divide the completions per step",
             ("vllm_gpu_memory_utilization", 1.5): "--vllm-gpu-memory-utilization must be within"}
    for (name, value), message in cases.items():
        params = dataclasses.replace(real(tmp_path), **{name: value})
        with pytest.raises(SettingRejected, match=message):
            run_dry_run(params)
    with pytest.raises(ValueError, match="--lr-scheduler-type: expected one of cosine"):
        params_from_mapping({"preset": "real", "lr-scheduler-type": "sometimes"})
    with pytest.raises(ValueError, match="--vllm-gpu-memory-utilization must be within"):
        params_from_mapping({"preset": "real", "vllm-gpu-memory-utilization": 1.5})
    assert not any(tmp_path.iterdir())
    with pytest.raises(SettingRejected, match="tiny preset"):
        run_dry_run(params_from_mapping({"preset": "tiny", "dry-run": True}))
    with pytest.raises(SettingRejected, match="checks the GRPO stage from a fresh adapter"):
        run_dry_run(params_from_mapping({"preset": "real", "dry-run": True, "stage": "sft"}))
    assert not any(tmp_path.iterdir())

    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--preset", "real", "--dry-run", "--loss-type",
                           "nonsense", "--output-dir", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "train.py: --loss-type: expected one of dapo" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dry_run_cli_trains_checkpoints_and_resumes(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--preset", "real", "--dry-run", "--output-dir",
                           str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout

    assert "an ESTIMATE" in text and all(card.name in text for card in CARDS)
    assert ("full run's GRPOConfig built: bf16=True, loss_type='dr_grpo', generation_batch_size=32, "
            "steps_per_generation=4, use_vllm=True, vllm_mode='colocate', vllm_gpu_memory_utilization=0.3, "
            "vllm_enable_sleep_mode=True; LoraConfig built: r=16") in text
    assert "vLLM is off on CPU" in text
    assert "settings reduced to run on CPU" in text and "settings kept as the full run has them" in text
    for line in ("max_completion_length: 768 -> 16", "gradient_accumulation_steps: 4 -> 1", "max_steps: -1 -> 1",
                 "num_generations: 8 -> 2",
                 "use_vllm: True -> False", "model: 'Qwen/Qwen2.5-Coder-1.5B-Instruct' -> "):
        assert line in text
    assert "changed since the first start" in text and "dry run passed" in text

    root = out / "dry-run"
    run = root / "run"
    assert sorted(p.name for p in out.iterdir()) == ["dry-run"]
    for step in (1, 2):
        state = json.loads((run / f"checkpoint-{step}" / "trainer_state.json").read_text())
        assert state["global_step"] == step
        assert len(pd.read_parquet(run / "completions" / f"step_{step:06d}.parquet")) == 2
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    starts = [json.loads(line) for line in (run / "params_history.jsonl").read_text().splitlines()]
    assert [(s["max_steps"], s["resume"], s["derived"]["resumed_from"]) for s in starts] == [
        (1, "no", None), (2, "yes", str(run / "checkpoint-1"))]
    params = starts[-1]
    assert (params["bf16"], params["use_cpu"], params["use_vllm"], params["loss_type"], params["lr"]) == (
        cpu_has_native_bf16(), True, False, "dr_grpo", 2e-5)  # bf16 kept only where the CPU has it natively
    assert (params["gradient_checkpointing"], params["derived"]["n_tasks"], params["derived"]["prompts_per_step"]) == (
        True, 4, 1)

    config = json.loads((root / "model" / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["intermediate_size"], config["vocab_size"],
            config["num_attention_heads"], config["num_key_value_heads"]) == (2, 1536, 8960, 151936, 12, 2)
    adapter = json.loads((run / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["lora_dropout"]) == (16, 64, 0.05)
    assert len(adapter["target_modules"]) == 2 * len(LINEAR)  # all-linear, resolved to module paths
    assert {name.rsplit(".", 1)[-1] for name in adapter["target_modules"]} == LINEAR


QLORA_REFUSALS = {
    "cuda": "--load-in-4bit needs a CUDA GPU: bitsandbytes' 4-bit kernels do not run on CPU",
    "bnb": "--load-in-4bit needs bitsandbytes: pip install bitsandbytes",
    "cpu": "--load-in-4bit with --use-cpu true: bitsandbytes' 4-bit kernels do not run on CPU",
    "colocate": "--load-in-4bit with vLLM colocate: colocate vLLM runs beside the policy",
    "server": "--load-in-4bit with --vllm-mode server: TRL sends the server the policy merged into its 4-bit base",
}


def test_load_in_4bit_refusals(tmp_path, monkeypatch):
    """Each refusal with its message: the machine's CUDA and bitsandbytes (``check_machine``), then the settings
    (``check_load_in_4bit``, before anything resolves: the form, the command line, the dry run)."""
    import re

    import torch

    def refuses(key, check, *args):
        with pytest.raises(ValueError, match=re.escape(QLORA_REFUSALS[key])):
            check(*args)

    q4 = real(tmp_path, load_in_4bit=True)  # the dry run's view of the GPU machine: no check of this CPU machine
    assert (q4.load_in_4bit, q4.use_vllm, q4.use_cpu, q4.bf16) == (True, False, False, True)
    refuses("cuda", check_machine, q4, dataclasses.replace(GPU_MACHINE, cuda=False))
    refuses("bnb", check_machine, q4, dataclasses.replace(GPU_MACHINE, bitsandbytes=False))
    check_machine(q4, GPU_MACHINE)  # a GPU machine with bitsandbytes: accepted
    check_load_in_4bit(q4)
    refuses("cpu", check_load_in_4bit, dataclasses.replace(q4, use_cpu=True))
    refuses("colocate", check_load_in_4bit, dataclasses.replace(q4, use_vllm=True))
    refuses("server", check_load_in_4bit, dataclasses.replace(q4, use_vllm=True, vllm_mode="server"))
    for p in (dataclasses.replace(q4, use_cpu=True), dataclasses.replace(q4, use_vllm=True)):
        check_load_in_4bit(dataclasses.replace(p, load_in_4bit=False))  # without the flag: nothing to refuse

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not Machine.here().cuda
    with pytest.raises(ValueError, match=re.escape(QLORA_REFUSALS["cuda"])):  # a run on a machine without CUDA
        resolve_params(params_from_mapping({"preset": "real", "load-in-4bit": True}),
                       dataclasses.replace(Machine.here(), files=False))
    for flags, key in (({"use-cpu": True}, "cpu"), ({"use-vllm": True}, "colocate"),
                       ({"use-vllm": True, "vllm-mode": "server"}, "server")):
        with pytest.raises(ValueError, match=re.escape(QLORA_REFUSALS[key])):
            real(tmp_path, load_in_4bit=True, **flags)
        params = params_from_mapping({"preset": "real", "load-in-4bit": True, "dry-run": True,
                                      "output-dir": str(tmp_path / "out"), **flags})
        with pytest.raises(SettingRejected, match=re.escape(QLORA_REFUSALS[key])):
            run_dry_run(params)
    assert not any(tmp_path.iterdir())


def test_load_in_4bit_configs_plan_and_reduction(tmp_path):
    """The full run's BitsAndBytesConfig (QLoRA's four settings), a GRPOConfig that leaves the model loading to
    ``base_model``, the NF4 plan without vLLM, and the CPU leg reduced to an unquantized model with its reason."""
    import torch
    from transformers import BitsAndBytesConfig

    p = real(tmp_path, load_in_4bit=True)
    bnb = quantization_config(p)
    assert isinstance(bnb, BitsAndBytesConfig)
    assert (bnb.load_in_4bit, bnb.bnb_4bit_quant_type, bnb.bnb_4bit_use_double_quant, bnb.bnb_4bit_compute_dtype) == (
        True, "nf4", True, torch.bfloat16)
    assert quantization_config(real(tmp_path)) is None
    config = grpo_config(dataclasses.replace(p, use_cpu=True), [1.0] * len(REWARD_FUNCS))
    assert config.model_init_kwargs is None and config.bf16 and not config.use_vllm
    assert run_shape(p) == RunShape(micro_batch=8, completions_per_step=32, prompt_tokens=512, completion_tokens=768,
                                    lora_r=16, vllm_util=None, sleep_mode=False, load_in_4bit=True)
    assert run_shape(real(tmp_path)).load_in_4bit is False

    dry, changes = reduce_params(p, tmp_path / "model", tmp_path / "run")
    (change,) = [c for c in changes if c.name == "load_in_4bit"]
    assert (change.full, change.dry, dry.load_in_4bit) == (True, False, False)
    assert change.reason == ("bitsandbytes 4-bit kernels need a CUDA GPU: the CPU leg trains the reduced model "
                             "unquantized")
    assert "use_vllm" not in {c.name for c in changes}  # already off in the full 4-bit run
    _, changes = reduce_params(real(tmp_path), tmp_path / "model", tmp_path / "run")
    assert "load_in_4bit" not in {c.name for c in changes}


def test_load_in_4bit_dry_run_prints_the_4bit_plan_and_config(tmp_path, monkeypatch, capsys):
    """What ``--dry-run --load-in-4bit`` prints before its CPU leg (stopped here at ``prepare_dir``)."""
    import rust_rewards.train.dry_run_settings as dr

    class Stop(Exception):
        pass

    def stop(_root):
        raise Stop

    monkeypatch.setattr(dr, "prepare_dir", stop)
    params = params_from_mapping({"preset": "real", "load-in-4bit": True, "dry-run": True,
                                  "output-dir": str(tmp_path / "out")})
    with pytest.raises(Stop):
        run_dry_run(params)
    text = capsys.readouterr().out
    assert "| base weights (NF4 4-bit, double quant; rest fp32) | 1.50 |" in text
    assert "| 24 GiB (L4) | 7.9 | - | 7.9 | yes |" in text and "vLLM off" in text
    assert ("full run's BitsAndBytesConfig built: load_in_4bit=True, bnb_4bit_quant_type='nf4', "
            "bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16") in text
    assert "use_vllm=False" in text


def test_load_in_4bit_base_model_is_quantized_and_prepared(tmp_path, monkeypatch):
    """``base_model`` loads with the BitsAndBytesConfig on this process's GPU and applies
    ``prepare_model_for_kbit_training`` before the trainer adds LoRA (bitsandbytes itself is faked: no CUDA here)."""
    import torch
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM

    seen = {}

    def from_pretrained(name, **kwargs):
        seen.update(kwargs, name=name)
        config = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, vocab_size=256, tie_word_embeddings=True)
        return Qwen2ForCausalLM(config).to(kwargs["dtype"])

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    p = real(tmp_path, load_in_4bit=True)
    model = trainer_model(p)
    assert seen["name"] == p.model and seen["dtype"] == torch.bfloat16 and seen["device_map"] == {"": 0}
    assert seen["quantization_config"].to_dict() == quantization_config(p).to_dict()
    # prepared: frozen, the unquantized parameters (here all of them: nothing is really 4-bit on CPU) in fp32
    assert not any(t.requires_grad for t in model.parameters())
    assert {t.dtype for t in model.parameters()} == {torch.float32}
    assert trainer_model(real(tmp_path)) == p.model  # unquantized: TRL loads it by name


def test_a_dry_run_never_clears_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "dry-run" / "run").mkdir(parents=True)
    (tmp_path / "dry-run" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds no dry_run.json"):
        prepare_dir(tmp_path / "dry-run")
    assert (tmp_path / "dry-run" / "run").is_dir()
    (tmp_path / "dry-run" / MARKER).write_text("{}")
    assert not (prepare_dir(tmp_path / "dry-run") / "run").exists()


@pytest.mark.slow
def test_load_in_4bit_cli_refusals(tmp_path):
    """The command line refuses before anything runs, with ``train.py: MESSAGE`` and exit status 2 (with a task file
    that exists: a clean checkout has no ``processed/`` split, which is refused first)."""
    for flags, key in ((["--load-in-4bit"], "cuda"), (["--load-in-4bit", "--use-vllm", "true"], "colocate")):
        proc = subprocess.run([sys.executable, str(ROOT / "train.py"), "--preset", "real", "--output-dir",
                               str(tmp_path / "out"), "--data", str(ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl"),
                               *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"train.py: {QLORA_REFUSALS[key]}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
