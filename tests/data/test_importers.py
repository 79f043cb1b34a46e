"""Task importers: the real benchmark files, every row format, remote sources offline, validation errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT

from rust_rewards.data.importers import (
    TaskDataError,
    TaskSourceError,
    detect_format,
    load_tasks,
    unit_tests_text,
)
from rust_rewards.tasks import TASK_COLUMNS, HiddenTests, Task

BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
EXERCISM = BENCHMARKS / "exercism_rust.jsonl"
MULTIPL_E = BENCHMARKS / "multiple_humaneval_rs.jsonl"

MOD_TESTS = """#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_add() {
        assert_eq!(add(2, 3), 5);
    }
}
"""


def benchmark(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- real benchmark files

def test_exercism_benchmark_maps_to_integration_tasks():
    tasks = load_tasks(benchmark(EXERCISM))
    assert len(tasks) == 95
    assert {t.test_shape for t in tasks} == {"integration"}
    assert {t.edition for t in tasks} == {"2024"}
    assert [t.task_id for t in tasks if t.test_release] == ["exercism/rust/palindrome-products"]
    raw = {json.loads(line)["task_id"]: json.loads(line) for line in EXERCISM.read_text().splitlines()}
    for task in tasks:
        row = raw[task.task_id]
        assert task.crate_name == row["crate_ident"]
        assert task.reference_code == row["reference_solution"]
        assert task.reference_tests == row["test_files"][row["main_test_file"]]
        assert row["stub"].strip() in task.prompt
        assert row["instructions"].strip() in task.prompt
        assert f"crate `{task.crate_name}`" in task.prompt
        assert task.source == "exercism/rust"
    by_slug = {t.task_id.rsplit("/", 1)[1]: t for t in tasks}
    dll = by_slug["doubly-linked-list"]
    assert set(dll.extra_files) == {"src/pre_implemented.rs", "tests/step_4_leak_test_1.rs",
                                    "tests/step_4_leak_test_2.rs"}
    assert "src/pre_implemented.rs" in dll.prompt
    assert set(by_slug["forth"].extra_files) == {"tests/alloc_attack.rs"}
    assert by_slug["accumulate"].extra_files == {}
    assert "# Instructions append" in by_slug["accumulate"].prompt
    hidden = by_slug["palindrome-products"].hidden_tests()
    assert isinstance(hidden, HiddenTests)
    assert (hidden.shape, hidden.crate_name, hidden.edition, hidden.release) == (
        "integration", "palindrome_products", "2024", True)


def test_multipl_e_benchmark_maps_to_main_tasks_without_reference():
    tasks = load_tasks(benchmark(MULTIPL_E))
    assert len(tasks) == 155
    assert {t.test_shape for t in tasks} == {"main"}
    assert all(t.reference_code == "" for t in tasks)
    raw = {json.loads(line)["task_id"]: json.loads(line) for line in MULTIPL_E.read_text().splitlines()}
    for task in tasks:
        row = raw[task.task_id]
        assert task.reference_tests.startswith("fn main() {")
        assert row["tests"].lstrip().startswith("}")
        assert task.reference_tests.strip() == row["tests"].lstrip()[1:].strip()
        signature = row["prompt"].rstrip()[:-1].rstrip()
        assert signature in task.prompt
        assert f"`{row['entry_point']}`" in task.prompt
        assert task.edition == "2021"
    first = tasks[0]
    assert first.task_id == "HumanEval_0_has_close_elements"
    assert "fn has_close_elements(numbers: Vec<f64>, threshold: f64) -> bool\n```" in first.prompt
    assert "/// Check if in given vector of numbers" in first.prompt
    with_use = next(t for t in tasks if "use std::collections::HashMap;" in t.prompt)
    assert "keep any `use` lines" in with_use.prompt
    assert first.hidden_tests() == HiddenTests(text=first.reference_tests, shape="main", prompt=first.prompt)


# ----------------------------------------------------------------------------- formats

def test_canonical_roundtrip_jsonl_and_parquet(tmp_path):
    tasks = [
        Task("t1", "Write `pub fn add(a: i32, b: i32) -> i32`.", "pub fn add(a: i32, b: i32) -> i32 { a + b }",
             MOD_TESTS, "unit", source="mine"),
        Task("t2", "Solve it.", test_shape="none", source="mine"),
        Task("t3", "Exercise.", "pub fn f() {}", "use ex::*;\n#[test]\nfn t() { f(); }", "integration",
             crate_name="ex", edition="2024", extra_files={"tests/more.rs": "// more\n"}, test_release=True,
             source="mine"),
    ]
    rows = [t.to_row() for t in tasks]
    assert set(rows[0]) == set(TASK_COLUMNS)
    jsonl = write_jsonl(tmp_path / "tasks.jsonl", rows)
    parquet = tmp_path / "tasks.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    assert load_tasks(jsonl) == tasks
    assert load_tasks(parquet) == tasks
    assert load_tasks(str(parquet)) == tasks


def test_canonical_row_without_source_gets_the_file_name(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", [{"task_id": 7, "prompt": "Do it.", "test_shape": "none"}])
    [task] = load_tasks(path)
    assert (task.task_id, task.source, task.crate_name, task.edition) == ("7", "mine.jsonl", "solution", "2021")


def test_json_array_file(tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([{"task_id": "a", "prompt": "Do a.", "test_shape": "none"}]))
    assert [t.task_id for t in load_tasks(path)] == ["a"]


def test_oxen_parquet_with_module_tests(tmp_path):
    path = tmp_path / "cargo_test_passed_eval.parquet"
    pq.write_table(pa.table({
        "task_id": [11, 12],
        "rust_prompt": ["Write a function to add two numbers.", "Write a function to negate a number."],
        "rust_code": ["```rust\npub fn add(a: i32, b: i32) -> i32 { a + b }\n```",
                      "pub fn neg(a: i32) -> i32 { -a }"],
        "rust_test_list": [MOD_TESTS, ""],
    }), path)
    first, second = load_tasks(path)
    assert first.task_id == "11"
    assert first.prompt == "Write a function to add two numbers."
    assert first.reference_code == "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"
    assert first.reference_tests == MOD_TESTS.strip()
    assert first.test_shape == "unit"
    assert first.hidden_tests() == HiddenTests(text=MOD_TESTS.strip(), shape="unit",
                                               reference=first.reference_code, prompt=first.prompt)
    assert (second.test_shape, second.reference_tests, second.hidden_tests()) == ("none", "", None)
    assert first.source == "cargo_test_passed_eval.parquet"


def test_oxen_parquet_with_list_of_assertions_and_fns(tmp_path):
    path = tmp_path / "rust.parquet"
    pq.write_table(pa.table({
        "task_id": ["a", "b"],
        "rust_prompt": ["Add.", "Sub."],
        "rust_code": ["pub fn add(a: i32, b: i32) -> i32 { a + b }", "pub fn sub(a: i32, b: i32) -> i32 { a - b }"],
        "rust_test_list": [["assert_eq!(add(1, 2), 3)", "assert_eq!(add(0, 0), 0);"],
                           ["#[test]\nfn s() { assert_eq!(sub(3, 1), 2); }"]],
    }), path)
    first, second = load_tasks(path)
    assert first.reference_tests == (
        "#[test]\nfn reference_tests() {\n    assert_eq!(add(1, 2), 3);\n    assert_eq!(add(0, 0), 0);\n}")
    assert second.reference_tests == "#[test]\nfn s() { assert_eq!(sub(3, 1), 2); }"
    assert {first.test_shape, second.test_shape} == {"unit"}


def test_unit_tests_text_accepts_a_json_list_string():
    assert unit_tests_text('["assert!(f())"]') == "#[test]\nfn reference_tests() {\n    assert!(f());\n}"
    assert unit_tests_text(None) == "" and unit_tests_text("  ") == ""


def test_hf_style_prompt_dataset_rows(tmp_path):
    rows = [
        {"question": "Reverse a string.", "solution": "Here:\n```rust\npub fn rev(s: &str) -> String "
         "{ s.chars().rev().collect() }\n```\nDone.", "test_list": ['assert_eq!(rev("ab"), "ba")']},
        {"question": "Print hello.", "solution": None, "test_list": None},
        {"question": "Main style.", "solution": "fn f() -> i32 { 1 }",
         "test_list": "fn main() { assert_eq!(f(), 1); }"},
    ]
    tasks = load_tasks(write_jsonl(tmp_path / "hf.jsonl", rows))
    assert [t.task_id for t in tasks] == ["hf.jsonl/1", "hf.jsonl/2", "hf.jsonl/3"]
    assert tasks[0].reference_code == "pub fn rev(s: &str) -> String { s.chars().rev().collect() }\n"
    assert tasks[0].reference_tests == (
        '#[test]\nfn reference_tests() {\n    assert_eq!(rev("ab"), "ba");\n}')
    assert [t.test_shape for t in tasks] == ["unit", "none", "main"]
    parquet = tmp_path / "hf.parquet"
    pq.write_table(pa.table({"id": ["p1"], "instruction": ["Sum a slice."], "problem": ["ignored"]}), parquet)
    [task] = load_tasks(parquet)
    assert (task.task_id, task.prompt, task.test_shape) == ("p1", "Sum a slice.", "none")


def test_detect_format_order():
    assert detect_format(TASK_COLUMNS).name == "canonical"
    assert detect_format(["task_id", "prompt", "tests", "stop_tokens"]).name == "multipl-e"
    assert detect_format(["task_id", "prompt", "tests"]).name == "prompt"
    assert detect_format(["task_id", "rust_prompt", "rust_code"]).name == "oxen"
    assert detect_format(["task_id", "instructions", "stub", "test_files"]).name == "exercism"
    assert detect_format(["text", "label"]) is None


# ----------------------------------------------------------------------------- sources offline

def _offline_env(tmp_path: Path) -> dict[str, str]:
    proxy = "http://127.0.0.1:9"
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
            "OXEN_CONFIG_DIR": str(tmp_path / "oxen"), "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy,
            "ALL_PROXY": proxy, "NO_PROXY": "", "PYTHONPATH": str(ROOT)}


def _load_in_subprocess(tmp_path: Path, call: str) -> str:
    code = (
        "from rust_rewards.data.importers import TaskSourceError, load_tasks\n"
        f"try:\n    {call}\nexcept TaskSourceError as err:\n    print('ERROR:', err)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=_offline_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("ERROR:")]
    assert len(lines) == 1, done.stdout
    return lines[0]


def test_hf_dataset_offline_gives_one_clear_error(tmp_path):
    line = _load_in_subprocess(tmp_path, "load_tasks('ljt019/rust-17000', split='train')")
    assert "could not load Hugging Face dataset 'ljt019/rust-17000' split 'train' (offline?)" in line


def test_oxen_offline_gives_one_clear_error(tmp_path):
    line = _load_in_subprocess(tmp_path, "load_tasks('cargo_test_passed_eval.parquet', oxen_repo='ox/Rust')")
    assert "could not download 'cargo_test_passed_eval.parquet' from Oxen repo 'ox/Rust' (offline?)" in line


def test_missing_local_file_is_a_source_error(tmp_path):
    with pytest.raises(TaskSourceError, match="task file not found"):
        load_tasks(tmp_path / "nope.jsonl")
    with pytest.raises(TaskSourceError, match="unsupported file type"):
        load_tasks(tmp_path)


# ----------------------------------------------------------------------------- validation

def test_validation_names_file_row_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = {"task_id": "ok", "prompt": "Fine.", "test_shape": "none"}
    lines = [
        json.dumps(good),
        json.dumps({"task_id": "empty", "prompt": "   ", "test_shape": "none"}),
        "",
        json.dumps({"task_id": "ok", "prompt": "Again.", "test_shape": "none"}),
        json.dumps({"task_id": "shape", "prompt": "P.", "test_shape": "doc"}),
        json.dumps({"task_id": "notests", "prompt": "P.", "test_shape": "unit"}),
        json.dumps({"task_id": "files", "prompt": "P.", "test_shape": "none",
                    "extra_files": {"../escape.rs": "x"}}),
        json.dumps({"task_id": "ed", "prompt": "P.", "test_shape": "none", "edition": "2020"}),
        json.dumps({"task_id": "crate", "prompt": "P.", "test_shape": "none", "crate_name": "my-crate"}),
        "{not json",
    ]
    raw = ("\n".join(lines) + "\n").encode() + b'{"task_id": "bytes", "prompt": "caf\xe9", "test_shape": "none"}\n'
    path.write_bytes(raw)
    with pytest.raises(TaskDataError) as info:
        load_tasks(path)
    assert isinstance(info.value, ValueError)
    found = {(i.row, i.field) for i in info.value.issues}
    assert found == {(10, None)}, "a JSON syntax error stops before field checks"
    message = str(info.value)
    assert "bad.jsonl row 10: invalid JSON" in message

    path.write_bytes(raw.replace(b"{not json\n", b""))
    with pytest.raises(TaskDataError) as info:
        load_tasks(path)
    found = {(i.row, i.field) for i in info.value.issues}
    assert found == {(2, "prompt"), (4, "task_id"), (5, "test_shape"), (6, "reference_tests"),
                     (7, "extra_files"), (8, "edition"), (9, "crate_name"), (10, "prompt")}
    message = str(info.value)
    assert "bad.jsonl row 2, field 'prompt': empty" in message
    assert "bad.jsonl row 4, field 'task_id': duplicate id 'ok' (first at row 1)" in message
    assert "bad.jsonl row 10, field 'prompt': not valid UTF-8" in message
    assert message.startswith("8 problem(s) in task data")


def test_validation_of_parquet_bytes_and_missing_columns(tmp_path):
    path = tmp_path / "bin.parquet"
    pq.write_table(pa.table({"task_id": ["a", "b"], "rust_prompt": [b"fine", b"bad \xff byte"],
                             "rust_code": ["", ""]}), path)
    with pytest.raises(TaskDataError) as info:
        load_tasks(path)
    assert [(i.file, i.row, i.field) for i in info.value.issues] == [("bin.parquet", 2, "rust_prompt")]
    assert "not valid UTF-8" in str(info.value)

    missing = tmp_path / "noid.parquet"
    pq.write_table(pa.table({"rust_prompt": ["x"]}), missing)
    with pytest.raises(TaskDataError, match=r"noid.parquet, field 'task_id': required column missing"):
        load_tasks(missing)

    unknown = write_jsonl(tmp_path / "unknown.jsonl", [{"text": "hello"}])
    with pytest.raises(TaskDataError, match=r"unknown row format; columns found: \['text'\]"):
        load_tasks(unknown)


def test_multipl_e_tests_must_close_the_function(tmp_path):
    path = write_jsonl(tmp_path / "mpe.jsonl", [
        {"task_id": "x", "prompt": "fn f() -> i32 {\n", "tests": "fn main() {}", "entry_point": "f"},
    ])
    with pytest.raises(TaskDataError, match=r"mpe.jsonl row 1, field 'tests': expected MultiPL-E tests"):
        load_tasks(path)
