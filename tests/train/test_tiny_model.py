"""The offline tiny Qwen2 model: builds, reloads with Auto classes, keeps token ids, chats, caches, and its
warm start makes it answer with ```rust blocks that cargo sometimes accepts and sometimes rejects."""

from __future__ import annotations

import json
import time

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2ForCausalLM

from rust_rewards.data.bundled import EASY_TASKS
from rust_rewards.data.importers import TaskSourceError, load_file
from rust_rewards.prompts import chat_messages
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import Task
from rust_rewards.train.tiny_model import (
    BUILTIN_EXEMPLARS,
    MARKER,
    TINY_TASKS,
    WarmStart,
    answer_block,
    build_tiny_model,
    qwen_shape_config,
    train_tokenizer,
    train_warm_start,
    warm_start_pairs,
)
from rust_rewards.verify.verifier import get_verifier

SMALL = {"hidden_size": 32, "num_layers": 1, "vocab_size": 512, "seed": 1}
QUICK = WarmStart(steps=3, batch_size=4)

SAMPLES = (
    "```rust\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n```",
    "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(add(2, 2), 4); }\n}",
    "Ünïcödé café — naïve “quotes” 12345 \t tabs\r\nand CRLF; emoji 🦀 and CJK 漢字",
    "  leading spaces and 'contractions' don't won't it's\n\n\n",
)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The session's tiny model (conftest): the tests here only read it."""
    return tiny_model_dir


@pytest.mark.slow
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
    assert default_system.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

    assert tok.chat_template == qwen2_5_chat_template and supports_tool_calling(tok)  # TRL parses its tool calls


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

    other = build_tiny_model(tmp_path / "m", **SMALL, warm_start=None)
    assert AutoModelForCausalLM.from_pretrained(other).config.hidden_size == 32
    assert json.loads((other / MARKER).read_text())["warm_start"] is None
    random_init = (other / "model.safetensors").read_bytes()

    warmed = build_tiny_model(other, **SMALL, warm_start=QUICK, tasks_path=None)
    marker = json.loads((warmed / MARKER).read_text())["warm_start"]
    assert marker["steps"] == 3 and marker["pairs"] == len(warm_start_pairs(None))
    assert (warmed / "model.safetensors").read_bytes() != random_init

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(Task("one", "Write `pub fn one() -> i32`.").to_row()) + "\n")
    retrained = build_tiny_model(other, **SMALL, warm_start=QUICK, tasks_path=tasks)
    changed = json.loads((retrained / MARKER).read_text())["warm_start"]
    assert changed["pairs"] == marker["pairs"] + 1 and changed["corpus"] != marker["corpus"]

    rebuilt = build_tiny_model(other, **{**SMALL, "hidden_size": 48}, warm_start=None)
    assert AutoModelForCausalLM.from_pretrained(rebuilt).config.hidden_size == 48


def test_build_is_deterministic_and_leaves_torch_state(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rng_state = torch.get_rng_state()
        first = build_tiny_model(tmp_path / "a", **SMALL, warm_start=QUICK, tasks_path=None)
        second = build_tiny_model(tmp_path / "b", **SMALL, warm_start=QUICK, tasks_path=None)
        assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
        assert torch.get_num_threads() == 2
        assert torch.equal(torch.get_rng_state(), rng_state)
    finally:
        torch.set_num_threads(threads)


def test_warm_start_pairs():
    builtin = warm_start_pairs(None)
    assert len(builtin) == 6 * len(BUILTIN_EXEMPLARS)
    assert all(a.startswith("```rust\n") and a.endswith("\n```") and extract_rust(a) for _, a in builtin)
    assert warm_start_pairs(None, seed=0) == builtin and warm_start_pairs(None, seed=1) != builtin
    assert answer_block("pub fn a() {}") == "```rust\npub fn a() {}\n```"
    tested = answer_block("pub fn a() {}", "a", "assert!(a());")
    assert tested.endswith("\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n"
                           "    fn test_a() {\n        assert!(a());\n    }\n}\n```")
    with pytest.raises(TaskSourceError, match="not found"):
        warm_start_pairs("/nonexistent/tasks.jsonl")
    tasks = load_file(EASY_TASKS)[:TINY_TASKS]
    starter = warm_start_pairs()
    assert starter[:len(builtin)] == builtin and [p for p, _ in starter[len(builtin):]] == [t.prompt for t in tasks]
    own = [(t, a) for t, (_, a) in zip(tasks, starter[len(builtin):], strict=True) if t.reference_code.strip() in a]
    assert len(own) == TINY_TASKS and all("#[cfg(test)]" in a for _, a in own)


def test_warm_start_answers_all_pass_cargo():
    """Every answer the warm start teaches builds, passes clippy and its test; the starter tasks' pass their hidden
    tests."""
    answers = sorted({a for _, a in warm_start_pairs()})
    tasks = load_file(EASY_TASKS)[:TINY_TASKS]
    hidden = {a: t.hidden_tests() for t in tasks for a in answers if t.reference_code.strip() in a}
    assert len(hidden) >= TINY_TASKS  # a built-in exemplar may hold a starter reference too (add)
    reports = get_verifier().verify_many(answers, [hidden.get(a) for a in answers])
    for answer, report in zip(answers, reports, strict=True):
        assert report.build_ok and report.clippy_ok, (answer, report.diagnostics)
        with_tests = "#[cfg(test)]" in answer
        assert report.tests_ok == with_tests, (answer, report.diagnostics)
        if answer in hidden:
            assert report.hidden_ok, (answer, report.diagnostics)


def test_train_warm_start_lowers_the_loss(tiny):
    tok = AutoTokenizer.from_pretrained(tiny)
    config = AutoModelForCausalLM.from_pretrained(tiny).config
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    pairs = warm_start_pairs(None)[:6]
    losses = train_warm_start(model, tok, pairs, WarmStart(steps=30, batch_size=4, warmup_steps=5), seed=0)
    assert len(losses) == 30 and sum(losses[-5:]) / 5 < losses[0] / 2
    assert not model.training


@pytest.mark.slow
def test_warm_started_model_writes_rust_that_cargo_judges(tiny):
    """Sampled like the tiny preset does (temperature 1, 128 new tokens, two samples of each starter task): most
    answers hold a ```rust block, and cargo accepts some of them and rejects others, so the rewards of a tiny training
    run vary."""
    tok = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    prompts = [t.prompt for t in load_file(EASY_TASKS)[:TINY_TASKS] for _ in range(2)]
    torch.manual_seed(0)
    completions = []
    for prompt in prompts:
        enc = tok.apply_chat_template(chat_messages(prompt), add_generation_prompt=True, return_dict=True,
                                      return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=128, do_sample=True, temperature=1.0, top_p=1.0, top_k=0)
        completions.append(tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    fenced = [c for c in completions if c.lstrip().startswith("```rust") and "fn " in extract_rust(c)]
    assert len(fenced) > len(prompts) / 2, completions[:5]
    reports = get_verifier().verify_many(completions)
    builds = sum(r.build_ok for r in reports)
    assert 0 < builds < len(prompts)
    assert any(r.has_code and not r.build_ok and r.diagnostics for r in reports)


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
