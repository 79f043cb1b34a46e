"""process_data.py: each pipeline step, the manifest, and an end-to-end script run with real cargo."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from transformers import AutoTokenizer

from rust_rewards import report as rr
from rust_rewards.atomic import write_json_atomic, write_parquet_atomic, write_text_atomic
from rust_rewards.data.importers import load_tasks
from rust_rewards.data.pipeline import (
    Dropped,
    ProcessParams,
    StageResult,
    check_split,
    dedup_tasks,
    eval_score,
    failure_reason,
    jaccard,
    load_tokenizer,
    prompt_tokens,
    run_pipeline,
    split_tasks,
    token_budget,
    verify_tasks,
)
from rust_rewards.prompts import chat_messages
from rust_rewards.tasks import TASK_COLUMNS, Task
from rust_rewards.train.tiny_model import train_tokenizer
from rust_rewards.ui.charts import dropped_chart
from rust_rewards.ui.entry_points import PROCESS
from rust_rewards.ui.forms import param_controls

BENCHMARKS = ROOT.parent / "shared" / "benchmarks"

ADD = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
ADD_TESTS = "#[test]\nfn adds() {\n    assert_eq!(add(2, 3), 5);\n    assert_eq!(add(-1, 1), 0);\n}\n"


def small_tasks() -> list[Task]:
    """Five tasks plus a duplicate: two correct, one failing test, one compile error, one without a reference."""
    return [
        Task("add", "Write `pub fn add(a: i32, b: i32) -> i32` returning the sum.", ADD, ADD_TESTS, "unit"),
        Task("add-again", "write `pub fn add(a: i32, b: i32) -> i32`   returning the SUM.", ADD, ADD_TESTS, "unit"),
        Task("max", "Write `pub fn max3(a: i32, b: i32, c: i32) -> i32` returning the largest argument.",
             "pub fn max3(a: i32, b: i32, c: i32) -> i32 {\n    a.max(b).max(c)\n}\n",
             "#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn largest() {\n"
             "        assert_eq!(max3(1, 7, 3), 7);\n    }\n}\n", "unit"),
        Task("sub-wrong", "Write `pub fn sub(a: i32, b: i32) -> i32` returning a minus b.",
             "pub fn sub(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
             "#[test]\nfn subtracts() {\n    assert_eq!(sub(5, 3), 2);\n}\n", "unit"),
        Task("neg-broken", "Write `pub fn neg(a: i32) -> i32` returning minus a.",
             "pub fn neg(a: i32) -> i32 {\n    -a as u8\n}\n",
             "#[test]\nfn negates() {\n    assert_eq!(neg(5), -5);\n}\n", "unit"),
        Task("free", "Explain, in Rust, how to double every number in a vector and return the new vector.",
             test_shape="none"),
    ]


def write_jsonl(path: Path, tasks: list[Task]) -> Path:
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tasks), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(600).save_pretrained(out)
    return out


# ----------------------------------------------------------------------------- parameters

def test_params_from_cli():
    params = PROCESS.read({"source": "x.jsonl", "eval-fraction": 0.25, "seed": 7, "no-verify": "",
                              "tokenizer": "none", "max-prompt-tokens": 300, "workers": 2})
    assert (params.source, params.eval_fraction, params.seed, params.verify) == ("x.jsonl", 0.25, 7, False)
    assert (params.tokenizer, params.max_prompt_tokens, params.workers) == ("none", 300, 2)
    assert PROCESS.read({}) == ProcessParams()
    assert ProcessParams().source == "qwen3-rust-finetune/bundled_tasks.jsonl"
    with pytest.raises(ValueError, match=r"^unknown parameter --evalfraction \(did you mean --eval-fraction\?\)$"):
        PROCESS.read({"evalfraction": 0.2})
    with pytest.raises(ValueError, match="--seed: expected int, got 'abc'"):
        PROCESS.read({"seed": "abc"})
    with pytest.raises(ValueError, match="--workers: expected int, got 1.5"):
        PROCESS.read({"workers": 1.5})
    with pytest.raises(ValueError, match=r"--eval-fraction must be in \[0, 1\)"):
        PROCESS.read({"eval-fraction": 1.5})


@pytest.mark.parametrize("values, flag", [({"verifier": "gpu"}, "--verifier"), ({"workers": -1}, "--workers"),
                                         ({"near-dup-threshold": 1.5}, "--near-dup-threshold"),
                                         ({"max-prompt-tokens": 0}, "--max-prompt-tokens")])
def test_parameter_definitions_refuse_bad_values_naming_the_flag(values, flag):
    with pytest.raises(ValueError, match=flag):
        PROCESS.read(values)


def test_form_controls_come_from_the_parameter_definitions(tmp_path):
    controls = param_controls(ProcessParams, ProcessParams(), ROOT)
    assert set(controls.value) == {f.name for f in fields(ProcessParams)}
    assert PROCESS.read(controls.value) == ProcessParams()
    cli = PROCESS.read({"no-verify": "", "seed": 7})
    prefilled = param_controls(ProcessParams, cli, ROOT)
    assert prefilled["verify"].value is False and PROCESS.read(prefilled.value) == cli

    (tmp_path / "qwen3-rust-finetune").mkdir()
    write_jsonl(tmp_path / "qwen3-rust-finetune" / "mine.jsonl", small_tasks())
    offered = param_controls(ProcessParams, ProcessParams(), tmp_path)["source"].options
    assert list(offered) == [ProcessParams().source, "qwen3-rust-finetune/mine.jsonl"]


def test_checked_params_refuse_missing_local_inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert PROCESS.check(ProcessParams()).source == str(ROOT / ProcessParams().source)
    with pytest.raises(ValueError, match="--source: no such file: missing.jsonl"):
        PROCESS.check(ProcessParams(source="missing.jsonl"))
    assert PROCESS.check(ProcessParams(source="missing.jsonl", oxen_repo="ox/Rust")).source == "missing.jsonl"
    with pytest.raises(ValueError, match="--tokenizer './nowhere': no such tokenizer directory"):
        PROCESS.check(ProcessParams(tokenizer="./nowhere"))


def test_dropped_chart_counts_tasks_by_stage_and_reason():
    assert dropped_chart([]) is None
    chart = dropped_chart([Dropped("a", "dedup", "exact duplicate prompt"), Dropped("b", "verify", "test_failure"),
                           Dropped("c", "verify", "test_failure")])
    assert sorted((r["stage"], r["reason"], r["tasks"]) for r in chart.to_dict()["data"]["values"]) == [
        ("dedup", "exact duplicate prompt", 1), ("verify", "test_failure", 2)]


# ----------------------------------------------------------------------------- dedup

def test_dedup_exact_and_near_duplicates():
    long = ("Write a function that takes a vector of integers and returns a new vector containing only the "
            "even numbers, preserving their order; an empty input gives an empty output, and negative "
            "numbers must be handled too.")
    tasks = [
        Task("a", long),
        Task("b", long.upper().replace(" ", "  \n")),
        Task("c", long.replace("preserving", "keeping")),
        Task("d", "Write a function that returns the odd numbers of a vector."),
        Task("e", "Reverse a string."),
    ]
    result = dedup_tasks(tasks, 0.9)
    assert [t.task_id for t in result.kept] == ["a", "d", "e"]
    reasons = {d.task_id: (d.reason, d.detail) for d in result.dropped}
    assert reasons["b"] == ("exact duplicate prompt", "same prompt as a")
    assert reasons["c"][0] == "near-duplicate prompt" and reasons["c"][1].endswith("with a")
    assert result.stats == {"exact_duplicates": 1, "near_duplicates": 1}
    assert [t.task_id for t in dedup_tasks(tasks, 1.0).kept] == ["a", "c", "d", "e"]


def test_prompt_tokens_count_punctuation_and_repeats():
    assert prompt_tokens("a (b) a") == {"a#1", "(#1", "b#1", ")#1", "a#2"}
    assert jaccard(prompt_tokens("x y z"), prompt_tokens("x y w")) == 0.5


def test_prefix_filter_finds_exactly_what_brute_force_finds():
    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    prompts = []
    for _ in range(300):
        if prompts and rng.random() < 0.4:
            base = rng.choice(prompts).split()
            for _ in range(rng.randint(0, 3)):
                base[rng.randrange(len(base))] = rng.choice(words)
            prompts.append(" ".join(base))
        else:
            prompts.append(" ".join(rng.choices(words, k=rng.randint(3, 30))))
    tasks = [Task(str(i), p) for i, p in enumerate(prompts)]
    for threshold in (0.7, 0.9):
        kept: list[Task] = []
        seen: set[str] = set()
        for task in tasks:
            key = " ".join(task.prompt.lower().split())
            if key in seen:
                continue
            seen.add(key)
            toks = prompt_tokens(task.prompt)
            if not any(jaccard(toks, prompt_tokens(k.prompt)) >= threshold for k in kept):
                kept.append(task)
        result = dedup_tasks(tasks, threshold)
        assert [t.task_id for t in result.kept] == [t.task_id for t in kept]
        assert 0 < len(result.dropped) < len(tasks)


def test_dedup_on_benchmarks_flags_only_true_near_copies():
    for name, dropped in (("exercism_rust.jsonl", {"exercism/rust/minesweeper": "exercism/rust/flower-field"}),
                          ("multiple_humaneval_rs.jsonl",
                           {"HumanEval_43_pairs_sum_to_zero": "HumanEval_40_triples_sum_to_zero"})):
        path = BENCHMARKS / name
        if not path.is_file():
            pytest.skip(f"{path} not present")
        result = dedup_tasks(load_tasks(path))
        assert {d.task_id: d.detail.rsplit(" ", 1)[1] for d in result.dropped} == dropped


# ----------------------------------------------------------------------------- split

def test_split_is_deterministic_and_stable_when_rows_are_added():
    tasks = [Task(f"task-{i}", f"prompt {i}") for i in range(2000)]
    train, held = split_tasks(tasks, 0.1, seed=42)
    assert len(train) + len(held) == 2000
    assert 150 < len(held) < 250
    assert split_tasks(tasks, 0.1, seed=42) == (train, held)
    more = tasks + [Task(f"new-{i}", f"new prompt {i}") for i in range(500)]
    train2, held2 = split_tasks(list(reversed(more)), 0.1, seed=42)
    old_eval = {t.task_id for t in held}
    assert {t.task_id for t in held2 if t.task_id.startswith("task-")} == old_eval
    assert {t.task_id for t in train2 if t.task_id.startswith("task-")} == {t.task_id for t in train}
    assert {t.task_id for t in split_tasks(tasks, 0.1, seed=7)[1]} != old_eval
    assert split_tasks(tasks, 0.0, seed=42) == (tasks, [])
    assert [t.task_id for t in train] == [t.task_id for t in tasks if t.task_id not in old_eval]
    assert 0 <= eval_score("x", 1) < 1 and eval_score("x", 1) == eval_score("x", 1) != eval_score("x", 2)


# ----------------------------------------------------------------------------- token budget

def test_token_budget_counts_the_full_chat_prompt(tokenizer_dir):
    tokenizer, note = load_tokenizer(str(tokenizer_dir))
    assert note == ""
    tasks = [Task("short", "Add two numbers."), Task("long", "Add two numbers. " * 60)]
    expected = [len(AutoTokenizer.from_pretrained(tokenizer_dir).apply_chat_template(
        chat_messages(t.prompt), add_generation_prompt=True)["input_ids"]) for t in tasks]
    assert expected[0] < expected[1]
    result = token_budget(tasks, tokenizer, expected[0], name="tiny")
    assert [t.task_id for t in result.kept] == ["short"]
    [dropped] = result.dropped
    assert (dropped.task_id, dropped.reason) == ("long", "prompt too long")
    assert dropped.detail == f"{expected[1]} > {expected[0]} tokens"
    assert result.stats["prompt_tokens"]["max"] == expected[1]
    assert len(token_budget(tasks, tokenizer, expected[1]).kept) == 2


def test_tokenizer_none_skips_and_missing_directory_fails(tmp_path):
    assert load_tokenizer("none") == (None, "skipped: --tokenizer none")
    skipped = token_budget([Task("a", "x")], None, 10, note="skipped: --tokenizer none")
    assert len(skipped.kept) == 1 and skipped.stats["skipped"] == "skipped: --tokenizer none"
    with pytest.raises(FileNotFoundError, match="no such tokenizer directory"):
        load_tokenizer(str(tmp_path / "missing"))


# ----------------------------------------------------------------------------- verification

def test_failure_reasons_from_reports():
    hidden_fail = rr.TestCounts(passed=1, failed=1, expected=2, summary_seen=True)
    cases = [
        (rr.Report(has_code=True, internal_error="OSError: boom\nmore"), ("internal_error", "OSError: boom")),
        (rr.Report(has_code=True, timed_out=("hidden",)), ("timeout", "timed out in hidden")),
        (rr.Report(has_code=True), ("verifier_error", "build failed without any compiler message "
                                    "(sandbox or resource failure?)")),
        (rr.Report(has_code=True, diagnostics="error: expected `;`"),
         ("compile_error", "compile error (no error code)")),
        (rr.Report(has_code=True, error_codes=("E0308", "E0425", "E0308")),
         ("compile_error", "compile error (E0308, E0425)")),
        (rr.Report(has_code=True, build_ok=True, source=rr.SourceFacts(forbidden=("process::exit",))),
         ("forbidden", "forbidden: process::exit")),
        (rr.Report(has_code=True, build_ok=True, hidden_tests=rr.TestCounts(expected=2)),
         ("no_test_result", "hidden tests gave no result (test build failed, crash or early exit)")),
        (rr.Report(has_code=True, build_ok=True, hidden_tests=hidden_fail),
         ("test_failure", "hidden tests: 1 passed, 1 failed of 2")),
    ]
    for report, expected in cases:
        assert failure_reason(report) == expected


def test_verify_small_set_drops_wrong_references():
    tasks = [t for t in small_tasks() if t.task_id != "add-again"]
    result = verify_tasks(tasks)
    assert [t.task_id for t in result.kept] == ["add", "max", "free"]
    assert {d.task_id: d.reason for d in result.dropped} == {"sub-wrong": "test_failure",
                                                             "neg-broken": "compile_error"}
    assert result.stats["unverifiable"] == 1 and result.stats["checked"] == 4
    assert result.stats["failures_by_reason"] == {"test_failure": 1, "compile_error": 1}
    assert result.stats["error_codes"] == {"E0308": 1}
    disabled = verify_tasks(tasks, enabled=False)
    assert len(disabled.kept) == len(tasks) and disabled.stats["checked"] == 0


def test_verify_exercism_references_integration_edition_2024():
    path = BENCHMARKS / "exercism_rust.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    by_slug = {t.task_id.rsplit("/", 1)[1]: t for t in load_tasks(path)}
    chosen = [by_slug[s] for s in ("accumulate", "palindrome-products", "forth", "macros", "bob")]
    assert {(t.test_shape, t.edition) for t in chosen} == {("integration", "2024")}
    stub = replace(by_slug["leap"], task_id="leap-stub",
                   reference_code=by_slug["leap"].prompt.split("```rust\n")[-1].split("```")[0])
    calls: list[tuple[int, int]] = []
    result = verify_tasks([*chosen, stub], progress=lambda done, total: calls.append((done, total)))
    assert [t.task_id for t in result.kept] == [t.task_id for t in chosen]
    [dropped] = result.dropped
    assert (dropped.task_id, dropped.reason) == ("leap-stub", "test_failure")
    assert calls and calls[-1] == (6, 6)
    # every test ran, ignored ones included (`-- --include-ignored`)
    from rust_rewards.verify.verifier import get_verifier

    bob = by_slug["bob"]
    report = get_verifier().verify(bob.reference_code, bob.hidden_tests(), raw_code=True)
    assert report.hidden_tests.passed == bob.reference_tests.count("#[test]") > 20
    assert report.hidden_tests.ignored == 0


def test_multipl_e_tasks_are_unverifiable_and_kept():
    path = BENCHMARKS / "multiple_humaneval_rs.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    tasks = load_tasks(path)
    result = verify_tasks(tasks)
    assert len(result.kept) == 155 and result.dropped == []
    assert result.stats == {"unverifiable": 155, "checked": 0}


# ----------------------------------------------------------------------------- outputs

def test_atomic_writers_replace_and_leave_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "x.json"
    write_json_atomic({"a": 1}, target)
    write_json_atomic({"a": 2, "é": "ü"}, target)
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": 2, "é": "ü"}
    write_text_atomic("hello", tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text() == "hello"
    with pytest.raises(TypeError):
        write_json_atomic({"bad": object()}, target)
    assert json.loads(target.read_text())["a"] == 2
    import pandas as pd

    write_parquet_atomic(pd.DataFrame({"x": [1, 2]}), tmp_path / "p.parquet")
    assert pq.read_table(tmp_path / "p.parquet").column("x").to_pylist() == [1, 2]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["p.parquet", "t.txt", "x.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def _check_outputs(out: Path, manifest: dict) -> list[Task]:
    for name in ("train.parquet", "eval.parquet"):
        data = (out / name).read_bytes()
        assert manifest["files"][name]["sha256"] == hashlib.sha256(data).hexdigest()
        assert manifest["files"][name]["bytes"] == len(data)
        table = pq.read_table(out / name)
        assert table.column_names == list(TASK_COLUMNS)
        assert table.num_rows == manifest["files"][name]["rows"]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    return [Task.from_row(r) for name in ("train.parquet", "eval.parquet")
            for r in pq.read_table(out / name).to_pylist()]


def test_run_pipeline_manifest_without_verification(tmp_path):
    source = write_jsonl(tmp_path / "tasks.jsonl", small_tasks())
    params = ProcessParams(source=str(source), out=str(tmp_path / "out"), verify=False, tokenizer="none",
                    eval_fraction=0.5, seed=3)
    lines: list[str] = []
    result = run_pipeline(params, log=lines.append)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest == result.manifest
    assert manifest["counts"] == {"loaded": 6, "after_dedup": 5, "after_verify": 5, "after_token_budget": 5,
                                  "train": len(result.train), "eval": len(result.eval), "unverifiable": 1}
    assert len(result.train) + len(result.eval) == 5
    assert manifest["seed"] == 3 and manifest["params"]["eval_fraction"] == 0.5
    assert manifest["source"]["source"] == str(source)
    assert [f["name"] for f in manifest["filters"]] == ["dedup", "verify", "token_budget"]
    assert manifest["filters"][0]["params"]["threshold"] == 0.9
    assert manifest["filters"][1]["params"]["enabled"] is False
    assert manifest["filters"][2]["skipped"] == "skipped: --tokenizer none"
    assert manifest["dropped"] == [{"task_id": "add-again", "stage": "dedup", "reason": "exact duplicate prompt",
                                    "detail": "same prompt as add"}]
    assert manifest["created"].endswith("+00:00")
    written = _check_outputs(tmp_path / "out", manifest)
    originals = {t.task_id: t for t in small_tasks()}
    assert sorted(t.task_id for t in written) == sorted(set(originals) - {"add-again"})
    assert all(t == replace(originals[t.task_id], source="tasks.jsonl") for t in written)
    assert any("dedup: kept 5" in line for line in lines)


@pytest.mark.slow
def test_script_end_to_end_with_real_verifier(tmp_path, tokenizer_dir):
    tasks = small_tasks()
    tasks[-1] = replace(tasks[-1], prompt="Double every number in a vector. " * 40)
    source = write_jsonl(tmp_path / "tasks.jsonl", tasks)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    budget = max(len(tokenizer.apply_chat_template(chat_messages(t.prompt), add_generation_prompt=True)
                     ["input_ids"]) for t in tasks[:-1])
    out = tmp_path / "processed"
    done = subprocess.run(
        [sys.executable, "process_data.py", "--source", str(source), "--out", str(out), "--seed", "1",
         "--eval-fraction", "0.34", "--tokenizer", str(tokenizer_dir), "--max-prompt-tokens", str(budget),
         "--workers", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "verify failures by reason" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"] == {"loaded": 6, "after_dedup": 5, "after_verify": 3, "after_token_budget": 2,
                                  "train": manifest["counts"]["train"], "eval": manifest["counts"]["eval"],
                                  "unverifiable": 1}
    assert manifest["counts"]["train"] + manifest["counts"]["eval"] == 2
    assert manifest["failures_by_reason"] == {"test_failure": 1, "compile_error": 1}
    assert manifest["compile_error_codes"] == {"E0308": 1}
    stages = {(d["task_id"], d["stage"], d["reason"]) for d in manifest["dropped"]}
    assert stages == {("add-again", "dedup", "exact duplicate prompt"),
                      ("sub-wrong", "verify", "test_failure"),
                      ("neg-broken", "verify", "compile_error"),
                      ("free", "token_budget", "prompt too long")}
    assert manifest["filters"][2]["params"]["max_prompt_tokens"] == budget
    assert manifest["params"]["workers"] == 2
    written = _check_outputs(out, manifest)
    assert sorted(t.task_id for t in written) == ["add", "max"]
    train_ids = [t.task_id for t in split_tasks([t for t in tasks if t.task_id in ("add", "max")], 0.34, 1)[0]]
    assert [r["task_id"] for r in pq.read_table(out / "train.parquet").to_pylist()] == train_ids


@pytest.mark.slow
@pytest.mark.browser
def test_notebook_form_in_the_browser(tmp_path):
    """``marimo run process_data.py``: defaults come from the command line, Process runs the pipeline,
    the verifier's progress bar, the chart and the table of dropped rows render."""
    from browser import chromium_page, free_port, page_errors, screenshot, serve, wait_for_charts

    source = write_jsonl(tmp_path / "tasks.jsonl", small_tasks())
    out = tmp_path / "ui_out"
    port = free_port()
    argv = [sys.executable, "-m", "marimo", "run", "process_data.py", "--headless", "--host", "127.0.0.1",
            "--port", str(port), "--", "--source", str(source), "--out", str(tmp_path / "wrong"),
            "--tokenizer", "none"]
    with serve(argv, port, tmp_path / "server.log") as server, chromium_page(height=2400) as page:
        page.goto(server.url)
        page.wait_for_selector("text=press Process", timeout=60_000)
        from playwright.sync_api import expect

        expect(page.get_by_text(f"process {source}")).to_have_count(1, timeout=30_000)  # may paint after the line
        page.get_by_label("out", exact=True).fill(str(out))
        page.get_by_label("out", exact=True).press("Enter")
        page.wait_for_selector(f"text=into {out}", timeout=30_000)
        page.get_by_role("button", name="Process").click()
        page.wait_for_selector("text=Dropped rows (3)", timeout=120_000)
        expect(page.get_by_text("Verifying reference solutions")).to_have_count(1, timeout=30_000)
        for text in ("exact duplicate prompt", "test_failure", "compile error (E0308)"):
            assert page.get_by_text(text).count() >= 1, text
        assert wait_for_charts(page, 1) == 1
        screenshot(page, "process_data", tmp_path)
        assert page_errors(page) == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["after_verify"] == 3 and not (tmp_path / "wrong").exists()


def test_a_split_made_with_other_settings_is_not_overwritten_without_asking(tmp_path):
    source = write_jsonl(tmp_path / "tasks.jsonl", small_tasks())
    out = tmp_path / "out"
    params = ProcessParams(source=str(source), out=str(out), verify=False, tokenizer="none", eval_fraction=0.5, seed=3)
    run_pipeline(params, log=lambda line: None)
    first = (out / "eval.parquet").read_bytes()
    run_pipeline(params, log=lambda line: None)  # the same settings make the same split: rewritten
    assert (out / "eval.parquet").read_bytes() == first
    other = dataclasses.replace(params, seed=4)
    with pytest.raises(ValueError, match=rf"--out {out} holds a split made with other settings \(seed 3 -> 4\): "
                                         "add --overwrite"):
        run_pipeline(other, log=lambda line: None)
    assert (out / "eval.parquet").read_bytes() == first
    run_pipeline(dataclasses.replace(other, overwrite=True), log=lambda line: None)
    assert json.loads((out / "manifest.json").read_text())["params"]["seed"] == 4


def test_each_dropped_task_is_named_and_a_split_that_cannot_train_is_refused(tmp_path):
    """The console names every dropped task and why (the first 20 per stage); a split with no training task is
    refused before anything is written, an empty eval split that --eval-fraction asked for is a warning."""
    source = write_jsonl(tmp_path / "tasks.jsonl", small_tasks())
    params = ProcessParams(source=str(source), out=str(tmp_path / "out"), verify=False, tokenizer="none",
                           eval_fraction=0.1, seed=3)
    lines: list[str] = []
    result = run_pipeline(params, log=lines.append)
    assert "  dropped add-again (dedup: exact duplicate prompt; same prompt as add)" in lines
    assert len(result.train) == 5 and not result.eval
    assert [line for line in lines if line.startswith("WARNING")] == [
        "WARNING: --eval-fraction 0.1: none of the 5 tasks kept falls in the eval split (each goes by a hash of its "
        "id), so eval.parquet is empty and cannot serve as held-out tasks (train.py --eval-tasks refuses it): add "
        "tasks, raise --eval-fraction, or give --eval-fraction 0"]
    with pytest.raises(ValueError, match=r"^--eval-fraction 0.95: all 5 tasks kept fall in the eval split .*none is "
                                         r"left to train on: lower --eval-fraction, or add tasks$"):
        run_pipeline(replace(params, out=str(tmp_path / "all-eval"), eval_fraction=0.95), log=lines.append)
    with pytest.raises(ValueError, match=rf"^--source {source}: all 6 tasks were dropped \(each named above\)"):
        check_split(params, 6, [], [], lines.append)
    assert not (tmp_path / "all-eval").exists()
    many = StageResult("verify", {}, [], [Dropped(f"t{i}", "verify", "compile_error") for i in range(23)])
    shown = many.dropped_lines()
    assert shown[0] == "  dropped t0 (verify: compile_error)" and len(shown) == 21
    assert shown[-1] == "  ... and 3 more (manifest.json lists every dropped task)"
