"""The model a run trains: the base model (optionally 4-bit, QLoRA), a fresh LoRA adapter's config, or an earlier
adapter (``init_adapter``) to continue."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from rust_rewards.train.config import TrainParams


def lora_config(params: TrainParams) -> Any:
    """The fresh LoRA adapter's ``LoraConfig``: rank, alpha, dropout and target modules of ``params``."""
    from peft import LoraConfig

    targets = params.lora_target_modules
    return LoraConfig(
        r=params.lora_r,
        lora_alpha=params.lora_alpha,
        lora_dropout=params.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",")],
        task_type="CAUSAL_LM",
    )


def quantization_config(p: TrainParams) -> Any:
    """``--load-in-4bit``'s ``BitsAndBytesConfig`` (QLoRA: NF4, double quantization, bf16 compute), else None."""
    if not p.load_in_4bit:
        return None
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def base_model(p: TrainParams) -> Any:
    """The base model for training, in the run's dtype; with ``load_in_4bit`` its linear layers in NF4 on this
    process's GPU, prepared by PEFT's ``prepare_model_for_kbit_training`` (weights frozen, the unquantized rest
    upcast to fp32, input gradients on for gradient checkpointing) before any LoRA adapter is added."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if p.bf16 else torch.float32
    if not p.load_in_4bit:
        return AutoModelForCausalLM.from_pretrained(p.model, dtype=dtype)
    from accelerate import PartialState
    from peft import prepare_model_for_kbit_training

    model = AutoModelForCausalLM.from_pretrained(p.model, dtype=dtype, quantization_config=quantization_config(p),
                                                 device_map={"": PartialState().local_process_index})
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=p.gradient_checkpointing)


def policy_model(p: TrainParams) -> Any:
    """The base model with ``init_adapter`` loaded as a trainable LoRA adapter: training continues that adapter
    (stacked on the frozen base, not merged into it), with its own rank, alpha and target modules."""
    from peft import PeftConfig, PeftModel

    adapter = PeftConfig.from_pretrained(p.init_adapter)
    if adapter.base_model_name_or_path not in (p.model, None) and Path(
            adapter.base_model_name_or_path).name != Path(p.model).name:
        warnings.warn(f"--init-adapter {p.init_adapter} was trained on {adapter.base_model_name_or_path}, "
                      f"this run's base model is {p.model}", stacklevel=2)
    print(f"continuing adapter {p.init_adapter}: r={adapter.r}, lora_alpha={adapter.lora_alpha}, "
          f"target_modules={sorted({m.rsplit('.', 1)[-1] for m in adapter.target_modules or ()})} (the --lora-* "
          "flags do not apply)", flush=True)
    return PeftModel.from_pretrained(base_model(p), p.init_adapter, is_trainable=True)


def trainer_model(p: TrainParams) -> Any:
    """The trainer's model: ``init_adapter`` on the base (``policy_model``), the prepared 4-bit base (``base_model``:
    TRL's own loader would skip ``prepare_model_for_kbit_training``), else the name TRL loads with
    ``model_init_kwargs``; a fresh adapter comes from ``peft_config``."""
    if p.init_adapter:
        return policy_model(p)
    return base_model(p) if p.load_in_4bit else p.model
