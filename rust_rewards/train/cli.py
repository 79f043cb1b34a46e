"""``python train.py FLAGS``: the flags checked as the form checks them, then the run or the dry run; a refusal
exits with ``train.py: MESSAGE`` and no traceback."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rust_rewards.data.importers import is_local_source, task_file_problem
from rust_rewards.data.pipeline import process_command
from rust_rewards.models.source import check_model_source
from rust_rewards.params import one_line_errors
from rust_rewards.train.checkpoints import RunFolderError, find_checkpoint
from rust_rewards.train.config import TOOL_MODEL_SUFFIX, TrainParams, params_from_mapping, preset_params
from rust_rewards.train.cpu_memory import NotEnoughMemory
from rust_rewards.train.dry_run import run_dry_run
from rust_rewards.train.dry_run_settings import SettingRejected
from rust_rewards.train.loop import quiet_script_logs, run_training
from rust_rewards.train.pass_rates import NoSignalError
from rust_rewards.train.resolve import check_load_in_4bit, run_dir, validate_params
from rust_rewards.train.run_log import InfrastructureError
from rust_rewards.train.trainers import TrainTasksError
from rust_rewards.workspace import find_path


def check_tiny_model_folder(params: TrainParams, asked: bool) -> None:
    """The tiny preset builds its model where the preset puts it; a ``--model`` folder that does not exist anywhere
    else is a mistake (a typo would train a new model there) unless ``--build-tiny-model true`` was ``asked``."""
    own = preset_params(params.preset).model
    if (params.build_tiny_model and not asked and params.model not in (own, own + TOOL_MODEL_SUFFIX)
            and find_path(params.model) is None):
        raise ValueError(f"--model {params.model}: no such folder (the {params.preset} preset builds its model only at "
                         f"{own}; add --build-tiny-model true to build one at {params.model})")


def check_data_file(data: str) -> None:
    """A ``--data`` task file that is missing or cannot be opened: ``ValueError`` naming it (and the command that makes
    a missing process_data.py split), before anything loads; a Hugging Face dataset name is asked by the run."""
    found = find_path(data) or data
    problem = task_file_problem(found) if is_local_source(found) else None
    if problem is not None:
        make = "" if Path(found).exists() else process_command(data)
        raise ValueError(f"--data {data}: {problem}" + (f" (make it with `{make}`)" if make else ""))


def run_command_line(values: Mapping[str, Any]) -> None:
    """Train (or ``--dry-run``) with the params of ``values`` (``mo.cli_args()``); ``--help`` prints the usage.
    Every refusal of the flags comes before torch and transformers are imported."""
    with one_line_errors("train.py"):
        params = validate_params(params_from_mapping(values))
        check_tiny_model_folder(params, asked=any(k.replace("_", "-") == "build-tiny-model" for k in values))
        if not params.dry_run:  # this machine's data, CUDA, bitsandbytes and model (the dry run: the GPU machine's)
            check_data_file(params.data)
            check_load_in_4bit(params)
            if not params.build_tiny_model:
                check_model_source(params.model)
    quiet_script_logs()
    with one_line_errors("train.py", (SettingRejected, TrainTasksError, RunFolderError, NotEnoughMemory)):
        try:
            (run_dry_run if params.dry_run else run_training)(params)
        except (InfrastructureError, NoSignalError) as err:  # the run started and stopped: exit 1
            raise SystemExit(f"train.py: {err}") from None
        except KeyboardInterrupt:  # Ctrl-C: one line, what is kept, how to go on; the shell's code for SIGINT
            print(interrupted_line(params), file=sys.stderr, flush=True)
            raise SystemExit(130) from None


def interrupted_line(params: TrainParams) -> str:
    """What a run stopped by Ctrl-C says: the checkpoint it keeps and how to resume."""
    last = find_checkpoint(run_dir(params), "auto")
    if last is None:
        return "train.py: stopped by Ctrl-C before the first checkpoint; the same command starts the run over"
    return f"train.py: stopped by Ctrl-C; {Path(last).name} kept; run the same command to resume from it"
