"""A run folder's checkpoints and adapter: which checkpoint to resume (``find_checkpoint``), whether it already
finished (``finished_run``), and the final adapter written so that a complete one is always there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rust_rewards.atomic import replace_dir
from rust_rewards.train.config import RESUME_CHOICES


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

