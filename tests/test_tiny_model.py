"""The offline tiny Qwen2 model: builds, reloads with Auto classes, keeps token ids, chats, caches."""

from __future__ import annotations

import time

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2ForCausalLM

from rust_rewards.prompts import chat_messages
from rust_rewards.tiny_model import MARKER, build_tiny_model, qwen_shape_config, train_tokenizer

SAMPLES = (
    "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```",
    "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(add(2, 2), 4); }\n}",
    "Ünïcödé café — naïve “quotes” 12345 \t tabs\r\nand CRLF; emoji 🦀 and CJK 漢字",
    "  leading spaces and 'contractions' don't won't it's\n\n\n",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def test_files_and_shape(tiny):
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MARKER):
        assert (tiny / name).is_file(), name
    model = AutoModelForCausalLM.from_pretrained(tiny)
    assert isinstance(model, Qwen2ForCausalLM)
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert model.config.vocab_size == 4096
    assert sum(p.numel() for p in model.parameters()) < 1_000_000


def test_ids_survive_reload(tiny):
    fresh = train_tokenizer(4096)
    loaded = AutoTokenizer.from_pretrained(tiny)
    assert len(loaded) == len(fresh) <= 4096
    for text in SAMPLES:
        ids = fresh(text).input_ids
        assert loaded(text).input_ids == ids
        assert loaded.decode(ids) == fresh.decode(ids)
    assert loaded.decode(loaded(SAMPLES[0]).input_ids) == SAMPLES[0]


def test_special_tokens_and_chat_template(tiny):
    tok = AutoTokenizer.from_pretrained(tiny)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id != tok.pad_token_id
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    messages = chat_messages("Write `pub fn add(a: i32, b: i32) -> i32`.")
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nYou are an expert Rust programmer")
    assert "<|im_end|>\n<|im_start|>user\nWrite `pub fn add" in text
    assert text.endswith("<|im_start|>assistant\n")
    no_gen = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert no_gen.endswith("<|im_end|>\n") and not no_gen.endswith("assistant\n")
    ids = tok(text).input_ids
    assert ids.count(im_start) == 3 and ids.count(tok.eos_token_id) == 2
    default_system = tok.apply_chat_template([messages[1]], tokenize=False)
    assert default_system.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>")


def test_generates_tokens(tiny):
    tok = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    enc = tok.apply_chat_template(chat_messages("Reverse a string."), add_generation_prompt=True,
                                  return_dict=True, return_tensors="pt")
    torch.manual_seed(0)
    out = model.generate(**enc, max_new_tokens=8, min_new_tokens=8, do_sample=True)
    assert out.shape[1] == enc["input_ids"].shape[1] + 8


def test_cache_reuses_and_rebuilds(tiny, tmp_path):
    mtime = (tiny / "model.safetensors").stat().st_mtime_ns
    start = time.perf_counter()
    assert build_tiny_model(tiny) == tiny
    assert time.perf_counter() - start < 0.5
    assert (tiny / "model.safetensors").stat().st_mtime_ns == mtime

    other = build_tiny_model(tmp_path / "m", hidden_size=32, num_layers=1, vocab_size=512, seed=1)
    assert AutoModelForCausalLM.from_pretrained(other).config.hidden_size == 32
    rebuilt = build_tiny_model(other, hidden_size=48, num_layers=1, vocab_size=512, seed=1)
    assert AutoModelForCausalLM.from_pretrained(rebuilt).config.hidden_size == 48


def test_refuses_foreign_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="refusing"):
        build_tiny_model(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_qwen_shape_config():
    cfg = qwen_shape_config()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (
        1536, 28, 12, 2)
    assert (cfg.intermediate_size, cfg.vocab_size, cfg.max_position_embeddings) == (8960, 151936, 32768)
    assert cfg.tie_word_embeddings and cfg.rope_parameters["rope_theta"] == 1_000_000.0
    with torch.device("meta"):
        model = Qwen2ForCausalLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == 1_543_714_304
    with pytest.raises(ValueError, match="unknown model"):
        qwen_shape_config("Qwen/Qwen9-Giant")
