"""A CPU dry run of the GPU preset: the full run's settings, reduced only where a CPU must.

For any parameter dataclass with the fields of ``rust_rewards.train.config.TrainParams``: ``reduce_params`` derives
the dry run's parameters from the full run's and lists exactly what it changed and why, ``build_shaped_model`` saves
a random model with the real model's layer shape but only ``LAYERS`` layers, and ``plan_text`` is the GPU memory and
time estimate (``gpu_plan``) for the full settings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rust_rewards.cpus import BF16_FLAGS, cpu_has_native_bf16
from rust_rewards.data.bundled import BUNDLED_TASKS
from rust_rewards.data.pipeline import process_command
from rust_rewards.train.gpu_plan import LORA_TARGETS, ModelShape, RunShape, format_plan
from rust_rewards.train.tiny_model import QWEN_SHAPES, SPECIAL_TOKENS, qwen_shape_config, train_tokenizer

LAYERS = 2
"""Decoder layers of the shaped model (the real one has 28): each layer is exactly the real shape."""
TASKS = 4
"""Task prompts the dry run trains on (one prompt group per step)."""
COMPLETION_TOKENS = 16
"""Completion length: generation on CPU costs one forward pass per token."""
GROUP = 2
"""Completions per prompt (the smallest group with an advantage): a CPU step costs in proportion to them."""
TOKENIZER_VOCAB = 4096
"""Tokens of the locally trained tokenizer; the model keeps the real vocabulary (151,936 rows)."""
PLAN_PROMPT_TOKENS = 512
"""Prompt length the GPU plan assumes: the parameters set no prompt limit."""
MARKER = "dry_run.json"
"""Written into the dry-run folder: only a folder holding it is ever cleared by a later dry run."""
MODEL_MARKER = "shaped_model.json"

P = TypeVar("P")


class SettingRejected(ValueError):
    """A setting the full run would reject: the dry run stops before training anything."""


@dataclass(frozen=True)
class Change:
    """One setting the dry run changed: its value in the full run, in the dry run, and why."""

    name: str
    full: Any
    dry: Any
    reason: str


def reduce_params(full: P, model_dir: str | os.PathLike[str],
                  output_dir: str | os.PathLike[str]) -> tuple[P, list[Change]]:
    """The dry run's first leg (one step, fresh) from the full run's resolved parameters, and what changed.

    Only settings that differ are reported; the dry run's second leg is the same with ``max_steps=2, resume="yes"``.
    """
    p: Any = full
    local_data, make = Path(p.data).exists(), process_command(p.data)
    overrides: dict[str, tuple[Any, str]] = {
        "model": (str(model_dir), f"the real model's exact layer shape (hidden, heads, KV heads, intermediate, vocab) "
                                  f"at {LAYERS} layers, random weights, a {TOKENIZER_VOCAB}-token local tokenizer"),
        "data": (p.data if local_data else str(BUNDLED_TASKS), "the full run's data is not on this machine"
                 + (f" (`{make}` makes it)" if make else "")),
        "data_split": (p.data_split if local_data else "", "bundled tasks have no splits"),
        "max_tasks": (min(p.max_tasks, TASKS) if p.max_tasks > 0 else TASKS, f"{TASKS} prompts"),
        "output_dir": (str(output_dir), "a disposable dry-run folder"),
        "run_name": (f"{p.run_name}-dry-run", "marks the run as a dry run"),
        "max_steps": (1, "one optimizer step and checkpoint-1, then a resume to step 2"),
        "resume": ("no", "fresh for step 1, then yes (from checkpoint-1) for step 2"),
        "max_completion_length": (min(p.max_completion_length, COMPLETION_TOKENS),
                                  "CPU generation costs one forward pass per token"),
        "num_generations": (min(p.num_generations, GROUP), "a CPU step costs in proportion to its completions; the "
                                                           "full GRPOConfig above checks the real group and batch"),
        "per_device_train_batch_size": (min(p.num_generations, GROUP),
                                        "one prompt group (num_generations completions) per pass"),
        "gradient_accumulation_steps": (1, "one prompt group per optimizer step"),
        "save_steps": (1, "a checkpoint every step, so the resume is real"),
        "use_cpu": (True, "no GPU"),
        "bf16": (bool(p.bf16) and cpu_has_native_bf16(),
                 f"this CPU has no native bf16 ({' or '.join(BF16_FLAGS)} missing): emulated bf16 on CPU takes "
                 "minutes per backward pass, so the dry run computes in fp32 (a reduced setting)"),
        "use_vllm": (False, "vLLM needs a GPU: its settings are validated by the full GRPOConfig only"),
        "load_in_4bit": (False, "bitsandbytes 4-bit kernels need a CUDA GPU: the CPU leg trains the reduced model "
                                "unquantized"),
        "verifier": ("local", "the dry run verifies on this machine"),
        "wandb": (False, "a dry run is not logged as a run"),
        "oxen_repo": ("", "a dry run is not uploaded"),
    }
    dry = dataclasses.replace(p, **{name: value for name, (value, _) in overrides.items()})
    changes = [Change(name, getattr(p, name), value, reason)
               for name, (value, reason) in overrides.items() if getattr(p, name) != value]
    return dry, changes


def format_changes(full: Any, changes: list[Change], skip: tuple[str, ...] = ("dry_run",)) -> str:
    """Which settings the dry run reduced (full -> dry: why) and which it kept as the full run has them."""
    changed = {c.name for c in changes}
    kept = [f"{f.name}={getattr(full, f.name)!r}" for f in dataclasses.fields(full)
            if f.name not in changed and f.name not in skip]
    return "\n".join([
        f"dry run: {len(changes)} settings reduced to run on CPU (full run -> dry run: why)",
        *(f"  {c.name}: {c.full!r} -> {c.dry!r}: {c.reason}" for c in changes),
        f"dry run: {len(kept)} settings kept as the full run has them",
        textwrap.fill(", ".join(kept), width=118, initial_indent="  ", subsequent_indent="  ",
                      break_long_words=False, break_on_hyphens=False),
    ])


def prepare_dir(root: str | os.PathLike[str]) -> Path:
    """``root`` ready for a fresh dry run: a shaped model there is kept, the last dry run's ``run/`` removed.

    A non-empty folder without ``MARKER`` is refused: a dry run never deletes what it did not write.
    """
    root = Path(root)
    if root.is_dir() and any(root.iterdir()) and not (root / MARKER).is_file():
        raise FileExistsError(f"{root} is not empty and holds no {MARKER}: refusing to use it for a dry run")
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text(json.dumps({"written_by": "train.py --dry-run"}) + "\n")
    shutil.rmtree(root / "run", ignore_errors=True)
    return root


def shape_config(model: str, layers: int | None = None):
    """The config of ``model`` (a known Qwen2.5-Coder name: built locally; else a folder or hub config),
    with ``layers`` decoder layers when given."""
    from transformers import AutoConfig

    config = qwen_shape_config(model) if model in QWEN_SHAPES else AutoConfig.from_pretrained(model)
    if layers is None:
        return config
    values = {**config.to_dict(), "num_hidden_layers": layers}
    values.pop("layer_types", None)  # one entry per layer: rebuilt for the new depth
    return type(config)(**values)


def build_shaped_model(out_dir: str | os.PathLike[str], model: str, *, layers: int = LAYERS,
                       vocab: int = TOKENIZER_VOCAB, seed: int = 0) -> Path:
    """Save (or reuse) a random ``layers``-layer model with ``model``'s layer shape and a local tokenizer.

    The model keeps the full vocabulary (embedding and head at the real size); the tokenizer covers only its
    first ``vocab`` ids, so sampled ids beyond it decode to nothing. Its special-token ids are the model's
    bos/eos/pad. Weights are saved in the config's dtype (bf16 for Qwen2.5), built in a temporary sibling folder.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    out = Path(out_dir)
    params = {"model": model, "layers": layers, "vocab": vocab, "seed": seed}
    try:
        if json.loads((out / MODEL_MARKER).read_text()) == params:
            return out
    except (OSError, ValueError):
        pass
    config = shape_config(model, layers)
    tokenizer = train_tokenizer(vocab)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config.bos_token_id = config.pad_token_id = ids["<|endoftext|>"]
    config.eos_token_id = ids["<|im_end|>"]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            shaped = AutoModelForCausalLM.from_config(config)  # in the config's dtype
        shaped.generation_config = GenerationConfig(
            bos_token_id=ids["<|endoftext|>"], eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
            pad_token_id=ids["<|endoftext|>"])
        shaped.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MODEL_MARKER).write_text(json.dumps(params))
        tmp.chmod(0o755)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def run_shape(p: Any, prompt_tokens: int = PLAN_PROMPT_TOKENS) -> RunShape:
    """``gpu_plan``'s view of resolved parameters: vLLM's share counts on the training GPU only in colocate mode."""
    colocate = bool(p.use_vllm) and p.vllm_mode == "colocate"
    return RunShape(
        micro_batch=p.per_device_train_batch_size,
        completions_per_step=p.per_device_train_batch_size * p.gradient_accumulation_steps,
        prompt_tokens=prompt_tokens,
        completion_tokens=p.max_completion_length,
        lora_r=p.lora_r,
        gradient_checkpointing=p.gradient_checkpointing,
        vllm_util=p.vllm_gpu_memory_utilization if colocate else None,
        sleep_mode=colocate,
        load_in_4bit=bool(p.load_in_4bit),
    )


def plan_text(p: Any, prompt_tokens: int = PLAN_PROMPT_TOKENS) -> str:
    """The GPU memory and time ESTIMATE for the full run's parameters, with what it assumes."""
    notes = [f"assumed: prompts of {prompt_tokens} tokens (the run sets no prompt limit)"]
    if p.use_vllm and p.vllm_mode == "server":
        notes.append("vLLM server mode: generation runs on the server's own GPU; the table is the training GPU only")
    if p.load_in_4bit:
        notes.append("--load-in-4bit: NF4 base weights (QLoRA), generation without vLLM (it cannot take a 4-bit "
                     "policy); the 4-bit load, memory and speed are untested on a real GPU")
    if p.lora_target_modules != "all-linear":
        notes.append(f"LoRA counted on all of {', '.join(LORA_TARGETS)} (all-linear): an over-estimate")
    if p.hints != "off":
        notes.append(f"--hints {p.hints}: the first {p.hint_levels} of each reference's lines start the answer in GRPO "
                     f"prompts (lower after groups pass {p.hint_lower_at:.0%} of the time); prompts grow by up to that "
                     "share of a reference; evaluation never shows a hint")
    return format_plan(ModelShape.from_config(shape_config(p.model)), run_shape(p, prompt_tokens)) + "\n" + "\n".join(
        notes)
