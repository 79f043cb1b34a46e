"""Per-token log-probabilities of completions whose prompts repeat (a GRPO group's ``num_generations`` samples)
with one forward pass per distinct prompt: the prompt's keys and values are computed once, with gradients, and
each completion attends to its prompt's copy of them (``Cache.batch_select_indices``), so the backward pass sums
every completion's gradient into the shared prompt activations.

TRL's own ``_get_per_token_logps_and_entropies`` runs the model over every prompt + completion row: with SmolLM2's
~220-token prompts and ~70-token answers, about three quarters of a training step's forward and backward work is
the same prompt recomputed for each of the group's samples. The numbers equal TRL's (same positions, same masks,
TRL's fused log-probability head), tested in tests/train/test_shared_prompt.py.
"""

from __future__ import annotations

from typing import Any


def shared_prompt_logps(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        compute_entropy: bool = False) -> tuple[Any, Any] | None:
    """(log-probabilities, entropies or None) of the last ``logits_to_keep`` tokens of each row of ``input_ids``
    (prompt, left-padded, then completion), as TRL's ``_get_per_token_logps_and_entropies`` returns them; None
    when no two rows share a prompt (nothing to save) or the prompt is a single token. ``model`` carries TRL's
    fused log-probability head (``trl.trainer.utils.add_fused_lm_head``)."""
    import torch
    from transformers import DynamicCache

    from rust_rewards.sampling.decoding import cache_kwargs

    width = input_ids.size(1) - logits_to_keep
    if width < 2:
        return None
    prompts, rows = torch.unique(torch.cat([input_ids[:, :width], attention_mask[:, :width]], dim=1), dim=0,
                                 return_inverse=True)
    if len(prompts) == len(input_ids):
        return None
    cache = DynamicCache()
    # every prompt but its last token once; that token then starts each completion's own pass
    model(input_ids=prompts[:, : width - 1], attention_mask=prompts[:, width : 2 * width - 1],
          use_cache=True, logits_to_keep=1, **cache_kwargs(cache))
    cache.batch_select_indices(rows)
    tail = input_ids[:, width - 1 :]
    labels = torch.full_like(tail, -100)
    labels[:, :-1] = tail[:, 1:].masked_fill(attention_mask[:, width:] == 0, -100)
    out = model(input_ids=tail, attention_mask=attention_mask, shift_labels=labels, fused_lm_head=True,
                **cache_kwargs(cache))
    entropy = out.entropy[:, :logits_to_keep] if compute_entropy else None
    return out.log_probs[:, :logits_to_keep], entropy
