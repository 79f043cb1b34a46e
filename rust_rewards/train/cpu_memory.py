"""The peak resident memory of a training run on the CPU, estimated before its model loads, against the memory this
machine has free.

Closed formulas over the model's shape and the run's settings, like ``gpu_plan``'s, in fp32 (a CPU run's dtype). Two
constants are measured: the process's own share (the tiny preset's peak, its model 0.4M parameters) and the
activations a layer keeps per token (fitted on SmolLM2-135M GRPO steps, ``benchmarks/step_memory.py``, 2-core AMD
EPYC: 16x1 9.55 GiB, 4x4 4.06 GiB, 2x8 3.27 GiB peak RSS; docs/train.md), and the benchmark prints the estimate
beside each measurement. Rows add up although they peak at different moments: a run keeps the memory it frees
(``cpus.keep_freed_memory``), so the load's copy of the weights and generation's cache stay resident. An ESTIMATE:
another model family or attention kernel moves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rust_rewards.train.gpu_plan import GIB, ModelShape, Row

FP32 = 4
PROCESS_GIB = 1.1
"""Python with torch, transformers, TRL and datasets imported, the verifier's threads and allocator slack: the tiny
preset's measured peak (1.09 GiB, ``/usr/bin/time -v``), whose model adds next to nothing."""
ACTIVATION_FLOATS = (6, 3)
"""fp32 values a decoder layer keeps for backward per token: 6 x hidden + 3 x intermediate (fitted)."""
LOGIT_COPIES = 3
"""Completion logits, their log-softmax and their gradient, each vocab-wide per completion token."""


class NotEnoughMemory(ValueError):
    """A CPU run whose estimated peak is above the machine's free memory: one line, the way out."""


@dataclass(frozen=True)
class CpuRun:
    """The settings of a CPU run that set its peak memory."""

    micro_batch: int
    completions_per_step: int
    """Completions generated together (batch x accumulation)."""
    prompt_tokens: int
    """The longest prompt in tokens (a micro-batch is padded to its longest)."""
    completion_tokens: int
    lora_r: int
    gradient_checkpointing: bool


def memory_rows(m: ModelShape, run: CpuRun) -> list[Row]:
    """The rows of a CPU run's peak (GiB), each with its formula."""
    p, lora = m.params(), m.lora_params(run.lora_r)
    sequence = run.prompt_tokens + run.completion_tokens
    tokens = run.micro_batch * sequence
    per_token_layer = (ACTIVATION_FLOATS[0] * m.hidden + ACTIVATION_FLOATS[1] * m.intermediate) * FP32
    rows = [
        Row("process (libraries, verifier, allocator slack)", PROCESS_GIB, "the tiny preset's measured peak"),
        Row("base weights (fp32)", p * FP32 / GIB, f"params {p:,} x 4 B"),
        Row("the load's copy of the weights (kept)", p * FP32 / GIB, f"params {p:,} x 4 B"),
        Row("generation's key/value cache (kept)",
            run.completions_per_step * sequence * m.kv_bytes_per_token(FP32) / GIB,
            f"{run.completions_per_step} sequences x {sequence} tokens x "
            f"{m.kv_bytes_per_token(FP32):,} B (layers x 2 x kv_heads x head_dim x 4 B)"),
        Row("LoRA weights + grads + AdamW", lora * 16 / GIB, f"LoRA params {lora:,} x (4 + 4 + 8) B"),
    ]
    if run.gradient_checkpointing:
        rows.append(Row("checkpointed activations + one layer recomputed",
                        (m.layers * tokens * m.hidden * FP32 + tokens * per_token_layer) / GIB,
                        f"tokens {tokens:,} x (layers {m.layers} x hidden {m.hidden} + {ACTIVATION_FLOATS[0]} x hidden "
                        f"+ {ACTIVATION_FLOATS[1]} x intermediate {m.intermediate}) x 4 B"))
    else:
        rows.append(Row("activations", m.layers * tokens * per_token_layer / GIB,
                        f"layers {m.layers} x tokens {tokens:,} (micro-batch {run.micro_batch} x {sequence}) x "
                        f"({ACTIVATION_FLOATS[0]} x hidden {m.hidden} + "
                        f"{ACTIVATION_FLOATS[1]} x intermediate {m.intermediate}) x 4 B"))
    rows.append(Row("completion logits", run.micro_batch * run.completion_tokens * m.vocab * FP32 * LOGIT_COPIES / GIB,
                    f"micro-batch {run.micro_batch} x completion {run.completion_tokens} x vocab {m.vocab:,} x 4 B x "
                    f"{LOGIT_COPIES} (logits, log-softmax, gradient)"))
    return rows


def peak_gib(m: ModelShape, run: CpuRun) -> float:
    return sum(r.gib for r in memory_rows(m, run))


def available_gib() -> float:
    """Memory this machine can give a new process now (``MemAvailable``: free memory and reclaimable cache)."""
    import psutil

    return psutil.virtual_memory().available / GIB


def fit_line(m: ModelShape, run: CpuRun, available: float) -> str:
    """What a CPU run says before its model loads; ``NotEnoughMemory`` when the estimate is above ``available``."""
    peak = peak_gib(m, run)
    if peak > available:
        smaller = max(1, run.micro_batch // 2)
        raise NotEnoughMemory(
            f"--per-device-train-batch-size {run.micro_batch}: this run needs about {peak:.1f} GiB of memory at its "
            f"peak and this machine has {available:.1f} GiB free: lower --per-device-train-batch-size (to {smaller}, "
            "with --gradient-accumulation-steps doubled the step keeps its completions)"
            + ("" if run.gradient_checkpointing else " or add --gradient-checkpointing true"))
    return (f"memory: about {peak:.1f} GiB peak on the CPU (estimate: micro-batch {run.micro_batch}, prompts up to "
            f"{run.prompt_tokens} + {run.completion_tokens} completion tokens); {available:.1f} GiB free")
