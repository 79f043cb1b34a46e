"""Inference with the tiny local model: chat layout, left padding, adapters, resumable chunked output."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from inference import InferenceParams, params_from_mapping, read_tasks, run_inference
from rust_rewards.generation import (
    PREDICTION_COLUMNS,
    HFGenerator,
    SamplingParams,
    display_name,
    generate_predictions,
    parts_dir,
    render_chat,
)
from rust_rewards.prompts import SYSTEM_PROMPT
from rust_rewards.tasks import Task

GREEDY = SamplingParams(n=1, greedy=True, max_new_tokens=12)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def generator(tiny):
    return HFGenerator(str(tiny), batch_size=3)


def _tasks(count: int) -> list[Task]:
    return [Task(task_id=f"t{i}", prompt=f"Write `pub fn f{i}(x: i32) -> i32`." + " Be brief." * i)
            for i in range(count)]


class Interrupted(Exception):
    pass


class Recording:
    """Wraps a generator: records how many prompts each call got; can fail on a given call."""

    def __init__(self, inner, fail_on_call: int | None = None) -> None:
        self.inner, self.fail_on_call, self.calls = inner, fail_on_call, []
        self.backend = inner.backend

    def render(self, task_prompt: str) -> str:
        return self.inner.render(task_prompt)

    def generate(self, prompts, params):
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise Interrupted
        self.calls.append(list(prompts))
        return self.inner.generate(prompts, params)


def test_params_from_cli_style_values() -> None:
    params = params_from_mapping({"model": "m", "n": 4, "max-new-tokens": 32, "temperature": 0.7,
                                  "greedy": "", "merge": "false", "limit": "3"})
    assert (params.model, params.n, params.max_new_tokens, params.temperature) == ("m", 4, 32, 0.7)
    assert params.greedy is True and params.merge is False and params.limit == 3
    assert params_from_mapping({}) == InferenceParams()
    with pytest.raises(ValueError, match="unknown parameter --bogus"):
        params_from_mapping({"bogus": 1})
    with pytest.raises(ValueError, match="--n: expected int"):
        params_from_mapping({"n": "many"})
    with pytest.raises(ValueError, match="--greedy"):
        params_from_mapping({"greedy": "maybe"})


def test_default_names_and_output_path() -> None:
    assert display_name("Qwen/Qwen2.5-Coder-1.5B-Instruct", None) == "Qwen2.5-Coder-1.5B-Instruct"
    assert display_name("Qwen/Qwen2.5-Coder-1.5B-Instruct", "runs/exp1/checkpoint-50").endswith(
        "+exp1/checkpoint-50")
    params = InferenceParams(adapter="runs/exp1/adapter")
    assert params.out_path().name == "Qwen2.5-Coder-1.5B-Instruct+exp1__adapter.parquet"


@pytest.mark.parametrize(
    "kwargs", [{"n": 0}, {"max_new_tokens": 0}, {"greedy": True, "n": 2}, {"temperature": 0.0}, {"top_p": 1.5}]
)
def test_sampling_params_reject_bad_values(kwargs) -> None:
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_prompt_is_the_training_chat_layout(generator) -> None:
    text = render_chat(generator.tokenizer, "Write add.")
    assert text.startswith(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n")
    assert text.endswith("<|im_start|>user\nWrite add.<|im_end|>\n<|im_start|>assistant\n")
    assert generator.tokenizer.padding_side == "left"


def test_left_padded_batches_match_one_prompt_at_a_time(generator) -> None:
    prompts = [generator.render(t.prompt) for t in _tasks(5)]
    lengths = {len(generator.tokenizer(p)["input_ids"]) for p in prompts}
    assert len(lengths) > 1, "prompts must differ in length for padding to matter"
    batched = generator.generate(prompts, GREEDY)
    alone = [generator.generate([p], GREEDY)[0] for p in prompts]
    assert [g.text for g in batched] == [g.text for g in alone]
    assert all(0 < g.tokens <= GREEDY.max_new_tokens for g in batched)
    assert all(g.truncated == (g.tokens == GREEDY.max_new_tokens) for g in batched)


def test_sampling_gives_varied_samples(generator) -> None:
    prompt = generator.render("Write add.")
    gens = generator.generate([prompt] * 4, SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=12))
    assert len({g.text for g in gens}) > 1


def test_interrupted_run_resumes_without_regenerating(generator, tmp_path) -> None:
    tasks, out = _tasks(5), tmp_path / "preds.parquet"
    params = SamplingParams(n=2, temperature=0.8, max_new_tokens=8)
    meta = {"model": "tiny", "base_model": "tiny-dir", "chunk_size": 4}

    first = Recording(generator, fail_on_call=1)
    with pytest.raises(Interrupted):
        generate_predictions(tasks, first, params, out, **meta)
    assert not out.exists()
    chunks = sorted(parts_dir(out).glob("chunk_*.parquet"))
    assert len(chunks) == 1
    done = pd.read_parquet(chunks[0])
    assert list(zip(done["task_id"], done["sample"], strict=True)) == [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]

    second = Recording(generator)
    seen: list[tuple[int, int]] = []
    result = generate_predictions(tasks, second, params, out, progress=lambda d, t: seen.append((d, t)), **meta)
    assert sum(len(c) for c in second.calls) == 10 - 4
    assert seen[0] == (0, 6) and seen[-1] == (6, 6)
    assert not parts_dir(out).exists()
    assert list(result.columns) == list(PREDICTION_COLUMNS)
    assert len(result) == 10 and not result.duplicated(["task_id", "sample"]).any()
    kept = result.merge(done[["task_id", "sample", "completion"]], on=["task_id", "sample"])
    assert (kept["completion_x"] == kept["completion_y"]).all() and len(kept) == 4
    on_disk = pd.read_parquet(out)
    assert on_disk["task_id"].tolist() == [f"t{i}" for i in range(5) for _ in range(2)]
    assert set(on_disk["temperature"]) == {0.8} and set(on_disk["model"]) == {"tiny"}
    assert pd.to_datetime(on_disk["generated_at"]).notna().all()

    third = Recording(generator)
    generate_predictions(tasks, third, params, out, **meta)
    assert third.calls == []

    with pytest.raises(ValueError, match="temperature"):
        generate_predictions(tasks, Recording(generator), SamplingParams(n=2, temperature=0.3), out, **meta)


def test_run_inference_reads_task_file_with_limit(tiny, tmp_path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in _tasks(4)))
    assert [t.task_id for t in read_tasks(tasks_file, limit=3)] == ["t0", "t1", "t2"]
    params = InferenceParams(model=str(tiny), tasks=str(tasks_file), out=str(tmp_path / "p.parquet"),
                             n=2, max_new_tokens=6, limit=3, backend="hf", name="tiny-run")
    result = run_inference(params)
    assert len(result) == 6 and set(result["model"]) == {"tiny-run"}
    assert set(result["backend"]) == {"hf"} and (result["completion_tokens"] <= 6).all()


@pytest.fixture(scope="module")
def adapter(tiny, tmp_path_factory):
    """A LoRA adapter with non-zero B matrices, so it changes the model's outputs."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    path = tmp_path_factory.mktemp("adapter") / "adapter"
    model.save_pretrained(path)
    return path


def test_adapter_changes_outputs_and_merge_agrees(tiny, adapter, generator) -> None:
    prompts = [generator.render(t.prompt) for t in _tasks(3)]
    base = [g.text for g in generator.generate(prompts, GREEDY)]
    with_adapter = HFGenerator(str(tiny), str(adapter))
    merged = HFGenerator(str(tiny), str(adapter), merge=True)
    assert not hasattr(merged.model, "peft_config")
    lora = [g.text for g in with_adapter.generate(prompts, GREEDY)]
    assert lora != base
    assert [g.text for g in merged.generate(prompts, GREEDY)] == lora


@pytest.mark.browser
def test_notebook_form_in_the_browser(tiny, tmp_path) -> None:
    """``marimo run inference.py``: fill the form, submit, and the predictions file appears."""
    import sys

    from browser import chromium_page, free_port, page_errors, serve

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in _tasks(2)))
    port = free_port()
    argv = [sys.executable, "-m", "marimo", "run", "inference.py", "--headless", "--host", "127.0.0.1",
            "--port", str(port)]
    with serve(argv, port, tmp_path / "server.log") as server, chromium_page() as page:
        page.goto(server.url)
        page.wait_for_selector("text=Fill the form", timeout=60_000)
        inputs = page.locator("input[type=text]")
        # model, adapter, tasks, out, name, n, temperature, top_p, max_new_tokens, ...
        for index, value in {0: str(tiny), 2: str(tasks_file), 3: str(tmp_path / "ui.parquet"), 4: "ui-run",
                             5: "2", 8: "8"}.items():
            inputs.nth(index).fill(value)
        page.get_by_role("button", name="Generate").click()
        page.wait_for_selector("text=Wrote", timeout=120_000)
        assert page_errors(page) == []
    written = pd.read_parquet(tmp_path / "ui.parquet")
    assert len(written) == 4 and set(written["model"]) == {"ui-run"}
    assert set(written["max_new_tokens"]) == {8}
