"""Inference with the tiny local model: chat layout, left padding, adapters, resumable chunked output."""

from __future__ import annotations

import json
from dataclasses import fields

import pandas as pd
import pytest
import torch
from conftest import ROOT

from rust_rewards.data.importers import load_tasks
from rust_rewards.eval.inference import InferenceParams, read_tasks, run_inference
from rust_rewards.eval.predictions import PREDICTION_COLUMNS, generate_predictions, parts_dir, prediction_columns
from rust_rewards.prompts import SYSTEM_PROMPT
from rust_rewards.sampling.engines import HFGenerator, SamplingParams, display_name, render_chat
from rust_rewards.tasks import Task
from rust_rewards.ui.entry_points import INFERENCE
from rust_rewards.ui.forms import check_form, param_controls

BUNDLED = ROOT / "qwen3-rust-finetune" / "bundled_tasks.jsonl"

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
        self.backend, self.tokenizer = inner.backend, inner.tokenizer

    def render(self, task_prompt: str, repairs=()) -> str:
        return self.inner.render(task_prompt, repairs)

    def generate(self, prompts, params):
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise Interrupted
        self.calls.append(list(prompts))
        return self.inner.generate(prompts, params)


def test_params_from_cli_style_values() -> None:
    params = INFERENCE.read({"model": "m", "n": 4, "max-new-tokens": 32, "temperature": 0.7,
                             "greedy": "", "merge": "false", "limit": "3"})
    assert (params.model, params.n, params.max_new_tokens, params.temperature) == ("m", 4, 32, 0.7)
    assert params.greedy is True and params.merge is False and params.limit == 3
    assert INFERENCE.read({}) == InferenceParams()
    with pytest.raises(ValueError, match="unknown parameter --bogus"):
        INFERENCE.read({"bogus": 1})
    with pytest.raises(ValueError, match="--n: expected int"):
        INFERENCE.read({"n": "many"})
    with pytest.raises(ValueError, match="--greedy"):
        INFERENCE.read({"greedy": "maybe"})


@pytest.mark.parametrize("values, flag", [({"backend": "tpu"}, "--backend"), ({"n": 0}, "--n"),
                                         ({"top-p": 1.5}, "--top-p"), ({"repair-rounds": -1}, "--repair-rounds")])
def test_parameter_definitions_refuse_bad_values_naming_the_flag(values, flag) -> None:
    with pytest.raises(ValueError, match=flag):
        INFERENCE.read(values)


def test_form_controls_come_from_the_parameter_definitions(tmp_path) -> None:
    controls = param_controls(InferenceParams, InferenceParams(), ROOT)
    assert set(controls.value) == {f.name for f in fields(InferenceParams)}
    assert INFERENCE.read(controls.value) == InferenceParams()
    assert list(controls["backend"].options) == ["auto", "hf", "vllm"]

    adapter = tmp_path / "outputs" / "run1" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    offered = param_controls(InferenceParams, InferenceParams(), tmp_path)["adapter"].options
    assert offered == {"(none)": "", "outputs/run1/adapter": "outputs/run1/adapter"}


def test_checked_params_refuse_what_the_run_would_refuse_first(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="use --n 1 with --greedy"):
        INFERENCE.check(InferenceParams(tasks=str(BUNDLED), greedy=True, n=2))
    with pytest.raises(ValueError, match="--tasks: no such file"):
        INFERENCE.check(InferenceParams(tasks="missing.jsonl"))
    params = INFERENCE.check(InferenceParams(tasks="qwen3-rust-finetune/bundled_tasks.jsonl"))
    assert params.tasks == str(BUNDLED) and params.model == InferenceParams().model


def test_form_values_go_through_the_command_line_checks(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    values = {"tasks": str(BUNDLED), "greedy": True, "n": 2}
    params, problem, status = check_form(values, INFERENCE.read, INFERENCE.check, INFERENCE.describe, "generate")
    assert params is None and "use --n 1 with --greedy" in problem
    assert "Cannot generate yet." in status.text and "use --n 1 with --greedy" in status.text
    params, problem, status = check_form({**values, "n": 1}, INFERENCE.read, INFERENCE.check,
                                         INFERENCE.describe, "generate")
    assert problem is None and params.greedy and params.n == 1 and status.text


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
    prompt = generator.render("Add two numbers.")  # a warm-start prompt: answers with or without a test module
    gens = generator.generate([prompt] * 4, SamplingParams(n=4, temperature=1.0, top_p=1.0, max_new_tokens=48))
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




def test_repair_round_on_tiny_model(generator, verifier, tmp_path) -> None:
    """2 tasks x 2 samples, one repair round: every pair gets rounds 0 and 1; failed answers are re-asked with
    their feedback (never the hidden tests), passing ones carried; an interrupted round resumes."""
    tasks = load_tasks(BUNDLED)[:2]
    out, params = tmp_path / "repair.parquet", SamplingParams(n=2, temperature=0.7, max_new_tokens=96)
    meta = {"model": "tiny", "base_model": "tiny-dir", "chunk_size": 2, "repair_rounds": 1, "verifier": verifier}
    first = Recording(generator, fail_on_call=2)
    with pytest.raises(Interrupted):
        generate_predictions(tasks, first, params, out, **meta)
    assert len(first.calls) == 2 and not out.exists()
    second = Recording(generator)
    result = generate_predictions(tasks, second, params, out, **meta)

    assert list(result.columns) == prediction_columns(1)
    assert result[["task_id", "sample", "round"]].values.tolist() == [
        [t.task_id, s, r] for t in tasks for s in range(2) for r in range(2)]
    first_round = result[result["round"] == 0].set_index(["task_id", "sample"])
    second_round = result[result["round"] == 1].set_index(["task_id", "sample"])
    assert (first_round["feedback"] == "").all() and not first_round["carried"].any()
    carried = second_round[second_round["carried"]]
    assert (carried["completion"] == first_round.loc[carried.index, "completion"]).all()
    assert (carried["feedback"] == "").all()
    repaired = second_round[~second_round["carried"]]
    assert len(repaired) >= 1 and (repaired["feedback"].str.startswith("Your answer")).all()

    prompts = [p for call in second.calls for p in call]
    assert len(prompts) == len(repaired), "round 0 was not generated again"
    hidden_lines = {line.strip() for t in tasks for line in t.reference_tests.splitlines() if "assert" in line}
    for key, row in repaired.iterrows():
        previous = first_round.loc[key, "completion"]
        prompt = next(p for p in prompts if row["feedback"] in p and previous in p)
        assert prompt.endswith(f"<|im_start|>user\n{row['feedback']}<|im_end|>\n<|im_start|>assistant\n")
    for prompt in prompts:
        assert "__rr" not in prompt and not [line for line in hidden_lines if line in prompt]

    with pytest.raises(ValueError, match="repair rounds up to 1"):
        generate_predictions(tasks, Recording(generator), params, out, **{**meta, "repair_rounds": 0})


def test_repair_rounds_extend_a_one_shot_file(generator, verifier, tmp_path) -> None:
    """A file written without repair rounds is round 0 of a later run with them."""
    tasks, out = load_tasks(BUNDLED)[2:3], tmp_path / "one_shot.parquet"
    params = SamplingParams(n=1, greedy=True, max_new_tokens=48)
    meta = {"model": "tiny", "base_model": "tiny-dir"}
    one_shot = generate_predictions(tasks, generator, params, out, **meta)
    assert list(one_shot.columns) == list(PREDICTION_COLUMNS)
    extended = generate_predictions(tasks, generator, params, out, repair_rounds=2, verifier=verifier, **meta)
    assert extended["round"].tolist() == [0, 1, 2]
    assert extended["completion"].iloc[0] == one_shot["completion"].iloc[0]


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


@pytest.mark.slow
@pytest.mark.browser
def test_notebook_form_in_the_browser(tiny, tmp_path) -> None:
    """``marimo run inference.py -- --model M --tasks T``: greedy with n > 1 is refused under the form before the
    model loads; a fixed form generates and the predictions file appears."""
    import sys

    from browser import chromium_page, free_port, page_errors, screenshot, serve

    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(t.to_row()) + "\n" for t in _tasks(2)))
    port = free_port()
    argv = [sys.executable, "-m", "marimo", "run", "inference.py", "--headless", "--host", "127.0.0.1",
            "--port", str(port), "--", "--model", str(tiny), "--tasks", str(tasks_file), "--n", "2",
            "--max-new-tokens", "8", "--greedy"]
    with serve(argv, port, tmp_path / "server.log") as server, chromium_page() as page:
        page.goto(server.url)
        page.wait_for_selector("text=use --n 1 with --greedy", timeout=60_000)
        from playwright.sync_api import expect

        # the refusal under the form and inline under the switch paint one after the other (CI saw 1 of 2 once)
        expect(page.get_by_text("Cannot generate yet")).to_have_count(1, timeout=30_000)
        expect(page.get_by_text("--greedy gives --n 2 identical samples")).to_have_count(2, timeout=30_000)
        page.get_by_role("switch", name="greedy").click()
        # the form re-renders without the refusal: fill it after that, or the new form drops what was typed
        page.wait_for_selector("text=--greedy gives --n 2 identical samples", state="detached", timeout=60_000)
        for label, value in (("out", str(tmp_path / "ui.parquet")), ("name", "ui-run")):
            page.get_by_label(label, exact=True).fill(value)
            page.get_by_label(label, exact=True).press("Enter")
        page.wait_for_selector("text=into " + str(tmp_path / "ui.parquet"), timeout=30_000)
        page.get_by_role("button", name="Generate").click()
        page.wait_for_selector("text=Wrote", timeout=120_000)
        page.get_by_text("Wrote").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        screenshot(page, "inference", tmp_path)
        assert page_errors(page) == []
    written = pd.read_parquet(tmp_path / "ui.parquet")
    assert len(written) == 4 and set(written["model"]) == {"ui-run"}
    assert set(written["max_new_tokens"]) == {8}
