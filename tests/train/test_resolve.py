"""Parameters go one way (``rust_rewards.train.resolve``): values -> checked (``validate_params``) -> resolved
(``resolve_params``, a ``ResolvedParams``), each check called in one place, the machine's checks in one place."""

from __future__ import annotations

import ast
import dataclasses

import pytest
from conftest import ROOT

from rust_rewards.train import resolve
from rust_rewards.train.config import params_from_mapping
from rust_rewards.train.resolve import GPU_MACHINE, Machine, ResolvedParams, resolve_params

CPU_MACHINE = Machine(cuda=False, vllm=False, bitsandbytes=False, files=True)


def calls_by_caller() -> dict[str, list[str]]:
    """For each function of ``train/resolve.py``, where in the package and the notebooks it is called
    (``module:function``)."""
    mine = {node.name for node in ast.parse((ROOT / "rust_rewards/train/resolve.py").read_text()).body
            if isinstance(node, ast.FunctionDef)}
    found: dict[str, list[str]] = {name: [] for name in mine}
    for path in [*(ROOT / "rust_rewards").rglob("*.py"), *ROOT.glob("*.py")]:
        tree = ast.parse(path.read_text())
        for outer in ast.walk(tree):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(outer):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name in found:
                        found[name].append(f"{path.relative_to(ROOT)}:{outer.name}")
    return found


def test_each_check_is_called_in_one_place_on_the_way_to_resolve_params():
    calls = calls_by_caller()
    checks = sorted(name for name in calls if name.startswith("check_"))
    assert {"check_data_file", "check_machine", "check_tiny_model_folder", "check_load_in_4bit"} <= set(checks)
    for name in checks:
        assert len(calls[name]) == 1, f"{name} is called from {calls[name]}"
        assert calls[name][0].startswith("rust_rewards/train/resolve.py:"), calls[name]
    # the settings' checks run in validate_params, the machine's in resolve_params: both in resolve.py
    assert sorted(calls["validate_params"]) == ["rust_rewards/train/resolve.py:resolve_params",
                                                "rust_rewards/ui/train_view.py:form_params"]  # and the form


def test_a_resolved_run_is_not_resolved_again_but_a_changed_copy_is(monkeypatch):
    seen = []
    monkeypatch.setattr(resolve, "validate_params", lambda p: seen.append(p) or p)
    p = resolve_params(params_from_mapping({"preset": "tiny"}), CPU_MACHINE)
    assert isinstance(p, ResolvedParams) and p.resolved_on == CPU_MACHINE and len(seen) == 1
    assert resolve_params(p) is p and len(seen) == 1
    assert "_resolved_on" not in dataclasses.asdict(p)  # the run folder's params.json holds the values only
    changed = dataclasses.replace(p, max_steps=3)
    assert changed.resolved_on is None
    again = resolve_params(changed, CPU_MACHINE)
    assert len(seen) == 2 and again.max_steps == 3 and again.resolved_on == CPU_MACHINE
    monkeypatch.undo()
    with pytest.raises(ValueError, match="--lr-scheduler-type"):  # a changed copy meets every check again
        resolve_params(dataclasses.replace(p, lr_scheduler_type="sometimes"), CPU_MACHINE)


def test_the_machine_fills_the_values_left_to_it(tmp_path):
    tiny = dataclasses.replace(params_from_mapping({"preset": "tiny", "output-dir": str(tmp_path / "out")}),
                               bf16=None, use_cpu=None, use_vllm=None)  # left to the machine, as the real preset does
    cpu, gpu = resolve_params(tiny, CPU_MACHINE), resolve_params(tiny, GPU_MACHINE)
    assert (cpu.bf16, cpu.use_cpu, cpu.use_vllm) == (False, True, False)
    assert (gpu.bf16, gpu.use_cpu, gpu.use_vllm) == (True, False, True)
    four_bit = resolve_params(dataclasses.replace(tiny, load_in_4bit=True), GPU_MACHINE)
    assert four_bit.use_vllm is False  # vLLM is off for a 4-bit base unless asked (and then refused)
    assert cpu.output_dir == gpu.output_dir == str(tmp_path / "out")


def test_the_machines_files_are_checked_only_where_they_are_the_runs(tmp_path):
    missing = params_from_mapping({"preset": "tiny", "data": str(tmp_path / "none.jsonl"),
                                   "output-dir": str(tmp_path / "out")})
    with pytest.raises(ValueError, match="^--data .*none.jsonl: "):
        resolve_params(missing, CPU_MACHINE)
    assert resolve_params(missing, GPU_MACHINE).data == str(tmp_path / "none.jsonl")  # the GPU machine's file
    no_model = params_from_mapping({"preset": "real", "model": str(tmp_path / "nothing"),
                                    "data": "qwen3-rust-finetune/easy_tasks.jsonl"})
    with pytest.raises(ValueError, match="^--model .*nothing: no model folder there"):
        resolve_params(no_model, CPU_MACHINE)


def test_the_machine_is_asked_for_what_the_settings_need():
    four_bit = params_from_mapping({"preset": "tiny", "load-in-4bit": True})
    with pytest.raises(ValueError, match="^--load-in-4bit needs a CUDA GPU"):
        resolve_params(four_bit, CPU_MACHINE)
    with pytest.raises(ValueError, match="^--load-in-4bit needs bitsandbytes"):
        resolve_params(four_bit, dataclasses.replace(CPU_MACHINE, cuda=True))
    with pytest.raises(ValueError, match=r"^--use-vllm true needs the vllm package"):
        resolve_params(params_from_mapping({"preset": "tiny", "use-vllm": True}), CPU_MACHINE)


def test_the_tiny_model_folder_check_needs_the_command_lines_answer(tmp_path):
    typo = params_from_mapping({"preset": "tiny", "model": str(tmp_path / "typo")})
    with pytest.raises(ValueError, match="no such folder .*add --build-tiny-model true"):
        resolve_params(typo, CPU_MACHINE, tiny_model_asked=False)
    assert resolve_params(typo, CPU_MACHINE, tiny_model_asked=True).model == str(tmp_path / "typo")
    assert resolve_params(typo, CPU_MACHINE).model == str(tmp_path / "typo")  # no command line: not asked
