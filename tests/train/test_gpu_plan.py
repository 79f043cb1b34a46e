"""The GPU plan's formulas against real model objects (meta device: no memory) and its advice."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2ForCausalLM
from transformers.quantizers.base import get_keys_to_not_convert

from rust_rewards.train.gpu_plan import CARDS, GIB, ModelShape, RunShape, fixes, format_plan, memory_rows, plan
from rust_rewards.train.tiny_model import qwen_shape_config

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


def test_4bit_quantizes_exactly_the_linear_layers_transformers_converts():
    """``linear_params`` is what bitsandbytes quantizes: every nn.Linear but those transformers keeps (the LM head,
    tied to the embeddings here)."""
    model, shape = _meta_model(2)
    keep = get_keys_to_not_convert(model)
    assert "lm_head" in keep
    quantized = sum(m.weight.numel() for name, m in model.named_modules()
                    if isinstance(m, torch.nn.Linear) and not any(name == k or name.startswith(k + ".") for k in keep))
    assert shape.linear_params() == quantized


def test_4bit_base_weights_are_nf4_plus_double_quant_and_the_24_gib_row_follows():
    shape = ModelShape.from_config(qwen_shape_config())
    bf16 = dataclasses.replace(REAL, vllm_util=None, sleep_mode=False)
    q4 = dataclasses.replace(bf16, load_in_4bit=True)
    (base16, lora16, *rest16), _ = memory_rows(shape, bf16)
    (base4, lora4, *rest4), vllm4 = memory_rows(shape, q4)
    linear, other = shape.linear_params(), shape.params() - shape.linear_params()
    assert linear == 28 * (2 * 1536 * 1536 + 2 * 1536 * 256 + 3 * 1536 * 8960) == 1_310_195_712
    assert other == 151_936 * 1536 + 28 * (1536 + 2 * 256 + 2 * 1536) + 1536  # tied embedding, biases, norms
    bits = 4 + 8 / 64 + 32 / (64 * 256)  # NF4 + 8-bit absmax per 64 weights + fp32 constant per 256 absmax
    assert bits == pytest.approx(4.127, abs=1e-3)
    assert base4.gib * GIB == pytest.approx(linear * bits / 8 + other * 4)
    assert base16.gib * GIB == shape.params() * 2
    assert base4.gib / base16.gib == pytest.approx(0.5215, abs=1e-4)
    assert "NF4" in base4.name and "4 + 8/64 + 32/(64 x 256)" in base4.formula and "x 4 B fp32" in base4.formula
    assert lora4.gib == pytest.approx(lora16.gib / 2)  # TRL casts a 4-bit model's adapter to bf16
    assert rest4 == rest16 and vllm4 == []

    shipped = {p.card.gib: p for p in plan(shape, REAL)}  # bf16, vLLM colocate at 30% with sleep mode
    plain = {p.card.gib: p for p in plan(shape, bf16)}
    quant = {p.card.gib: p for p in plan(shape, q4)}
    saved = base16.gib - base4.gib + lora16.gib - lora4.gib
    assert quant[24].train_gib == pytest.approx(plain[24].train_gib - saved)
    assert (round(shipped[24].peak_gib, 1), round(plain[24].peak_gib, 1), round(quant[24].peak_gib, 1)) == (
        11.4, 9.4, 7.9)
    assert all(p.fits for p in quant.values())
    text = format_plan(shape, q4)
    assert "| 24 GiB (L4) | 7.9 | - | 7.9 | yes |" in text and "base weights NF4 4-bit" in text
    assert "not measured" in text


def test_4bit_with_vllm_colocate_is_refused_by_the_plan():
    shape = ModelShape.from_config(qwen_shape_config())
    with pytest.raises(ValueError, match="vLLM colocate cannot take a bitsandbytes 4-bit policy"):
        plan(shape, dataclasses.replace(REAL, load_in_4bit=True))
