"""TRL's configs of each stage for resolved params: the ``TrainingArguments`` all stages share (``trainer_args``),
then ``GRPOConfig`` (with its vLLM fields), ``SFTConfig`` and ``DPOConfig``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rust_rewards.sampling.decoding import CPU_MAX_BATCH_TOKENS, paged_cache_blocks
from rust_rewards.train.config import TrainParams


def checkpointing_field() -> str:
    """transformers' name for gradient checkpointing: ``activation_checkpointing`` where it has one (5.20+, where
    ``gradient_checkpointing`` is a deprecated alias that TRL's configs default to True and the new name
    overrides), else ``gradient_checkpointing`` (vLLM's CPU build pins transformers < 5.20)."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def trainer_args(p: TrainParams) -> dict[str, Any]:
    """The ``TrainingArguments`` both stages share: optimizer, schedule, precision, device, checkpoints, logging."""
    return dict(
        output_dir=p.output_dir,
        run_name=p.run_name,
        max_steps=p.max_steps,
        num_train_epochs=p.num_train_epochs,
        learning_rate=p.lr,
        lr_scheduler_type=p.lr_scheduler_type,
        warmup_steps=p.warmup_ratio,  # transformers 5 reads a value below 1 as a ratio (warmup_ratio is deprecated)
        weight_decay=p.weight_decay,
        adam_beta2=p.adam_beta2,
        max_grad_norm=p.max_grad_norm,
        bf16=p.bf16,
        use_cpu=p.use_cpu,
        **{checkpointing_field(): p.gradient_checkpointing},
        # a 4-bit base is loaded here (base_model): TRL would only warn that model_init_kwargs go unused
        model_init_kwargs=None if p.load_in_4bit else {"dtype": "bfloat16" if p.bf16 else "float32"},
        save_strategy="steps",
        save_steps=p.save_steps,
        save_total_limit=p.save_total_limit,
        logging_steps=p.logging_steps,
        report_to=["wandb"] if p.wandb else "none",
        disable_tqdm=True,
        seed=p.seed,
    )


def vllm_kwargs(params: TrainParams) -> dict[str, Any]:
    """``GRPOConfig``'s vLLM fields for resolved params (none without vLLM).

    Colocate: vLLM takes ``vllm_gpu_memory_utilization`` of the training GPU and sleeps (weights and KV cache
    offloaded) during the optimizer step. Server: generation by ``trl vllm-serve`` at host:port.
    """
    p = params
    if not p.use_vllm:
        return {}
    if p.vllm_mode == "colocate":
        return dict(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=p.vllm_gpu_memory_utilization,
                    vllm_enable_sleep_mode=True)
    return dict(use_vllm=True, vllm_mode="server", vllm_server_host=p.vllm_server_host,
                vllm_server_port=p.vllm_server_port, vllm_server_timeout=p.vllm_server_timeout)


def grpo_config(params: TrainParams, weights: Sequence[float]) -> Any:
    """TRL's ``GRPOConfig`` for resolved params."""
    from trl import GRPOConfig

    p = params
    return GRPOConfig(
        **trainer_args(p),
        beta=p.beta,
        loss_type=p.loss_type,
        scale_rewards=p.scale_rewards,
        mask_truncated_completions=p.mask_truncated_completions,
        disable_dropout=p.disable_dropout,
        num_generations=p.num_generations,
        max_completion_length=p.max_completion_length,
        temperature=p.temperature,
        top_p=p.top_p,
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        reward_weights=list(weights),
        log_completions=False,
        **({"max_tool_calling_iterations": p.feedback_turns} if p.feedback_turns else {}),
        **({"steps_per_generation": p.steps_per_generation} if p.steps_per_generation else {}),
        **continuous_batching_kwargs(p),
        **vllm_kwargs(p),
    )


CPU_PROMPT_ROOM = 1024
"""Prompt tokens the CPU's continuous-batching cache leaves room for per completion (longer prompts wait)."""


def continuous_batching_kwargs(params: TrainParams) -> dict[str, Any]:
    """``GRPOConfig``'s continuous-batching fields for ``--generation-engine continuous`` without vLLM. On the CPU its
    paged cache is sized for one generation batch (transformers would size it from free memory: half the RAM,
    zeroed at every generation: a tiny-preset step took 19-27 s, sized 3.6-4.8 s); on a GPU TRL's own sizing."""
    p = params
    if p.use_vllm or p.generation_engine != "continuous":
        return {}
    if not p.use_cpu:
        return {"use_transformers_continuous_batching": True}
    completions = p.per_device_train_batch_size * (p.steps_per_generation or p.gradient_accumulation_steps)
    blocks = paged_cache_blocks([CPU_PROMPT_ROOM + p.max_completion_length] * completions)
    return {"use_transformers_continuous_batching": True,
            "transformers_continuous_batching_config": {"num_blocks": blocks,
                                                        "max_batch_tokens": CPU_MAX_BATCH_TOKENS}}


def sft_config(params: TrainParams) -> Any:
    """TRL's ``SFTConfig`` for resolved params: the GRPO stage's optimizer, schedule, batch, checkpoint and logging
    settings; loss on the answer tokens only; no truncation (answers over the completion budget are not in the
    data)."""
    from trl import SFTConfig

    p = params
    return SFTConfig(
        **trainer_args(p),
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        completion_only_loss=True,
        max_length=None,
    )


def dpo_config(params: TrainParams) -> Any:
    """TRL's ``DPOConfig`` for resolved params: the other stages' optimizer, schedule, batch (pairs per micro-batch),
    checkpoint and logging settings; sigmoid DPO loss with ``dpo_beta``; no truncation (sampled completions are
    already bounded by the completion budget they were generated with)."""
    from trl import DPOConfig

    p = params
    return DPOConfig(
        **trainer_args(p),
        per_device_train_batch_size=p.per_device_train_batch_size,
        gradient_accumulation_steps=p.gradient_accumulation_steps,
        beta=p.dpo_beta,
        max_length=None,
    )
