"""``python train.py FLAGS``: the flags checked and resolved once (``resolve_params``: the form's checks, then this
machine's, or the GPU machine's for ``--dry-run``), then the run or the dry run; a refusal exits with
``train.py: MESSAGE`` and no traceback."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rust_rewards.params import one_line_errors
from rust_rewards.train.checkpoints import RunFolderError, find_checkpoint
from rust_rewards.train.config import TrainParams, params_from_mapping
from rust_rewards.train.cpu_memory import NotEnoughMemory
from rust_rewards.train.dry_run import run_dry_run
from rust_rewards.train.dry_run_settings import SettingRejected
from rust_rewards.train.loop import quiet_script_logs, run_training
from rust_rewards.train.pass_rates import NoSignalError
from rust_rewards.train.resolve import GPU_MACHINE, resolve_params, run_dir
from rust_rewards.train.run_log import InfrastructureError
from rust_rewards.train.trainers import TrainTasksError


def run_command_line(values: Mapping[str, Any]) -> None:
    """Train (or ``--dry-run``) with the params of ``values`` (``mo.cli_args()``); ``--help`` prints the usage.
    Every refusal of the flags comes before torch and transformers are imported."""
    with one_line_errors("train.py"):
        given = params_from_mapping(values)
        # the dry run resolves the full run for the GPU machine (this machine's data, CUDA and model are not asked)
        params = resolve_params(given, GPU_MACHINE if given.dry_run else None,
                                tiny_model_asked=any(k.replace("_", "-") == "build-tiny-model" for k in values))
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
