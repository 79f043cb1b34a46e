"""vLLM as the sampling engine of a model being trained (``--generation-engine vllm``), on CPU or GPU.

TRL's own vLLM paths push the policy's merged weights into the engine (``load_weights``); on vLLM's CPU build that
fails at the first sync (``'Parameter' object has no attribute 'weight_loader'``, ../shared/notes/vllm-cpu.md).
This engine goes around it: the engine holds the frozen base model and serves the policy's LoRA adapter with
vLLM's LoRA support. Before each call the adapter's current weights are saved to a folder and served under a new
adapter id, so every rollout samples the current policy; no merge, no weight sync. A model without an adapter
(the pass-rate filter's base model) is sampled as it is.

One engine per process and base model (it holds the base model's weights and its KV cache; on CPU at most
``CPU_MEMORY_GIB`` of host memory, ``cpu_defaults``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ENGINES: dict[tuple[str, str, int], Any] = {}
_IDS = itertools.count(1)
LORA_SLOTS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The LoRA ranks vLLM sizes its adapter slots by (``max_lora_rank``); an adapter is served in the smallest that
holds it: a larger slot costs time on every token (on CPU, rank 16 served in a 64 slot: 3-4x slower sampling)."""
_PLAN = {"lora_rank": 16}


def served_rank(rank: int) -> int:
    """The smallest LoRA slot that holds an adapter of ``rank``.

    >>> served_rank(16), served_rank(12), served_rank(0)
    (16, 16, 8)
    """
    slot = next((s for s in LORA_SLOTS if s >= rank), None)
    if slot is None:
        raise ValueError(f"vLLM serves LoRA ranks up to {LORA_SLOTS[-1]}; this adapter has {rank}")
    return slot


def adapter_rank(folder: str | Path) -> int:
    """The rank of the LoRA adapter saved in ``folder`` (its ``adapter_config.json``; 16, PEFT's default, when
    it does not say)."""
    import json

    return int(json.loads((Path(folder) / "adapter_config.json").read_text()).get("r", 16))


def plan(lora_rank: int) -> None:
    """The largest LoRA rank this process will ask the engine to serve (the trained adapter's, or the initial
    one's): the engine, built on first use, possibly for the base model alone, sizes its slots by it."""
    _PLAN["lora_rank"] = served_rank(lora_rank)
MAX_MODEL_LEN = 4096
"""The engine's context: prompt + completion tokens (the rollouts' own limit is below it)."""


CPU_MEMORY_GIB = 4.0
"""Host memory a vLLM engine on CPU may take (weights, KV cache, activations) unless ``RR_VLLM_CPU_GIB`` says."""


def cpu_defaults() -> dict[str, Any]:
    """``LLM`` settings for vLLM's CPU build: on CPU its ``gpu_memory_utilization`` is the share of the host's memory
    it reserves (0.92 by default: an engine beside a training process would take its memory), so ask for
    ``CPU_MEMORY_GIB``; nothing on a GPU."""
    import torch

    if torch.cuda.is_available():
        return {}
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    want = float(os.environ.get("RR_VLLM_CPU_GIB", CPU_MEMORY_GIB))
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return {"gpu_memory_utilization": round(min(0.9, want / total), 3)}


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def engine(base: str, dtype: str, seed: int, lora_rank: int | None = None, **overrides: Any) -> Any:
    """The process's vLLM engine for ``base`` (built on first use; the pass-rate filter, the rollouts and the
    held-out evaluation share it): LoRA on, adapters of rank ``lora_rank`` at most (default: ``plan``'s)."""
    key = (str(base), dtype, seed)
    lora_rank = served_rank(lora_rank) if lora_rank is not None else _PLAN["lora_rank"]
    if key not in _ENGINES:
        from vllm import LLM

        settings: dict[str, Any] = {**cpu_defaults(), "dtype": dtype, "seed": seed, "enable_lora": True,
                                    "max_lora_rank": lora_rank, "max_loras": 1,
                                    "max_model_len": MAX_MODEL_LEN, "enforce_eager": True}
        _ENGINES[key] = LLM(model=str(base), **{**settings, **overrides})
    return _ENGINES[key]


def _base_and_rank(model: Any) -> tuple[str, int]:
    """The base model folder of ``model`` (a PEFT model or a plain one) and its LoRA rank (0: no adapter)."""
    peft = getattr(model, "peft_config", None)
    if peft:
        config = next(iter(peft.values()))
        return str(config.base_model_name_or_path), int(config.r)
    return str(model.config._name_or_path), 0


def sample_ids(model: Any, prompts: Sequence[Sequence[int]], config: Any, stops: Sequence[int],
               seed: int = 0) -> list[list[int]]:
    """New token ids for each of ``prompts`` (token ids), sampled by vLLM from ``model``'s base weights and its
    LoRA adapter's current values, with ``config``'s sampling settings (a ``GenerationConfig``), ending at any of
    ``stops``."""
    from vllm import SamplingParams, TokensPrompt
    from vllm.lora.request import LoRARequest

    base, rank = _base_and_rank(model)
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    llm = engine(base, dtype, seed, max(rank, _PLAN["lora_rank"]))
    slot = llm.llm_engine.vllm_config.lora_config.max_lora_rank
    if rank > slot:
        raise ValueError(f"this process's vLLM engine serves LoRA ranks up to {slot}; this adapter has {rank} "
                         "(vllm_engine.plan the largest rank before the first call)")
    greedy = not config.do_sample
    sampling = SamplingParams(
        n=1, temperature=0.0 if greedy else float(config.temperature or 1.0),
        top_p=1.0 if greedy else float(config.top_p or 1.0), top_k=int(config.top_k or 0) if not greedy else 0,
        max_tokens=int(config.max_new_tokens), stop_token_ids=list(stops), detokenize=False)
    folder = None
    lora = None
    if rank:
        folder = Path(tempfile.mkdtemp(prefix="rr-vllm-lora-"))
        model.save_pretrained(folder)
        number = next(_IDS)
        lora = LoRARequest(f"policy-{number}", number, str(folder))
    try:
        outputs = llm.generate([TokensPrompt(prompt_token_ids=list(map(int, p))) for p in prompts], sampling,
                               lora_request=lora, use_tqdm=False)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    return [list(o.outputs[0].token_ids) for o in outputs]
