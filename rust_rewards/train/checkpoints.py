"""A run folder's run, checkpoints and adapter: whether a start may use the folder (``claim_run_folder``: one run
per folder, another one moved aside by ``move_aside``), which checkpoint to resume (``find_checkpoint``), whether it
already finished (``finished_run``), and the final adapter written so that a complete one is always there."""

from __future__ import annotations

import datetime
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from rust_rewards.atomic import replace_dir
from rust_rewards.layout import ADAPTER_DIR, CHECKPOINT_GLOB, PARAMS_FILE, STEP_GLOB, RunFolder
from rust_rewards.params import flag_name
from rust_rewards.runs.records import RunLogError, load_params, param_changes
from rust_rewards.train.config import RESUMABLE, RESUME_CHOICES

Claim = Literal["new", "resume", "restart", "move"]
"""What a start does with its run folder (``claim_run_folder``)."""
NAMED_CHANGES = 3
"""Differing settings a refusal names; the rest are counted."""


class RunFolderError(ValueError):
    """The run folder holds another run (another stage, other settings): a mistake of the user's, one line."""


def trained_something(out: Path) -> bool:
    """Whether the run folder holds what a training step writes: a checkpoint, metrics, completions, an adapter."""
    run = RunFolder(out)
    return (any(out.glob(CHECKPOINT_GLOB)) or (out / ADAPTER_DIR).exists() or any(run.completions.glob(STEP_GLOB))
            or (run.metrics.is_file() and run.metrics.stat().st_size > 0))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2 - 2]}...{text[-(limit // 2 - 2):]}"


def claim_run_folder(out: Path, record: Mapping[str, Any], overwrite: bool) -> Claim:
    """What a start with the resolved settings ``record`` does with its run folder ``out`` (one run per folder):
    ``"new"`` (no run there), ``"resume"`` (its run, whose settings differ at most in ``RESUMABLE`` ones),
    ``"restart"`` (a run of this stage with other settings that trained nothing yet: this start's settings replace
    its params.json) or ``"move"`` (another run and ``overwrite``: ``move_aside`` it first). Another run without
    ``overwrite`` raises ``RunFolderError`` naming its stage or the settings that differ."""
    try:
        saved = load_params(out)
    except RunLogError as err:
        raise RunFolderError(f"--output-dir {out}: {err}") from None
    if not saved:
        return "new"
    first = {"stage": "grpo", **saved}  # runs recorded before the stage existed were GRPO runs
    changes = {k: v for k, v in param_changes(first, dict(record)).items() if k not in RESUMABLE}
    if not changes:
        return "resume"
    if "stage" not in changes and not trained_something(out):
        return "restart"
    if overwrite:
        return "move"
    aside = f"add --overwrite to move it aside (to {out.name}.old-<time>) and start anew"
    if "stage" in changes:
        raise RunFolderError(f"--output-dir {out} holds a {first['stage']} run ({PARAMS_FILE}): the {record['stage']} "
                             f"stage needs its own --output-dir (it would resume the other stage's checkpoints), or "
                             f"{aside}")
    named = ", ".join(f"{flag_name(k)} {_short(old)} -> {_short(new)}"
                      for k, (old, new) in list(changes.items())[:NAMED_CHANGES])
    more = f" and {len(changes) - NAMED_CHANGES} more" if len(changes) > NAMED_CHANGES else ""
    raise RunFolderError(f"--output-dir {out} holds another run, with other settings ({named}{more}; its "
                         f"{PARAMS_FILE}): {aside}, choose another --output-dir, or resume it with its own settings "
                         "(a resume may raise --max-steps)")


def move_aside(out: Path) -> Path:
    """Rename the run folder ``out`` to ``<out>.old-<local time>`` beside it (never deleted) and start ``out`` empty;
    a file this process writes its output to (the form's ``train.log``) stays in ``out``. Returns the new name."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    aside, n = out.with_name(f"{out.name}.old-{stamp}"), 1
    while aside.exists():
        n += 1
        aside = out.with_name(f"{out.name}.old-{stamp}-{n}")
    out.rename(aside)
    out.mkdir()
    for entry in aside.iterdir():
        if entry.is_file() and _own_output(entry):
            entry.rename(out / entry.name)
    return aside


def _own_output(path: Path) -> bool:
    """Whether this process's stdout or stderr is the file ``path``."""
    for fd in (1, 2):
        try:
            if os.path.samestat(path.stat(), os.fstat(fd)):
                return True
        except OSError:
            continue
    return False


def find_checkpoint(output_dir: str | Path, resume: str) -> str | None:
    """The checkpoint to resume from: the last one in ``output_dir`` for auto/yes, or an explicit folder.

    ``yes`` without any checkpoint and ``no`` with checkpoints present are errors (a fresh run must
    not mix its logs with an older run's).
    """
    from transformers.trainer_utils import get_last_checkpoint

    if resume not in RESUME_CHOICES:
        return resume
    last = get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None
    if resume == "yes" and last is None:
        raise FileNotFoundError(f"--resume: no checkpoint-N folder in {output_dir}")
    if resume == "no" and last is not None:
        raise FileExistsError(f"{output_dir} already holds {Path(last).name}: resume it (default) or choose "
                              "another --output-dir")
    return last


def checkpoint_step(checkpoint: str | None) -> int:
    """The step a run resumed from ``checkpoint`` starts after (0 without one)."""
    if checkpoint is None:
        return 0
    state_file = Path(checkpoint) / "trainer_state.json"
    return int(json.loads(state_file.read_text(encoding="utf-8")).get("global_step", 0)) if state_file.is_file() else 0


def finished_run(checkpoint: str | None, max_steps: int) -> dict[str, Any] | None:
    """The checkpoint's trainer state when it already reached the target step count, else None.

    The target is ``max_steps`` when > 0, else the step count the checkpointed run planned (epochs).
    Resuming a finished run would otherwise train one step past the target.
    """
    if checkpoint is None:
        return None
    state_file = Path(checkpoint) / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{checkpoint}: no trainer_state.json, not a Trainer checkpoint")
    state = json.loads(state_file.read_text(encoding="utf-8"))
    target = max_steps if max_steps > 0 else int(state.get("max_steps") or 0)
    return state if target > 0 and int(state.get("global_step", 0)) >= target else None


def adapter_from_checkpoint(checkpoint: Path, target: Path) -> Path:
    """Copy a checkpoint's adapter and tokenizer files (no optimizer state) to ``target``; an adapter
    already there is swapped out atomically (``replace_dir``), never deleted first."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(checkpoint, tmp, ignore=shutil.ignore_patterns(
        "optimizer.pt", "scheduler.pt", "rng_state*.pth", "trainer_state.json", "training_args.bin"))
    return replace_dir(tmp, target)


def save_adapter(trainer: Any, target: Path) -> Path:
    """Save the final LoRA adapter (and tokenizer) to a temporary sibling folder, then swap it in
    atomically (``replace_dir``): there is always a complete adapter at ``target`` once there was one."""
    tmp = target.with_name(f".{target.name}.tmp")
    accelerator = trainer.accelerator
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))  # every process takes part (sharded weights), the main one writes
    if accelerator.is_main_process:
        replace_dir(tmp, target)
    accelerator.wait_for_everyone()
    return target

