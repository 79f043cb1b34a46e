"""Sampling from a model, for every caller (GRPO rollouts, the pass-rate filter, evaluation during training,
inference.py): the sampling settings, one sampled completion, the chat prompt a model sees, and the backends (HF
transformers through ``decoding``'s engines, or vLLM) behind one ``Generator`` protocol (``make_generator``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rust_rewards.cpus import keep_freed_memory
from rust_rewards.models.gguf import resolve_model
from rust_rewards.prompts import SYSTEM_PROMPT, chat_messages, render_prompt, system_prompt
from rust_rewards.sampling.decoding import DEFAULT_ENGINE, end_index, fence_stop, sample_ids

BACKENDS = ("hf", "vllm")
DEFAULT_BATCH_SIZE = 64
"""Sequences the hf backend decodes together (``benchmarks/generation.py``)."""
LIBRARY_WARNINGS = (
    (FutureWarning, r"`(is_gradient_checkpointing|gradient_checkpointing_enable|gradient_checkpointing_disable)` is "
     r"deprecated and will be removed in v6"),
)
"""Library warnings a user cannot act on: peft (``PeftModel``, ``prepare_model_for_kbit_training``) and TRL (around
each generation) call transformers 5's deprecated gradient-checkpointing aliases themselves."""


def ignore_library_warnings() -> None:
    """Ignore exactly ``LIBRARY_WARNINGS`` in this process (at the start of a training or an inference run)."""
    for category, message in LIBRARY_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: ``n`` completions per task; ``greedy`` ignores temperature and top_p."""

    n: int = 1
    temperature: float = 0.2
    top_p: float = 0.9
    max_new_tokens: int = 512
    greedy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"--n must be >= 1, got {self.n}")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.greedy and self.n > 1:
            raise ValueError(f"--greedy gives --n {self.n} identical samples: use --n 1 with --greedy")
        if not self.greedy and (self.temperature <= 0 or not 0 < self.top_p <= 1):
            raise ValueError(
                f"sampling needs --temperature > 0 and --top-p in (0, 1] (got {self.temperature}, {self.top_p}); "
                "use --greedy for deterministic decoding"
            )


@dataclass(frozen=True)
class Generation:
    """One sampled completion: its text, generated token count, and whether it hit max_new_tokens."""

    text: str
    tokens: int
    truncated: bool


class Generator(Protocol):
    """A backend: renders chat prompts and samples one completion per rendered prompt; ``tokenizer`` is the
    model's Hugging Face tokenizer (chat template, token counts)."""

    backend: str
    tokenizer: Any
    system: str

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str: ...

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]: ...


def render_chat(
    tokenizer: Any, task_prompt: str, system_prompt: str = SYSTEM_PROMPT, repairs: Sequence[tuple[str, str]] = ()
) -> str:
    """The exact text the model sees: training's system prompt + task (+ repair turns: previous answer,
    feedback), through the chat template (a model without one: the plain completion prompt, ``render_prompt``)."""
    return render_prompt(tokenizer, chat_messages(task_prompt, system_prompt, repairs))


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """Count tokens of a text as ``tokenizer`` encodes it (no special tokens added)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


def display_name(model: str, adapter: str | None) -> str:
    """Default model label: the base model's last path part, plus the adapter's last two parts."""
    base = Path(model.rstrip("/")).name or model
    if not adapter:
        return base
    return f"{base}+{'/'.join(Path(adapter).resolve().parts[-2:])}"


def decode_generation(tokenizer: Any, ids: Sequence[int], eos_ids: set[int], max_new_tokens: int) -> Generation:
    """One sampled completion from its new token ids: kept up to and including the first end-of-sequence token,
    decoded without special tokens; truncated when it has no end and reached ``max_new_tokens``."""
    ids = list(ids)
    end = end_index(ids, eos_ids)
    kept = ids if end is None else ids[: end + 1]
    return Generation(text=tokenizer.decode(kept, skip_special_tokens=True), tokens=len(kept),
                      truncated=end is None and len(ids) >= max_new_tokens)


class HFGenerator:
    """transformers on a model in memory, by one of ``rust_rewards.sampling.decoding``'s engines (default ``grouped``:
    the samples of a prompt share its prefill, finished sequences leave the batch); optional PEFT LoRA adapter
    (merged or not).

    Sampling matches TRL's GRPO defaults (no top-k, repetition penalty 1.0), whatever the model's own
    generation config says. ``stop_at_fence`` (one of ``decoding.FENCE_STOPS``): whether answers end at the closing
    fence of their ```rust block (``auto``: for a model without a chat template).
    """

    backend = "hf"
    system = SYSTEM_PROMPT
    """The system prompt of the answer format asked for (``make_generator(answer_format=...)``)."""

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        merge: bool = False,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
        seed: int = 0,
        engine: str = DEFAULT_ENGINE,
        stop_at_fence: str = "auto",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            keep_freed_memory()  # same tokens, faster sampling (benchmarks/cpu_generation.py)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        net = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
        if adapter:
            from peft import PeftModel

            net = PeftModel.from_pretrained(net, adapter)
            if merge:
                net = net.merge_and_unload()
        self.model = net.to(self.device).eval()
        self.batch_size = batch_size
        self.engine = engine
        self.stop = fence_stop(self.tokenizer, stop_at_fence)
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None} or {self.tokenizer.eos_token_id}
        torch.manual_seed(seed)

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str:
        return render_chat(self.tokenizer, task_prompt, self.system, repairs)

    def generation_config(self, params: SamplingParams) -> Any:
        """``params`` as a transformers ``GenerationConfig`` (TRL's sampling: no top-k, no repetition penalty)."""
        from transformers import GenerationConfig

        sampling = ({"do_sample": False} if params.greedy
                    else {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0})
        return GenerationConfig(max_new_tokens=params.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                                eos_token_id=sorted(self.eos_ids), repetition_penalty=1.0, **sampling)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        """One completion per prompt, in order."""
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        new = sample_ids(self.model, ids, self.generation_config(params), engine=self.engine,
                         batch_size=self.batch_size, stop=self.stop)
        return [decode_generation(self.tokenizer, row, self.eos_ids, params.max_new_tokens) for row in new]


class VLLMGenerator:
    """vLLM offline engine; a LoRA adapter is served with ``LoRARequest`` (no merge needed)."""

    backend = "vllm"
    system = SYSTEM_PROMPT

    def __init__(
        self, model: str, adapter: str | None = None, *, seed: int = 0, **engine_kwargs: Any
    ) -> None:
        from vllm import LLM

        from rust_rewards.sampling.vllm_engine import adapter_rank, cpu_defaults, served_rank

        self.lora = None
        if adapter:
            from vllm.lora.request import LoRARequest

            engine_kwargs.update(enable_lora=True, max_lora_rank=served_rank(adapter_rank(adapter)))
            self.lora = LoRARequest("adapter", 1, str(Path(adapter).resolve()))
        self.llm = LLM(model=model, seed=seed, **{**cpu_defaults(), **engine_kwargs})
        self.tokenizer = self.llm.get_tokenizer()

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str:
        return render_chat(self.tokenizer, task_prompt, self.system, repairs)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        from vllm import SamplingParams as VSampling

        sampling = VSampling(
            n=1,
            temperature=0.0 if params.greedy else params.temperature,
            top_p=1.0 if params.greedy else params.top_p,
            max_tokens=params.max_new_tokens,
        )
        outputs = self.llm.generate(list(prompts), sampling, lora_request=self.lora, use_tqdm=False)
        return [
            Generation(text=o.outputs[0].text, tokens=len(o.outputs[0].token_ids),
                       truncated=o.outputs[0].finish_reason == "length")
            for o in outputs
        ]


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def make_generator(
    backend: str, model: str, adapter: str | None = None, *, merge: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE, seed: int = 0, answer_format: str = "solution+tests",
    engine: str = DEFAULT_ENGINE, engine_kwargs: dict[str, Any] | None = None, stop_at_fence: str = "auto",
) -> Generator:
    """Build a backend by name: ``hf`` (always available) or ``vllm`` (needs the package; on CPU vLLM's CPU build),
    prompting for ``answer_format``. A ``.gguf`` ``model`` is read from its converted local folder
    (``rust_rewards.models.gguf``); ``engine_kwargs`` go to vLLM's ``LLM`` (such as ``dtype``); ``stop_at_fence``:
    ``HFGenerator``'s."""
    system = system_prompt(answer_format)
    model = resolve_model(model)
    generator: Generator
    if backend == "hf":
        generator = HFGenerator(model, adapter, merge=merge, batch_size=batch_size, seed=seed, engine=engine,
                                stop_at_fence=stop_at_fence)
    elif backend == "vllm":
        if not vllm_available():
            raise RuntimeError("backend 'vllm' requested but the vllm package is not installed")
        if merge:
            raise ValueError("--merge applies to the hf backend; vLLM serves the LoRA adapter directly")
        generator = VLLMGenerator(model, adapter, seed=seed, **(engine_kwargs or {}))
    else:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")
    generator.system = system
    return generator
