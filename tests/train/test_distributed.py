"""Multi-process training: the tiny preset under ``accelerate launch`` with 2 CPU processes (gloo), and the
shipped accelerate configs.

On CPU, ``accelerate launch --multi_gpu --num_processes 2`` starts the processes with torchrun and the tiny
preset's ``use_cpu`` makes them a gloo group (accelerate 1.15's ``--cpu --num_processes 2`` needs an MPI hostfile
and otherwise starts one process).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from accelerate.commands.config.config_args import ClusterConfig
from conftest import ROOT

from rust_rewards.cpus import cpu_share, usable_cpus

pytestmark = pytest.mark.slow  # every test here launches a whole run, a cluster or an install

CONFIGS = ROOT / "configs" / "accelerate"


def launch(out: Path, model: Path, max_steps: int) -> subprocess.CompletedProcess:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    return subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", str(ROOT / "train.py"),
                           "--preset", "tiny", "--model", str(model), "--max-steps", str(max_steps),
                           "--save-steps", "1", "--output-dir", str(out)],
                          cwd=out.parent, capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(900)
def test_two_processes_train_log_once_and_resume(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    proc = launch(out, tiny_model_dir, 1)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in (0, 1):
        assert f"process {rank}/2: verifies its own completions (local, " in proc.stdout
    assert proc.stdout.count("step 1/1 | reward") == 1  # one console line per step: the main process's
    assert len((out / "params_history.jsonl").read_text().splitlines()) == 1
    assert (out / "adapter" / "adapter_model.safetensors").is_file() and not (out / ".adapter.tmp").exists()
    assert json.loads((out / "checkpoint-1" / "trainer_state.json").read_text())["global_step"] == 1

    again = launch(out, tiny_model_dir, 2)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "changed since the first start" in again.stdout and "max_steps 1 -> 2" in again.stdout
    starts = [json.loads(line) for line in (out / "params_history.jsonl").read_text().splitlines()]
    assert [s["derived"]["resumed_from"] for s in starts] == [None, str(out / "checkpoint-1")]
    for step in (1, 2):  # the first start's step and the resumed one's
        rows = pd.read_parquet(out / "completions" / f"step_{step:06d}.parquet")
        assert len(rows) == 32 and rows["process"].value_counts().to_dict() == {0: 16, 1: 16}
        assert not rows.duplicated(["task_id", "sample"]).any()
        by_rank = rows.groupby("process")["task_id"].agg(set)
        assert not by_rank[0] & by_rank[1]  # each process verified only its own prompts' completions
        assert rows["build_ok"].notna().all() and (rows["internal_error"] == "").all()
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all(m["verify/completions"] == 32 for m in metrics)

def test_each_local_process_verifies_with_its_share_of_the_cores(monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert cpu_share() == usable_cpus()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert cpu_share() == max(1, usable_cpus() // 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(usable_cpus() * 4))
    assert cpu_share() == 1


@pytest.mark.parametrize("name, kind, stage", [("single_gpu", "NO", None), ("multi_gpu", "MULTI_GPU", None),
                                               ("zero2", "DEEPSPEED", 2), ("zero3", "DEEPSPEED", 3)])
def test_shipped_accelerate_configs_load_and_say_when_to_use_them(name, kind, stage):
    path = CONFIGS / f"{name}.yaml"
    config = ClusterConfig.from_yaml_file(str(path))  # unknown keys raise
    assert config.distributed_type.value == kind and config.mixed_precision == "bf16" and not config.use_cpu
    assert (config.deepspeed_config or {}).get("zero_stage") == stage
    comments = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert any("accelerate launch --config_file configs/accelerate/" in line for line in comments)
    assert any("Use it" in line or "default" in line for line in comments)
