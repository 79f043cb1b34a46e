"""A mistake on a notebook's command line is refused in one line, exit 2, before torch, transformers or TRL are
imported (so within seconds: the refusal never waits for them); an unknown flag names the closest known ones. Each
script runs with ``-X importtime``, whose report names every module the process imported."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT

from rust_rewards.train.cli import interrupted_line, run_command_line
from rust_rewards.train.config import params_from_mapping

HEAVY = re.compile(r"^import time:.*\|\s+(torch|transformers|trl|peft|accelerate|datasets)$", re.MULTILINE)


def refused(argv: list[str]) -> str:
    """The one line a notebook run as ``python -X importtime ARGV`` refuses with, after checking it exits 2 without a
    traceback and imports none of ``HEAVY``."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, lines[-20:]
    assert HEAVY.findall(proc.stderr) == [], lines
    return lines[-1]


@pytest.mark.parametrize("argv, line", [
    (["train.py", "--max-step", "3"],
     "train.py: unknown parameter --max-step (did you mean --max-steps or --save-steps?)"),
    (["train.py", "--data", "no/such.jsonl"], "train.py: --data no/such.jsonl: task file not found"),
    (["eval.py", "--predictoins", "p.parquet"],
     "eval.py: unknown parameter --predictoins (did you mean --predictions?)"),
    (["inference.py", "--modle", "m"], "inference.py: unknown parameter --modle (did you mean --model?)"),
    (["inference.py", "--tasks", "no/such.jsonl"], "inference.py: --tasks: no such file: no/such.jsonl"),
    (["process_data.py", "--no-verfy"],
     "process_data.py: unknown parameter --no-verfy (did you mean --no-verify or --verify?)"),
    (["viz.py", "--smoothin", "0.5"], "viz.py: unknown parameter --smoothin (did you mean --smoothing?)"),
])
def test_a_mistake_is_refused_before_any_heavy_import(argv, line):
    assert refused(argv) == line


def test_an_unknown_flag_far_from_every_known_one_points_to_help(capsys):
    with pytest.raises(SystemExit) as stop:
        run_command_line({"bogus": "1"})
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == f"train.py: unknown parameter --bogus (--help lists all " \
                                              f"{len(params_from_mapping({}).__dataclass_fields__)})"


def data_refusal(data: str, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        run_command_line({"preset": "tiny", "data": data})
    assert stop.value.code == 2
    return capsys.readouterr().err.strip()


def test_a_missing_processed_split_names_the_command_that_makes_it(tmp_path, capsys):
    data = tmp_path / "processed" / "train.parquet"
    assert data_refusal(str(data), capsys) == (
        f"train.py: --data {data}: task file not found (make it with `python process_data.py --source FILE.jsonl "
        f"--out {tmp_path / 'processed'}`)")


def test_a_folder_or_another_file_type_is_no_task_file(tmp_path, capsys):
    (tmp_path / "tasks.jsonl").mkdir()
    (tmp_path / "tasks.csv").write_text("a,b\n")
    assert data_refusal(str(tmp_path / "tasks.jsonl"), capsys) == \
        f"train.py: --data {tmp_path / 'tasks.jsonl'}: a folder, not a task file"
    assert data_refusal(str(tmp_path / "tasks.csv"), capsys) == \
        f"train.py: --data {tmp_path / 'tasks.csv'}: unsupported file type (expected .jsonl, .json, .parquet)"


def test_ctrl_c_says_what_the_same_command_does_next(tmp_path):
    params = params_from_mapping({"preset": "tiny", "output-dir": str(tmp_path / "run")})
    assert interrupted_line(params) == ("train.py: stopped by Ctrl-C before the first checkpoint; the same command "
                                        "starts the run over")
    (tmp_path / "run" / "checkpoint-3").mkdir(parents=True)
    assert interrupted_line(params) == "train.py: stopped by Ctrl-C; checkpoint-3 kept; run the same command to " \
                                       "resume from it"
