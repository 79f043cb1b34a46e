"""The generation engines on the tiny model: greedy tokens equal across engines (and to TRL's own rollout path),
samples routed back to their prompts, finished sequences leaving the batch, the knobs reaching TRL's config."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import ROOT
from transformers import DynamicCache, GenerationConfig
from trl import GRPOTrainer

from rust_rewards.data.importers import load_tasks
from rust_rewards.eval.inference import InferenceParams
from rust_rewards.params import fill_params
from rust_rewards.rewards import REWARD_FUNCS
from rust_rewards.sampling.decoding import _batches, cache_kwargs, continuous_config, reserved_cache, sample_ids
from rust_rewards.sampling.engines import HFGenerator, SamplingParams
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.resolve import resolve_params
from rust_rewards.train.rollouts import EngineGRPOTrainer
from rust_rewards.train.trainers import build_grpo_trainer
from rust_rewards.train.trl_configs import grpo_config

EASY = ROOT / "qwen3-rust-finetune" / "easy_tasks.jsonl"
"""The tiny preset's tasks: the tiny model answers their prompts, some answers end before others."""
GREEDY = SamplingParams(n=1, greedy=True, max_new_tokens=40)
LONG = 128
"""Room for a whole answer of the tiny model (its warm-start answers take up to about 110 tokens)."""


@pytest.fixture(scope="module")
def generator(tiny_model_dir):
    return HFGenerator(str(tiny_model_dir), batch_size=8)


@pytest.fixture(scope="module")
def prompts(generator):
    """Prompts of different lengths, each asked several times, interleaved (A B A C B A ...)."""
    tasks = load_tasks(str(EASY))[:5]
    texts = [generator.render(t.prompt) for t in tasks]
    assert len({len(generator.tokenizer(t)["input_ids"]) for t in texts}) > 1
    return [texts[i % len(texts)] for i in range(13)] + [texts[0]] * 4


def _texts(generator, prompts, params, engine, batch_size=8):
    generator.engine, generator.batch_size = engine, batch_size
    try:
        return [g.text for g in generator.generate(prompts, params)]
    finally:
        generator.engine, generator.batch_size = "grouped", 8


@pytest.mark.parametrize("engine,batch_size", [("grouped", 8), ("grouped", 3), ("continuous", 8)])
def test_greedy_tokens_equal_the_padded_path(generator, prompts, engine, batch_size):
    """The padded path is what the project generated with before; a group larger than the batch is split."""
    before = _texts(generator, prompts, GREEDY, "padded")
    assert _texts(generator, prompts, GREEDY, engine, batch_size) == before
    assert len(set(before)) > 1


def test_grouped_samples_vary_and_stop_at_their_end(generator, prompts):
    params = SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=LONG)
    torch.manual_seed(0)
    generator.engine = "grouped"
    gens = generator.generate(prompts, params)
    assert len(gens) == len(prompts)
    assert len({g.text for g in gens}) > len(prompts) // 2
    lengths = {g.tokens for g in gens}
    assert len(lengths) > 2 and max(lengths) <= LONG, "sequences end at different lengths, none past the limit"
    assert not any(g.truncated for g in gens if g.tokens < LONG)


def test_finished_sequences_leave_the_batch(generator, prompts):
    """The grouped engine asks the model for fewer rows once sequences end (counted in the model's forward)."""
    rows: list[int] = []
    hook = generator.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    torch.manual_seed(0)
    try:
        _texts(generator, prompts[:8], SamplingParams(n=1, temperature=1.0, top_p=1.0, max_new_tokens=LONG),
               "grouped", batch_size=8)
    finally:
        hook.remove()
    distinct = len(set(prompts[:8]))
    assert rows[0] == distinct, "one prefill per distinct prompt"
    assert max(rows[1:]) == 8 and min(rows) < 8 and rows[-1] < 8


def test_reserved_cache_holds_what_dynamic_cache_holds_without_copying(generator):
    """Prefill, a group's rows selected, then decoding: same keys and values as transformers' ``DynamicCache``,
    written into the room reserved at prefill (no copy per token)."""
    model = generator.model
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    caches = [reserved_cache(4), DynamicCache()]
    rooms = []
    with torch.no_grad():
        for cache in caches:
            model(input_ids=ids, use_cache=True, **cache_kwargs(cache))
            cache.batch_select_indices(torch.tensor([0, 0, 1]))
            for token in (13, 14, 15):
                model(input_ids=torch.full((3, 1), token), use_cache=True, **cache_kwargs(cache))
                rooms.append(cache.layers[0].keys.untyped_storage())  # kept alive: no address is reused
    ours, theirs = caches
    assert ours.get_seq_length() == theirs.get_seq_length() == 7
    for mine, reference in zip(ours.layers, theirs.layers, strict=True):
        torch.testing.assert_close(mine.keys, reference.keys)
        torch.testing.assert_close(mine.values, reference.values)
    pointers = [room.data_ptr() for room in rooms]
    assert len(set(pointers[:3])) == 1, "one buffer through decoding"
    assert len(set(pointers[3:])) == 3, "DynamicCache concatenates a new copy per token"


def test_batches_pack_groups_and_split_big_ones():
    prompts = [[1, 2, 3]] * 5 + [[4, 5]] * 2 + [[6, 7, 8, 9]]
    batches = _batches(prompts, 4)
    assert [[len(owners) for _, owners in b] for b in batches] == [[2], [4], [1, 1]]
    assert sorted(i for b in batches for _, owners in b for i in owners) == list(range(8))


def test_continuous_cache_on_cpu_holds_every_request_and_no_more(generator):
    """On the CPU the paged cache is sized for the requests (transformers would size it from free memory)."""
    config = continuous_config(generator.model, [[1] * 300, [2] * 10], 128)
    page = getattr(config, "page_size", None) or config.block_size
    assert config.num_blocks * page >= 300 + 128 + 10 + 128
    assert config.num_blocks <= 4


def test_unknown_engine_is_refused(generator):
    with pytest.raises(ValueError, match="unknown generation engine 'fast'"):
        sample_ids(generator.model, [[1, 2]], GenerationConfig(max_new_tokens=2), engine="fast")
    with pytest.raises(ValueError, match="--engine"):
        fill_params(InferenceParams, {"engine": "fast"}, InferenceParams())


def test_grpo_rollouts_equal_trls_own_path_under_greedy(tiny_model_dir, tmp_path):
    """EngineGRPOTrainer's grouped rollouts give TRL's padded ``generate`` tokens (greedy), cut after the end."""
    p = resolve_params(params_from_mapping({
        "preset": "tiny", "output-dir": str(tmp_path / "out"), "data": str(EASY), "model": str(tiny_model_dir),
        "num-generations": 4, "per-device-train-batch-size": 8, "max-completion-length": LONG}))
    trainer = build_grpo_trainer(p, load_tasks(str(EASY))[:4])
    assert isinstance(trainer, EngineGRPOTrainer) and trainer.generation_engine == "grouped"
    dropouts = [m for m in trainer.model.modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts and all(m.p == 0 for m in dropouts), "--disable-dropout (default) reaches the LoRA dropout"
    trainer.generation_config.do_sample = False
    tokenizer = trainer.processing_class
    prompt_ids = [tokenizer.apply_chat_template([{"role": "user", "content": t.prompt}], add_generation_prompt=True,
                                                tokenize=True, return_dict=True)["input_ids"]
                  for t in load_tasks(str(EASY))[:3] for _ in range(4)]
    ours, _ = trainer._generate_single_turn(prompt_ids, None, {}, 4)
    trls, _ = GRPOTrainer._generate_single_turn(trainer, prompt_ids, None, {}, 4)
    assert ours == trls and len(ours) == 12
    assert any(len(c) < LONG for c in ours)


def test_engine_and_steps_per_generation_reach_trls_config():
    p = resolve_params(params_from_mapping({"preset": "tiny", "steps-per-generation": 4}))
    cfg = grpo_config(dataclasses.replace(p, use_cpu=True), [1.0] * len(REWARD_FUNCS))
    assert (cfg.steps_per_generation, cfg.generation_batch_size) == (4, 64)
    assert not cfg.use_transformers_continuous_batching and cfg.disable_dropout
    p = resolve_params(params_from_mapping({"preset": "tiny", "generation-engine": "continuous"}))
    cfg = grpo_config(dataclasses.replace(p, use_cpu=True), [1.0] * len(REWARD_FUNCS))
    assert cfg.use_transformers_continuous_batching and cfg.steps_per_generation == 1
    assert cfg.transformers_continuous_batching_config == {"num_blocks": 16 * 5, "max_batch_tokens": 512}
    with pytest.raises(ValueError, match="--generation-engine"):
        params_from_mapping({"generation-engine": "fast"})
