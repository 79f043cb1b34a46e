"""The GRPO loss over one forward pass per distinct prompt (rust_rewards.train.shared_prompt) gives TRL's own
log-probabilities, entropies and LoRA gradients, in one prompt pass per group."""

from __future__ import annotations

import pytest
import torch
from conftest import ROOT
from trl import GRPOTrainer

from rust_rewards.data.importers import load_tasks
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.resolve import resolve_params
from rust_rewards.train.trainers import build_grpo_trainer

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"
COMPLETION = 24


@pytest.fixture(scope="module")
def trainer(tiny_model_dir, tmp_path_factory):
    p = resolve_params(params_from_mapping({
        "preset": "tiny", "output-dir": str(tmp_path_factory.mktemp("shared") / "out"), "data": str(BUNDLED),
        "model": str(tiny_model_dir), "num-generations": 4, "per-device-train-batch-size": 8}))
    return build_grpo_trainer(p, load_tasks(str(BUNDLED))[:4])


def _batch(trainer):
    """Two prompts of different lengths x 4 samples, shuffled as TRL shuffles a generation batch, left-padded one
    column wider than the longest prompt (a micro-batch cut from a wider batch); completions of random tokens,
    right-padded at different lengths."""
    tokenizer = trainer.processing_class
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": t.prompt}], add_generation_prompt=True,
                                             tokenize=True, return_dict=True)["input_ids"]
               for t in load_tasks(str(BUNDLED))[:2]]
    assert len(prompts[0]) != len(prompts[1])
    order = [0, 1, 1, 0, 0, 1, 0, 1]
    width = max(map(len, prompts)) + 1
    gen = torch.Generator().manual_seed(0)
    ids = torch.full((8, width + COMPLETION), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    for row, which in enumerate(order):
        prompt = prompts[which]
        ids[row, width - len(prompt) : width] = torch.tensor(prompt)
        mask[row, width - len(prompt) : width] = 1
        length = 4 + 2 * row
        ids[row, width : width + length] = torch.randint(0, len(tokenizer), (length,), generator=gen)
        mask[row, width : width + length] = 1
    return ids, mask


def _scored(trainer, score):
    """(log-probabilities, entropies, LoRA gradients) of ``score`` over the batch, the loss a masked sum."""
    ids, mask = _batch(trainer)
    trainer.model.zero_grad()
    logps, entropies, _ = score(trainer, trainer.model, ids, mask, COMPLETION, compute_entropy=True)
    completion = mask[:, -COMPLETION:].bool()
    (logps * completion).sum().backward()
    grads = {n: w.grad.clone() for n, w in trainer.model.named_parameters() if w.requires_grad}
    return logps.detach() * completion, entropies.detach() * completion, grads


def test_shared_prompt_scores_equal_trls_own(trainer):
    rows: list[int] = []
    hook = trainer.model.get_base_model().register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    try:
        ours = _scored(trainer, type(trainer)._get_per_token_logps_and_entropies)
    finally:
        hook.remove()
    assert rows == [2, 8], "one pass over the 2 distinct prompts, then one over the 8 completions"
    trls = _scored(trainer, GRPOTrainer._get_per_token_logps_and_entropies)
    assert ours[0].abs().sum() > 0 and ours[1].abs().sum() > 0
    torch.testing.assert_close(ours[0], trls[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours[1], trls[1], atol=1e-4, rtol=1e-4)
    assert ours[2].keys() == trls[2].keys() and any(g.abs().sum() > 0 for g in trls[2].values())
    for name, grad in trls[2].items():
        torch.testing.assert_close(ours[2][name], grad, atol=1e-4, rtol=1e-3, msg=name)


def test_rows_without_a_shared_prompt_take_trls_path(trainer):
    ids, mask = _batch(trainer)
    distinct = [0, 1]  # rows 0 and 1 hold different prompts
    with torch.no_grad():
        ours = trainer._get_per_token_logps_and_entropies(trainer.model, ids[distinct], mask[distinct], COMPLETION)
        trls = GRPOTrainer._get_per_token_logps_and_entropies(trainer, trainer.model, ids[distinct], mask[distinct],
                                                              COMPLETION)
    torch.testing.assert_close(ours[0], trls[0])
