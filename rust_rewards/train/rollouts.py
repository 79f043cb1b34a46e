"""GRPO rollouts through ``rust_rewards.sampling.decoding``: TRL's ``GRPOTrainer`` whose transformers generation path
(no vLLM, no continuous batching, text only) samples with the ``grouped`` or ``padded`` engine instead of one
padded ``generate`` call. vLLM and transformers' continuous batching stay TRL's own paths. Its loss scores a
group's completions over one forward pass of their shared prompt (``rust_rewards.train.shared_prompt``)."""

from __future__ import annotations

import time
from typing import Any

import torch
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from rust_rewards.sampling.decoding import DEFAULT_ENGINE, end_index, fence_stop, sample_ids
from rust_rewards.train.shared_prompt import shared_prompt_logps


class EngineGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose rollouts without vLLM or continuous batching use ``generation_engine``: with
    ``grouped``, a group's ``num_generations`` samples share one prefill of their prompt and finished answers leave
    the batch. Completions are cut after their first end-of-sequence token, as TRL's own path cuts them, and as
    ``stop_at_fence`` says (``decoding.FENCE_STOPS``; ``auto``: for a model without a chat template) after the closing
    fence of their ```rust block, followed by the end token.

    With ``share_prompt`` (text only, no gradient checkpointing, no MoE auxiliary loss), the log-probabilities
    of completions whose prompts repeat come from one forward pass per distinct prompt."""

    def __init__(self, *args: Any, generation_engine: str = DEFAULT_ENGINE, share_prompt: bool = True,
                 stop_at_fence: str = "auto", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generation_engine = generation_engine
        self.share_prompt = share_prompt
        self.fence_stop = fence_stop(self._tokenizer, stop_at_fence)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **media):
        if (not self.share_prompt or compute_aux_loss or self.args.gradient_checkpointing
                or any(value is not None for value in media.values())):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **media)
        size = batch_size or len(input_ids)
        parts = []
        for s in range(0, len(input_ids), size):
            ids, mask = input_ids[s : s + size], attention_mask[s : s + size]
            with self.accelerator.autocast():
                part = shared_prompt_logps(model, ids, mask, logits_to_keep, compute_entropy)
            parts.append(part or super()._get_per_token_logps_and_entropies(model, ids, mask, logits_to_keep,
                                                                            compute_entropy=compute_entropy)[:2])
        entropies = torch.cat([e for _, e in parts]) if compute_entropy else None
        return torch.cat([lp for lp, _ in parts]), entropies, None

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """Sample completions and log their wall time as ``generation_time`` (every engine, TRL's own included)."""
        start = time.perf_counter()
        out = self._sample(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        self._metrics["train" if self.model.training else "eval"]["generation_time"].append(
            time.perf_counter() - start)
        return out

    def _sample(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        if (self.use_vllm or self.use_transformers_continuous_batching or images is not None or multimodal_fields
                or self.generation_engine == "continuous"):
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        with (
            profiling_context(self, f"rust_rewards.{self.generation_engine}"),
            unwrap_model_for_generation(
                self.model_wrapped, self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            new = sample_ids(unwrapped_model, prompt_ids, self.generation_config, engine=self.generation_engine,
                             batch_size=len(prompt_ids), stop=self.fence_stop)
        stops = set(self.eos_token_ids)  # the generation config's end tokens
        return [row if (end := end_index(row, stops)) is None else row[: end + 1] for row in new], None
