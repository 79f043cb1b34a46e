"""The GPU plan's formulas against real model objects (meta device: no memory) and its advice."""

from __future__ import annotations

import dataclasses

import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2ForCausalLM

from rust_rewards.gpu_plan import CARDS, ModelShape, RunShape, fixes, format_plan, plan
from rust_rewards.tiny_model import qwen_shape_config

REAL = RunShape(micro_batch=8, completions_per_step=32, prompt_tokens=512, completion_tokens=768, lora_r=16)


def _meta_model(layers: int):
    config = qwen_shape_config()
    config.num_hidden_layers = layers
    with torch.device("meta"):
        return Qwen2ForCausalLM(config), ModelShape.from_config(config)


def test_param_counts_match_the_real_modules():
    full = ModelShape.from_config(qwen_shape_config())
    assert full.params() == 1_543_714_304  # Qwen2.5-Coder-1.5B's published count
    model, shape = _meta_model(2)
    assert shape.params() == sum(p.numel() for p in model.parameters())
    peft = get_peft_model(model, LoraConfig(r=16, lora_alpha=64, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainable, _ = peft.get_nb_trainable_parameters()
    assert shape.lora_params(16) == trainable


def test_kv_cache_per_token_is_qwen_gqa():
    shape = ModelShape.from_config(qwen_shape_config())
    assert shape.kv_bytes_per_token() == 28 * 2 * 2 * 128 * 2


def test_a_run_too_big_for_small_cards_gets_advice_that_fits():
    shape = ModelShape.from_config(qwen_shape_config())
    big = dataclasses.replace(REAL, micro_batch=32, completions_per_step=64, completion_tokens=2048)
    plans = {p.card.gib: p for p in plan(shape, big)}
    assert not plans[24].fits and plans[24].advice
    assert plans[141].fits and not plans[141].advice
    for card in CARDS:
        for _label, changed in fixes(shape, big, card):
            assert all(p.fits for p in plan(shape, changed, (card,)))
    assert any("batch-size" in label for label, _ in fixes(shape, big, CARDS[1]))



def test_sleep_mode_frees_the_vllm_share_while_training():
    shape = ModelShape.from_config(qwen_shape_config())
    awake = plan(shape, dataclasses.replace(REAL, sleep_mode=False), (CARDS[2],))[0]
    asleep = plan(shape, REAL, (CARDS[2],))[0]
    assert awake.peak_gib == awake.train_gib + 0.3 * 80
    assert asleep.peak_gib < awake.peak_gib


def test_the_real_preset_plan_prints_every_card_and_says_estimate():
    text = format_plan(ModelShape.from_config(qwen_shape_config()), REAL)
    assert "ESTIMATE" in text
    for card in CARDS:
        assert card.name in text
    assert "logits and their gradient" in text and "KV cache" in text
