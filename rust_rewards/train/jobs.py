"""Runs started from the notebook's form: ``python train.py FLAGS`` in a process of its own (``start_job``), with
the flags that give the form's params (``cli_flags``), stopped cleanly through the run folder's ``STOP`` file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rust_rewards.layout import STOP_FILE
from rust_rewards.params import flag_name
from rust_rewards.train.config import TrainParams, preset_params
from rust_rewards.train.resolve import run_dir
from rust_rewards.workspace import workspace


def cli_text(value: Any) -> str:
    """A parameter value as the command line writes it."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def cli_flags(p: TrainParams) -> list[str]:
    """The command-line flags that give ``p``: the preset, then every field that differs from it, as
    ``--flag=value`` (marimo's parser reads ``--flag -1`` as two flags and splits ``--flag a=b`` at the ``=``)."""
    base = preset_params(p.preset)
    flags = ["--preset", p.preset]
    for f in dataclasses.fields(TrainParams):
        value = getattr(p, f.name)
        if f.name != "preset" and value != getattr(base, f.name):
            flags.append(f"{flag_name(f.name)}={cli_text(value)}")
    return flags


@dataclasses.dataclass
class TrainJob:
    """A run the notebook started: ``python train.py FLAGS`` in its own process, its output in ``OUT/train.log``.

    The notebook stays responsive while it trains; ``stop`` asks it to stop cleanly (``STOP`` file: checkpoint
    kept, resumable); the run folder's ``metrics.jsonl`` shows its progress."""

    process: Any
    output_dir: Path
    max_steps: int
    log: Path

    def returncode(self) -> int | None:
        """The process's exit code, ``None`` while it runs."""
        return self.process.poll()

    def stop(self) -> None:
        """Ask a running job to stop after its current step (a checkpoint is kept)."""
        if self.returncode() is None:
            (self.output_dir / STOP_FILE).touch()

    def stopping(self) -> bool:
        """Whether it still runs after being asked to stop."""
        return self.returncode() is None and (self.output_dir / STOP_FILE).is_file()

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of its log."""
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])


def start_job(p: TrainParams) -> TrainJob:
    """Start ``python train.py`` with the flags of ``p`` in a new process."""
    import subprocess
    import sys

    out = run_dir(p)
    out.mkdir(parents=True, exist_ok=True)
    (out / STOP_FILE).unlink(missing_ok=True)
    log = out / "train.log"
    with open(log, "ab") as handle:
        process = subprocess.Popen([sys.executable, str(workspace() / "train.py"), *cli_flags(p)], cwd=workspace(),
                                   stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return TrainJob(process, out, p.max_steps, log)
