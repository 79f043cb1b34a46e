"""Sample completions for tasks with the training chat layout, resumably (HF transformers or vLLM).

Work is a list of (task_id, sample) pairs. Finished chunks are written to ``<out>.parts/`` as they
complete; a rerun with the same output path skips every pair already there (or already in ``<out>``)
and the final parquet is written atomically, after which the parts folder is removed.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.prompts import SYSTEM_PROMPT, chat_messages
from rust_rewards.tasks import Task

BACKENDS = ("hf", "vllm")

RUN_COLUMNS = ("model", "base_model", "adapter", "backend", "temperature", "top_p", "max_new_tokens",
               "greedy", "seed")
"""Columns that must match between a resumed run and the rows already written."""

PREDICTION_COLUMNS = ("task_id", "sample", "completion", "completion_tokens", "truncated", *RUN_COLUMNS,
                      "generated_at", "gen_seconds")


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
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.greedy and self.n > 1:
            raise ValueError("greedy decoding gives n identical samples: use n=1 with greedy")
        if not self.greedy and (self.temperature <= 0 or not 0 < self.top_p <= 1):
            raise ValueError(
                f"sampling needs temperature > 0 and 0 < top_p <= 1 (got {self.temperature}, {self.top_p});"
                " use greedy for deterministic decoding"
            )


@dataclass(frozen=True)
class Generation:
    """One sampled completion: its text, generated token count, and whether it hit max_new_tokens."""

    text: str
    tokens: int
    truncated: bool


class Generator(Protocol):
    """A backend: renders chat prompts and samples one completion per rendered prompt."""

    backend: str

    def render(self, task_prompt: str) -> str: ...

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]: ...


def render_chat(tokenizer: Any, task_prompt: str, system_prompt: str = SYSTEM_PROMPT) -> str:
    """The exact text the model sees: training's system prompt + task, through the chat template."""
    return tokenizer.apply_chat_template(
        chat_messages(task_prompt, system_prompt), tokenize=False, add_generation_prompt=True
    )


def display_name(model: str, adapter: str | None) -> str:
    """Default model label: the base model's last path part, plus the adapter's last two parts."""
    base = Path(model.rstrip("/")).name or model
    if not adapter:
        return base
    return f"{base}+{'/'.join(Path(adapter).resolve().parts[-2:])}"


class HFGenerator:
    """transformers ``generate`` with left padding, batched; optional PEFT LoRA adapter (merged or not).

    Sampling matches TRL's GRPO defaults (no top-k, repetition penalty 1.0), whatever the model's own
    generation config says.
    """

    backend = "hf"

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        merge: bool = False,
        batch_size: int = 8,
        device: str | None = None,
        seed: int = 0,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
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
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None} or {self.tokenizer.eos_token_id}
        torch.manual_seed(seed)

    def render(self, task_prompt: str) -> str:
        return render_chat(self.tokenizer, task_prompt)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        """One completion per prompt; prompts are sorted by length inside to reduce padding."""
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: dict[int, Generation] = {}
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            for i, gen in zip(idx, self._batch([prompts[i] for i in idx], params), strict=True):
                results[i] = gen
        return [results[i] for i in range(len(prompts))]

    def _batch(self, prompts: list[str], params: SamplingParams) -> list[Generation]:
        import torch

        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        sampling = (
            {"do_sample": False}
            if params.greedy
            else {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
        )
        sampling["repetition_penalty"] = 1.0
        with torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=params.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=sorted(self.eos_ids),
                **sampling,
            )
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        gens = []
        for ids in new:
            end = next((j for j, t in enumerate(ids) if t in self.eos_ids), None)
            kept = ids if end is None else ids[: end + 1]
            gens.append(Generation(
                text=self.tokenizer.decode(kept, skip_special_tokens=True),
                tokens=len(kept),
                truncated=end is None and len(ids) >= params.max_new_tokens,
            ))
        return gens


class VLLMGenerator:
    """vLLM offline engine; a LoRA adapter is served with ``LoRARequest`` (no merge needed)."""

    backend = "vllm"

    def __init__(
        self, model: str, adapter: str | None = None, *, seed: int = 0, **engine_kwargs: Any
    ) -> None:
        from vllm import LLM

        self.lora = None
        if adapter:
            from vllm.lora.request import LoRARequest

            rank = json.loads((Path(adapter) / "adapter_config.json").read_text()).get("r", 16)
            engine_kwargs.update(enable_lora=True, max_lora_rank=max(8, int(rank)))
            self.lora = LoRARequest("adapter", 1, str(Path(adapter).resolve()))
        self.llm = LLM(model=model, seed=seed, **engine_kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def render(self, task_prompt: str) -> str:
        return render_chat(self.tokenizer, task_prompt)

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
    backend: str, model: str, adapter: str | None = None, *, merge: bool = False, batch_size: int = 8,
    seed: int = 0,
) -> Generator:
    """Build a backend by name: ``hf`` (always available) or ``vllm`` (needs the package and a GPU)."""
    if backend == "hf":
        return HFGenerator(model, adapter, merge=merge, batch_size=batch_size, seed=seed)
    if backend == "vllm":
        if not vllm_available():
            raise RuntimeError("backend 'vllm' requested but the vllm package is not installed")
        if merge:
            raise ValueError("--merge applies to the hf backend; vLLM serves the LoRA adapter directly")
        return VLLMGenerator(model, adapter, seed=seed)
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}")


def parts_dir(out: str | Path) -> Path:
    """Where finished chunks of ``out`` wait until the final file is written."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def read_done(out: str | Path) -> pd.DataFrame:
    """Rows already generated for ``out``: the final file (if any) plus every finished chunk."""
    out = Path(out)
    frames = [pd.read_parquet(out)] if out.exists() else []
    frames += [pd.read_parquet(p) for p in sorted(parts_dir(out).glob("chunk_*.parquet"))]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    return pd.concat(frames, ignore_index=True).drop_duplicates(["task_id", "sample"], keep="first")


def check_compatible(done: pd.DataFrame, run: dict[str, Any], out: str | Path) -> None:
    """Refuse to resume into an output written with another model, adapter or sampling setup."""
    for column, value in run.items():
        if done.empty or column not in done.columns:
            continue
        seen = {None if pd.isna(v) else v for v in done[column].unique()}
        if seen != {value}:
            raise ValueError(
                f"{out} already holds rows with {column}={sorted(map(str, seen))}, this run has {value!r}:"
                " choose another --out or delete the old file to start over"
            )


def run_columns(
    params: SamplingParams, *, model: str, base_model: str, adapter: str | None, backend: str
) -> dict[str, Any]:
    """The per-run values written on every row (and checked on resume)."""
    sampling = {k: v for k, v in asdict(params).items() if k in RUN_COLUMNS}
    return {"model": model, "base_model": base_model, "adapter": adapter or "", "backend": backend,
            **sampling}


def generate_predictions(
    tasks: Sequence[Task],
    generator: Generator,
    params: SamplingParams,
    out: str | Path,
    *,
    model: str,
    base_model: str,
    adapter: str | None = None,
    chunk_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Generate ``params.n`` completions per task into ``out`` (parquet) and return every row.

    Resumable: pairs already in ``out`` or its parts folder are skipped. ``progress(done, total)``
    is called after each chunk, counted in (task, sample) pairs of this run.
    """
    out = Path(out)
    run = run_columns(params, model=model, base_model=base_model, adapter=adapter, backend=generator.backend)
    done = read_done(out)
    check_compatible(done, run, out)
    have = set(zip(done["task_id"].astype(str), done["sample"].astype(int), strict=True))
    pending = [(t, s) for t in tasks for s in range(params.n) if (t.task_id, s) not in have]
    rendered: dict[str, str] = {}
    parts = parts_dir(out)
    first_chunk = len(list(parts.glob("chunk_*.parquet"))) if parts.exists() else 0
    total = len(pending)
    if progress:
        progress(0, total)
    for number, start in enumerate(range(0, total, chunk_size), start=first_chunk):
        chunk = pending[start : start + chunk_size]
        prompts = [rendered.setdefault(t.task_id, generator.render(t.prompt)) for t, _ in chunk]
        began = time.perf_counter()
        gens = generator.generate(prompts, params)
        seconds = (time.perf_counter() - began) / len(chunk)
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        rows = [
            {"task_id": t.task_id, "sample": s, "completion": g.text, "completion_tokens": g.tokens,
             "truncated": g.truncated, **run, "generated_at": stamp, "gen_seconds": round(seconds, 4)}
            for (t, s), g in zip(chunk, gens, strict=True)
        ]
        write_parquet_atomic(pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS)),
                             parts / f"chunk_{number:05d}.parquet")
        if progress:
            progress(start + len(chunk), total)
    result = read_done(out)
    order = {t.task_id: i for i, t in enumerate(tasks)}
    result = result.assign(_order=result["task_id"].map(order).fillna(len(order)))
    result = result.sort_values(["_order", "task_id", "sample"], kind="stable").drop(columns="_order")
    result = result.reset_index(drop=True)[list(PREDICTION_COLUMNS)]
    result["sample"] = result["sample"].astype(int)
    write_parquet_atomic(result, out)
    shutil.rmtree(parts, ignore_errors=True)
    return result
