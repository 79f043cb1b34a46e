"""GRPO rollouts through ``rust_rewards.eval.decoding``: TRL's ``GRPOTrainer`` whose transformers generation path
(no vLLM, no continuous batching, text only) samples with the ``grouped`` or ``padded`` engine instead of one
padded ``generate`` call. vLLM and transformers' continuous batching stay TRL's own paths."""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer
from trl.extras.profiling import profiling_context
from trl.models import unwrap_model_for_generation

from rust_rewards.eval.decoding import DEFAULT_ENGINE, end_index, sample_ids


class EngineGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose rollouts without vLLM or continuous batching use ``generation_engine``: with
    ``grouped``, a group's ``num_generations`` samples share one prefill of their prompt and finished answers leave
    the batch. Completions are cut after their first end-of-sequence token, as TRL's own path cuts them."""

    def __init__(self, *args: Any, generation_engine: str = DEFAULT_ENGINE, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generation_engine = generation_engine

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
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
                             batch_size=len(prompt_ids))
        stops = set(self.eos_token_ids)  # the generation config's end tokens
        return [row if (end := end_index(row, stops)) is None else row[: end + 1] for row in new], None
