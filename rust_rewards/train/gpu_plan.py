"""An estimate of GPU memory and step time for a GRPO + LoRA run, before anyone rents the GPU.

Every row is a closed formula over the model's shape and the run's settings (printed next to its value), so the
plan can be checked by hand. It is an ESTIMATE: allocator fragmentation, CUDA graphs, kernel choice and vLLM's own
bookkeeping move real numbers by a GiB or more, and the time rows assume the efficiencies stated in ``CARDS``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

GIB = 2**30
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
CUDA_CONTEXT_GIB = 1.0
"""CUDA context, cuBLAS workspaces and allocator slack per process (a rule of thumb, not a measurement)."""
VLLM_OVERHEAD_GIB = 1.0
"""vLLM's activations, sampler and CUDA graphs beside weights and KV cache (rule of thumb)."""
MFU = 0.35
"""Share of peak bf16 FLOPs a LoRA training step reaches (assumed)."""
DECODE_EFFICIENCY = 0.5
"""Share of memory bandwidth a decode step reaches in vLLM (assumed)."""
NF4_BLOCK, NF4_BLOCK2 = 64, 256
"""bitsandbytes NF4: one absmax per 64 weights; with double quantization each absmax is 8-bit and every 256 of them
share one fp32 constant."""
NF4_BITS = 4 + 8 / NF4_BLOCK + 32 / (NF4_BLOCK * NF4_BLOCK2)
"""Bits per quantized weight with double quantization: 4 + 8/64 + 32/(64 x 256) = 4.127 (without it: 4.5)."""


@dataclass(frozen=True)
class Card:
    """A GPU class: memory, dense bf16 peak and memory bandwidth (vendor data sheets)."""

    name: str
    gib: int
    tflops: float
    bandwidth_gbs: float


CARDS = (
    Card("24 GiB (L4)", 24, 121.0, 300.0),
    Card("40 GiB (A100 40GB)", 40, 312.0, 1555.0),
    Card("80 GiB (H100 SXM)", 80, 989.0, 3350.0),
    Card("141 GiB (H200)", 141, 989.0, 4800.0),
)


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that set its memory (Qwen2 naming)."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = True

    @classmethod
    def from_config(cls, config) -> ModelShape:
        return cls(config.hidden_size, config.intermediate_size, config.num_hidden_layers,
                   config.num_attention_heads, config.num_key_value_heads, config.vocab_size,
                   bool(getattr(config, "tie_word_embeddings", False)))

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer in one decoder layer."""
        kv = self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, h), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (h, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def linear_params(self) -> int:
        """Weights of the decoder layers' linear layers: what bitsandbytes quantizes (embeddings, the LM head, norms
        and biases stay unquantized)."""
        return self.layers * sum(a * b for a, b in self.linears().values())

    def params(self) -> int:
        per_layer = sum(a * b for a, b in self.linears().values())
        biases = self.hidden + 2 * self.kv_heads * self.head_dim
        norms = 2 * self.hidden
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * (per_layer + biases + norms) + embed + self.hidden

    def lora_params(self, r: int, targets: tuple[str, ...] = LORA_TARGETS) -> int:
        return self.layers * sum(r * (a + b) for name, (a, b) in self.linears().items() if name in targets)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return self.layers * 2 * self.kv_heads * self.head_dim * dtype_bytes


@dataclass(frozen=True)
class RunShape:
    """The settings of a run that set its memory and time."""

    micro_batch: int
    """Completions per forward/backward pass (``per_device_train_batch_size``)."""
    completions_per_step: int
    """Completions generated and trained on per optimizer step (batch x accumulation)."""
    prompt_tokens: int
    completion_tokens: int
    lora_r: int
    gradient_checkpointing: bool = True
    vllm_util: float | None = 0.3
    """``vllm_gpu_memory_utilization`` for colocate generation; None = no vLLM (HF generate)."""
    sleep_mode: bool = True
    optimizer_bytes: int = 8
    """Optimizer state bytes per trainable parameter: 8 for AdamW (fp32 m and v), 2 for 8-bit AdamW."""
    verify_seconds: float = 0.3
    """Verifier CPU seconds per completion (``python -m rust_rewards bench``: 24 distinct completions in 3.5 s on
    2 cores, about 0.29 core-seconds each)."""
    cpu_cores: int = 16
    load_in_4bit: bool = False
    """QLoRA: base weights in bitsandbytes NF4 (double quantization), prepared by PEFT's
    ``prepare_model_for_kbit_training`` (the unquantized rest upcast to fp32) and the adapter cast to bf16 by TRL.
    vLLM colocate cannot take a 4-bit policy: ``vllm_util`` must be None."""


@dataclass(frozen=True)
class Row:
    name: str
    gib: float
    formula: str


def memory_rows(m: ModelShape, run: RunShape) -> tuple[list[Row], list[Row]]:
    """(training rows, vLLM rows) in GiB, each with its formula."""
    p, lora = m.params(), m.lora_params(run.lora_r)
    tokens = run.micro_batch * (run.prompt_tokens + run.completion_tokens)
    layer_peak = tokens * (10 * m.hidden + 4 * m.intermediate) * 2
    if run.load_in_4bit and run.vllm_util is not None:
        raise ValueError("vLLM colocate cannot take a bitsandbytes 4-bit policy: plan a 4-bit run without vLLM "
                         "(vllm_util=None)")
    if run.load_in_4bit:
        q = m.linear_params()
        # TRL casts a quantized model's adapter to bf16: weight, gradient and AdamW's m and v follow its dtype
        state = run.optimizer_bytes // 2 if run.optimizer_bytes == 8 else run.optimizer_bytes
        train = [
            Row("base weights (NF4 4-bit, double quant; rest fp32)", (q * NF4_BITS / 8 + (p - q) * 4) / GIB,
                f"linear params {q:,} x (4 + 8/{NF4_BLOCK} + 32/({NF4_BLOCK} x {NF4_BLOCK2})) bits / 8 + other "
                f"params {p - q:,} (embeddings{'' if m.tied else ', LM head'}, norms, biases) x 4 B fp32 "
                "(prepare_model_for_kbit_training upcasts them)"),
            Row("LoRA weights + grads + optimizer", lora * (2 + 2 + state) / GIB,
                f"LoRA params {lora:,} x (2 B bf16 weight + 2 B grad + {state} B optimizer, bf16 like the adapter)"),
        ]
    else:
        train = [
            Row("base weights (bf16)", p * 2 / GIB, f"params {p:,} x 2 B"),
            Row("LoRA weights + grads + optimizer", lora * (4 + 4 + run.optimizer_bytes) / GIB,
                f"LoRA params {lora:,} x (4 B fp32 weight + 4 B grad + {run.optimizer_bytes} B optimizer)"),
        ]
    if run.gradient_checkpointing:
        train.append(Row("checkpointed activations", m.layers * tokens * m.hidden * 2 / GIB,
                         f"layers {m.layers} x tokens {tokens:,} x hidden {m.hidden} x 2 B"))
        train.append(Row("one layer recomputed in backward", layer_peak / GIB,
                         f"tokens {tokens:,} x (10 x hidden + 4 x intermediate) x 2 B"))
    else:
        train.append(Row("activations (no checkpointing)", m.layers * layer_peak / GIB,
                         f"layers {m.layers} x tokens {tokens:,} x (10 x hidden + 4 x intermediate) x 2 B"))
    logits = run.micro_batch * run.completion_tokens * m.vocab
    train.append(Row("logits and their gradient", logits * 4 / GIB,
                     f"micro-batch {run.micro_batch} x completion {run.completion_tokens} x vocab {m.vocab:,} "
                     "x (2 B bf16 + 2 B grad)"))
    train.append(Row("CUDA context and allocator slack", CUDA_CONTEXT_GIB, "rule of thumb"))
    if run.vllm_util is None:
        return train, []
    kv_needed = run.completions_per_step * (run.prompt_tokens + run.completion_tokens) * m.kv_bytes_per_token()
    vllm = [
        Row("vLLM weights copy (bf16)", p * 2 / GIB, f"params {p:,} x 2 B"),
        Row("vLLM KV cache needed for one generation batch", kv_needed / GIB,
            f"{run.completions_per_step} sequences x {run.prompt_tokens + run.completion_tokens} tokens x "
            f"{m.kv_bytes_per_token():,} B/token (layers x 2 x kv_heads x head_dim x 2 B)"),
        Row("vLLM activations and CUDA graphs", VLLM_OVERHEAD_GIB, "rule of thumb"),
    ]
    return train, vllm


@dataclass(frozen=True)
class CardPlan:
    card: Card
    train_gib: float
    vllm_reserved_gib: float
    vllm_needed_gib: float
    peak_gib: float
    fits: bool
    step_seconds: dict[str, float]
    advice: tuple[str, ...] = ()


def _peak(m: ModelShape, run: RunShape, card: Card) -> tuple[float, float, float, float, bool]:
    train_rows, vllm_rows = memory_rows(m, run)
    train = sum(r.gib for r in train_rows)
    needed = sum(r.gib for r in vllm_rows)
    reserved = (run.vllm_util or 0.0) * card.gib
    if run.vllm_util is None:
        peak = train
    elif run.sleep_mode:
        resident = sum(r.gib for r in train_rows[:2]) + CUDA_CONTEXT_GIB
        peak = max(train, resident + reserved)
    else:
        peak = train + reserved
    fits = peak <= card.gib and (run.vllm_util is None or needed <= reserved)
    return train, reserved, needed, peak, fits


def step_seconds(m: ModelShape, run: RunShape, card: Card) -> dict[str, float]:
    """Time per optimizer step: generation (memory-bound decode), training (FLOPs), rewards (CPU)."""
    p = m.params()
    weight_bytes = p * 2
    avg_kv = run.completions_per_step * (run.prompt_tokens + run.completion_tokens / 2) * m.kv_bytes_per_token()
    generate = run.completion_tokens * (weight_bytes + avg_kv) / (card.bandwidth_gbs * 1e9 * DECODE_EFFICIENCY)
    tokens = run.completions_per_step * (run.prompt_tokens + run.completion_tokens)
    passes = 6 if run.gradient_checkpointing else 4
    head = 2 * m.hidden * m.vocab * run.completions_per_step * run.completion_tokens * 3
    train = (passes * p * tokens + head) / (card.tflops * 1e12 * MFU)
    rewards = run.completions_per_step * run.verify_seconds / run.cpu_cores
    return {"generate": generate, "train": train, "rewards": rewards}


def fixes(m: ModelShape, run: RunShape, card: Card) -> list[tuple[str, RunShape]]:
    """Changes that make the run fit ``card``: for each kind of change, the mildest one that fits after re-planning."""
    kinds: list[list[tuple[str, RunShape]]] = [
        [(f"--per-device-train-batch-size {b} (raise --gradient-accumulation-steps to keep "
          f"{run.completions_per_step} completions per step)", dataclasses.replace(run, micro_batch=b))
         for b in (run.micro_batch // 2, run.micro_batch // 4, 1) if 1 <= b < run.micro_batch],
        [(f"--vllm-gpu-memory-utilization {u}", dataclasses.replace(run, vllm_util=u))
         for u in (0.2, 0.4, 0.5, 0.6) if run.vllm_util is not None and u != run.vllm_util],
        [(f"{n} completions per step (fewer generations or prompts)",
          dataclasses.replace(run, completions_per_step=n, micro_batch=min(run.micro_batch, n)))
         for n in (run.completions_per_step // 2, run.completions_per_step // 4) if n >= 2],
        [(f"--max-completion-length {n}", dataclasses.replace(run, completion_tokens=n))
         for n in (run.completion_tokens // 2, run.completion_tokens // 4) if n >= 16],
        [("an 8-bit optimizer (--optim adamw_bnb_8bit)", dataclasses.replace(run, optimizer_bytes=2))],
    ]
    found = []
    for kind in kinds:
        fitting = [(label, changed) for label, changed in kind if _peak(m, changed, card)[4]]
        if fitting:
            found.append(fitting[0])
    return found


def _advice(m: ModelShape, run: RunShape, card: Card) -> tuple[str, ...]:
    labels = tuple(label for label, _ in fixes(m, run, card))
    return labels or ("no single change fits: combine a smaller micro-batch with shorter completions, or use a "
                      "larger card",)


def plan(m: ModelShape, run: RunShape, cards: tuple[Card, ...] = CARDS) -> list[CardPlan]:
    out = []
    for card in cards:
        train, reserved, needed, peak, fits = _peak(m, run, card)
        out.append(CardPlan(card, train, reserved, needed, peak, fits, step_seconds(m, run, card),
                            () if fits else _advice(m, run, card)))
    return out


def format_plan(m: ModelShape, run: RunShape, cards: tuple[Card, ...] = CARDS) -> str:
    """The plan as Markdown: memory rows with formulas, then one row per card with time and advice."""
    train_rows, vllm_rows = memory_rows(m, run)
    lines = [
        "GPU memory and time plan (an ESTIMATE from formulas, not a measurement)",
        "",
        f"model: {m.params():,} params, {m.layers} layers, hidden {m.hidden}, vocab {m.vocab:,}; "
        f"LoRA r {run.lora_r} on {', '.join(LORA_TARGETS)}: {m.lora_params(run.lora_r):,} trainable",
        f"run: micro-batch {run.micro_batch} completions, {run.completions_per_step} completions per step, "
        f"prompt {run.prompt_tokens} + completion {run.completion_tokens} tokens, gradient checkpointing "
        f"{'on' if run.gradient_checkpointing else 'off'}, base weights "
        f"{'NF4 4-bit (--load-in-4bit)' if run.load_in_4bit else 'bf16'}, vLLM "
        + ("off" if run.vllm_util is None else f"colocate at {run.vllm_util:.0%}"
           + (" with sleep mode" if run.sleep_mode else "")),
        "",
        "| part | GiB | formula |",
        "|---|---|---|",
        *(f"| {r.name} | {r.gib:.2f} | {r.formula} |" for r in [*train_rows, *vllm_rows]),
        "",
        "Peak: training total, plus the vLLM share (gpu_memory_utilization x card) unless sleep mode frees it "
        "while training; vLLM needs its weights + KV cache + overhead inside its share.",
        "",
        "| card | training GiB | vLLM share / needed GiB | peak GiB | fits | s/step generate + train + rewards "
        "| if it does not fit |",
        "|---|---|---|---|---|---|---|",
    ]
    for cp in plan(m, run, cards):
        t = cp.step_seconds
        share = "-" if run.vllm_util is None else f"{cp.vllm_reserved_gib:.1f} / {cp.vllm_needed_gib:.1f}"
        lines.append(
            f"| {cp.card.name} | {cp.train_gib:.1f} | {share} | {cp.peak_gib:.1f} | {'yes' if cp.fits else 'NO'} | "
            f"{t['generate']:.1f} + {t['train']:.1f} + {t['rewards']:.1f} | {'; or '.join(cp.advice) or '-'} |")
    lines += ["", f"Time is a lower bound from peak rates: {MFU:.0%} of peak bf16 FLOPs for training, "
              f"{DECODE_EFFICIENCY:.0%} of memory bandwidth for decoding (no scheduling, sampling or weight-sync "
              f"cost), {run.verify_seconds} CPU seconds per completion for rewards on {run.cpu_cores} cores."]
    if run.load_in_4bit:
        lines.append("4-bit: the time rows are the bf16 bounds; generation runs in transformers' generate (no vLLM) "
                     "and bitsandbytes dequantizes every linear layer on each forward pass, so expect generation and "
                     "training slower than these bounds (not measured).")
    return "\n".join(lines)
