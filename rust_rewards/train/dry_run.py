"""``train.py --dry-run``: the real preset checked on CPU before a GPU is rented. The full run's configs are built
and its GPU plan printed, then a copy reduced only where a CPU must (``rust_rewards.train.dry_run_settings``) trains one
step, checkpoints and resumes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rust_rewards.train.config import TrainParams, preset_params
from rust_rewards.train.dry_run_settings import SettingRejected
from rust_rewards.train.loop import TrainResult, print_progress, run_training
from rust_rewards.train.model_setup import lora_config, quantization_config
from rust_rewards.train.resolve import GPU_MACHINE, ResolvedParams, resolve_params, run_dir, select_rewards
from rust_rewards.train.trainers import Progress
from rust_rewards.train.trl_configs import grpo_config, vllm_kwargs
from rust_rewards.workspace import workspace


def run_dry_run(params: TrainParams | ResolvedParams, progress: Progress | None = print_progress) -> TrainResult:
    """``--dry-run``: check a real-preset run on CPU before renting a GPU.

    Builds the full run's ``GRPOConfig`` (vLLM fields included), ``LoraConfig`` and, with ``load_in_4bit``, its
    ``BitsAndBytesConfig``, and prints its GPU plan (an estimate), then trains a copy reduced only where a CPU must
    (``dry_run_settings.reduce_params``, printed) for one step with checkpoint-1 and resumes it to step 2, in
    ``outputs/dry-run`` (or ``<output_dir>/dry-run`` for a non-default ``--output-dir``). Raises
    ``SettingRejected`` for a setting the full run would reject.
    """
    import torch

    from rust_rewards.train import dry_run_settings as dr

    if params.preset != "real":
        raise SettingRejected(f"--dry-run checks the real preset; the {params.preset} preset runs on CPU as it is")
    if params.stage != "grpo" or params.init_adapter:
        raise SettingRejected("--dry-run checks the GRPO stage from a fresh adapter on a reduced model; run "
                              "--stage sft/dpo / --init-adapter with the tiny preset (or on the GPU) instead")
    try:
        full = resolve_params(params, GPU_MACHINE)  # as it is when the command line resolved it
        funcs, weights = select_rewards(full)
        # TrainingArguments refuses bf16 without a GPU unless use_cpu is set; use_cpu only picks the device.
        on_this_machine = dataclasses.replace(full, use_cpu=full.use_cpu or not torch.cuda.is_available())
        config = grpo_config(on_this_machine, [weights[f.__name__] for f in funcs])
        lora = lora_config(full)
        bnb = quantization_config(full)
        if bnb is not None:
            from peft import prepare_model_for_kbit_training  # noqa: F401 - what base_model calls on the GPU
    except (ValueError, TypeError) as err:
        raise SettingRejected(f"the full run would reject these settings: {err}") from err
    print(dr.plan_text(full), flush=True)
    vllm = {k: getattr(config, k) for k in vllm_kwargs(full)}
    print(f"full run's GRPOConfig built: bf16={config.bf16}, loss_type={config.loss_type!r}, "
          f"generation_batch_size={config.generation_batch_size}, steps_per_generation={config.steps_per_generation}, "
          f"{', '.join(f'{k}={v!r}' for k, v in vllm.items()) or 'use_vllm=False'}; LoraConfig built: r={lora.r}, "
          f"lora_alpha={lora.lora_alpha}, target_modules={lora.target_modules!r}", flush=True)
    if vllm:
        print("vLLM is off on CPU: its settings above are validated by GRPOConfig only, not run", flush=True)
    if bnb is not None:
        print(f"full run's BitsAndBytesConfig built: load_in_4bit={bnb.load_in_4bit}, "
              f"bnb_4bit_quant_type={bnb.bnb_4bit_quant_type!r}, "
              f"bnb_4bit_use_double_quant={bnb.bnb_4bit_use_double_quant}, "
              f"bnb_4bit_compute_dtype={bnb.bnb_4bit_compute_dtype}; the GPU run loads the base with it and "
              "prepares it with peft.prepare_model_for_kbit_training (not run here: no CUDA)", flush=True)

    default_out = full.output_dir == str(run_dir(preset_params(full.preset)))
    root = dr.prepare_dir(workspace() / "outputs" / "dry-run" if default_out else Path(full.output_dir) / "dry-run")
    model = dr.build_shaped_model(root / "model", full.model)
    dry, changes = dr.reduce_params(full, model, root / "run")
    print(dr.format_changes(full, changes), flush=True)
    print("dry run: the reduced model's weights are random, so expect every reward to be 0; its two steps check "
          "the plumbing (generation, verification, the update, checkpoint and resume), not learning", flush=True)
    run_training(dry, progress)
    result = run_training(dataclasses.replace(dry, max_steps=2, resume="yes"), progress)
    checkpoint = str(root / "run" / "checkpoint-1")
    if (result.global_step, result.resumed_from) != (2, checkpoint):
        raise RuntimeError(f"dry run: expected step 2 resumed from {checkpoint}, got step {result.global_step} "
                           f"resumed from {result.resumed_from}")
    print(f"dry run passed: step 1, {checkpoint}, resumed to step 2; outputs in {root / 'run'}", flush=True)
    return result
