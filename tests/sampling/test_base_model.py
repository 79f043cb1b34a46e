"""A base model (no chat template): plain completion prompts everywhere a prompt is formatted, and answers that end
at the closing fence of their ```rust block in the engines that decode them; the KV cache reaches the model under
transformers' current keyword, without a FutureWarning."""

from __future__ import annotations

import inspect
import shutil
import warnings

import pytest
from conftest import ROOT
from transformers import AutoTokenizer, GenerationConfig, Qwen2ForCausalLM

from rust_rewards.data.importers import load_tasks
from rust_rewards.data.pipeline import count_prompt_tokens
from rust_rewards.prompts import PLAIN_ANSWER, chat_messages, plain_prompt, system_prompt, trl_example
from rust_rewards.rust.extract import rust_block_closed
from rust_rewards.sampling.decoding import FenceStop, cache_argument, fence_stop, sample_ids
from rust_rewards.sampling.engines import HFGenerator
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.resolve import resolve_params
from rust_rewards.train.trainers import build_grpo_trainer, chat_renderer, task_dataset

EASY = ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl"
LIMIT = 160
"""Room for the tiny model's answers (up to about 110 tokens) and more."""


@pytest.fixture(scope="module")
def base_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model without its chat template, as a base checkpoint comes."""
    out = tmp_path_factory.mktemp("base") / "model"
    shutil.copytree(tiny_model_dir, out, ignore=shutil.ignore_patterns("chat_template.jinja"))
    return out


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(str(EASY))[:4]


def test_prompts_are_plain_text_and_said_once(base_dir, tiny_model_dir, tasks, capsys):
    base = AutoTokenizer.from_pretrained(base_dir)
    assert not base.chat_template
    generator = HFGenerator(str(base_dir))
    system = system_prompt("solution")
    generator.system = system
    texts = [generator.render(t.prompt) for t in tasks]
    assert texts[0] == plain_prompt(chat_messages(tasks[0].prompt, system))
    assert texts[0].startswith(system) and texts[0].endswith(f"{tasks[0].prompt}\n\n{PLAIN_ANSWER}")
    assert not any("<|im_start|>" in t for t in texts)
    repaired = generator.render(tasks[0].prompt, [("```rust\nfn a() {}\n```", "error[E0308]")])
    assert repaired.endswith("### Answer\n```rust\nfn a() {}\n```\n\n### Feedback\nerror[E0308]\n\n" + PLAIN_ANSWER)
    assert capsys.readouterr().out.count("no chat template") == 1
    assert isinstance(generator.stop, FenceStop), "a base model stops at the fence by default"
    assert HFGenerator(str(tiny_model_dir)).stop is None, "a chat model does not, unless asked"
    assert fence_stop(AutoTokenizer.from_pretrained(tiny_model_dir), "on") is not None
    with pytest.raises(ValueError, match="--stop-at-fence"):
        fence_stop(base, "always")

    # TRL's datasets get text for the base model and conversations for the chat model; the pipeline counts the text
    rows = task_dataset(tasks, answer_format="solution", tokenizer=base)
    assert rows[0]["prompt"] == texts[0]
    assert isinstance(task_dataset(tasks, tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir))[0]["prompt"], list)
    assert chat_renderer(base)(chat_messages(tasks[0].prompt, system)) == texts[0]
    seed_prompt = plain_prompt(chat_messages(tasks[0].prompt))  # process_data counts the seed's system prompt
    assert count_prompt_tokens(tasks[:1], base) == [len(base(seed_prompt, add_special_tokens=False).input_ids)]
    sft = trl_example({"prompt": chat_messages(tasks[0].prompt, system),
                       "completion": [{"role": "assistant", "content": "```rust\nfn a() {}\n```"}]}, base)
    assert sft == {"prompt": texts[0], "completion": "```rust\nfn a() {}\n```"}


def test_feedback_turns_need_a_chat_template(base_dir, tmp_path):
    p = resolve_params(params_from_mapping({"preset": "tiny", "output-dir": str(tmp_path / "out"), "data": str(EASY),
                                            "model": str(base_dir), "feedback-turns": 1,
                                            "max-completion-length": 320}))
    with pytest.raises(ValueError, match="--feedback-turns 1: .* has no chat template"):
        build_grpo_trainer(p, load_tasks(str(EASY))[:2])


def test_fence_stop_cuts_a_token_stream(base_dir):
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    stop = fence_stop(tokenizer)
    eos = tokenizer.eos_token_id
    answer = tokenizer("Here:\n```rust\npub fn a() {}\n```", add_special_tokens=False).input_ids
    more = tokenizer("\nand then some more text\n```rust\nfn b() {}\n```", add_special_tokens=False).input_ids
    assert rust_block_closed(tokenizer.decode(answer)) and not rust_block_closed(tokenizer.decode(answer[:-1]))
    assert stop.cut(answer + more, [eos], 100) == [*answer, eos]
    assert stop.cut([*answer[:3], eos, *answer[3:]], [eos], 100) == [*answer[:3], eos, *answer[3:]], "ended first"
    assert stop.cut(answer[:-1] + [0] * 5, [eos], 100) == answer[:-1] + [0] * 5, "no closed block"
    assert stop.cut(answer, [eos], len(answer)) == answer, "no room for the end token"


@pytest.mark.parametrize("engine", ["grouped", "padded"])
def test_engines_stop_decoding_at_the_closing_fence(base_dir, tiny_model_dir, tasks, engine):
    """The tiny model answers with a ```rust block; its end tokens suppressed, it writes on past the fence to the
    limit, as a base model does. With the fence stop every answer ends at its fence (the same tokens up to there,
    then the end token), and decoding stops early: fewer forward passes."""
    generator = HFGenerator(str(tiny_model_dir), batch_size=8)
    prompts = [generator.tokenizer(generator.render(t.prompt), add_special_tokens=False).input_ids
               for t in tasks[:2] for _ in range(2)]
    ends = [2, 0]
    config = GenerationConfig(max_new_tokens=LIMIT, do_sample=False, pad_token_id=0, eos_token_id=ends,
                              suppress_tokens=ends)
    stop = fence_stop(AutoTokenizer.from_pretrained(base_dir))
    calls: list[int] = []
    hook = generator.model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            endless = sample_ids(generator.model, prompts, config, engine=engine, batch_size=8)
            before = len(calls)
            stopped = sample_ids(generator.model, prompts, config, engine=engine, batch_size=8, stop=stop)
    finally:
        hook.remove()
    assert all(len(row) == LIMIT for row in endless)
    assert all(row[-1] == stop.end_id and len(row) < LIMIT for row in stopped)
    for cut, full in zip(stopped, endless, strict=True):
        assert cut[:-1] == full[: len(cut) - 1]
        assert rust_block_closed(generator.tokenizer.decode(cut[:-1]))
        assert not rust_block_closed(generator.tokenizer.decode(cut[:-2]))
    assert len(calls) - before < before * 0.9


def test_engines_pass_the_cache_under_the_current_name():
    """``past_key_values`` is deprecated from transformers 5.24 (removed in 5.40): the engines use the name the
    installed model classes take."""
    assert cache_argument() in inspect.signature(Qwen2ForCausalLM.forward).parameters
