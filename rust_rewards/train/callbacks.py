"""The transformers ``TrainerCallback``s of a run: they write what ``rust_rewards.train.run_log`` computes, report
progress, and stop training cleanly on request.

Kept apart from ``train_logging`` so that a notebook can show its form before transformers is imported.
``RunLogCallback`` appends one JSON line per logged step to ``metrics.jsonl`` and writes the step's completions
parquet; ``MetricsFileCallback`` does the first for the supervised stage; ``ProgressCallback`` calls a progress
function; ``StopFileCallback`` ends training at the end of the current step, with a checkpoint, when the file
``OUT/STOP`` appears (the notebook's Stop button writes it; ``touch OUT/STOP`` works from a shell);
``ModelCardCallback`` writes the run's own ``README.md`` over the stock card TRL writes with every checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from transformers import TrainerCallback

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.layout import RunFolder
from rust_rewards.rewards.cargo_tool import ToolUse, tool_use
from rust_rewards.train.hints import HintSteps
from rust_rewards.train.model_card import RunDescription, write_model_card
from rust_rewards.train.progress import ProgressLine
from rust_rewards.train.run_log import (
    InfraGuard,
    ReportsFor,
    RewardRecorder,
    StepHealth,
    append_metrics,
    completion_rows,
    gather_across_processes,
)
from rust_rewards.verify.verifier import Verifier, get_verifier


class MetricsFileCallback(TrainerCallback):
    """``metrics.jsonl`` for the supervised stage (loss, token accuracy, learning rate: no rewards to count)."""

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero and "train_runtime" not in logs:
            append_metrics(self.out_dir, state.global_step, logs)


class RunLogCallback(TrainerCallback):
    """Writes ``metrics.jsonl`` on every log and the step's completions parquet at every step end.

    Every step's reports are counted (``StepHealth``), added to the next log line and shown to the
    ``guard``; then ``verifier`` forgets its internal-error reports (``forget``), so the next step
    verifies those completions again while this step's consumers all saw the same report.
    """

    def __init__(self, out_dir: str | Path, recorder: RewardRecorder, weights: dict[str, float],
                 reports_for: ReportsFor, completions_every: int = 1, guard: InfraGuard | None = None,
                 feedback: bool = False, tests_asked: bool = True, verifier: Verifier | None = None,
                 hints: HintSteps | None = None) -> None:
        self.verifier = verifier or get_verifier()
        self.out_dir = Path(out_dir)
        self.tests_asked = tests_asked
        self.recorder = recorder
        self.weights = weights
        self.reports_for = reports_for
        self.completions_every = completions_every
        self.guard = guard
        self.forget = self.verifier.forget_failures
        self._window = StepHealth(0)
        self.feedback = feedback
        self._tools = ToolUse()
        self.hints = hints
        self._hint_metrics: dict[str, float] = {}

    def on_train_begin(self, args, state, control, **kwargs):
        if self.hints is not None:
            self.hints.step = state.global_step + 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero or "train_runtime" in logs:
            return
        if logs.get("reward_time") is not None and logs.get("step_time"):
            logs["reward_share"] = logs["reward_time"] / logs["step_time"]
        if logs.get("generation_time") is not None and logs.get("step_time"):
            logs["generation_share"] = logs["generation_time"] / logs["step_time"]
        logs.update(self._window.metrics())
        self._window = StepHealth(state.global_step)
        if self.feedback:
            logs.update(self._tools.metrics())
            self._tools = ToolUse()
        logs.update(self._hint_metrics)
        append_metrics(self.out_dir, state.global_step, logs)

    def on_step_end(self, args, state, control, **kwargs):
        batches = self.recorder.pop_batches()
        reports = [self.reports_for(batch.completions, batch.columns) for batch in batches]
        local = StepHealth.of(state.global_step, [r for batch_reports in reports for r in batch_reports])
        write = self.completions_every > 0 and state.global_step % self.completions_every == 0
        frames = [completion_rows(state.global_step, batch, self.weights, batch_reports, self.tests_asked)
                  for batch, batch_reports in zip(batches, reports, strict=True)] if write else []
        tools = sum((tool_use(b.completions, r, self.verifier) for b, r in zip(batches, reports, strict=True)),
                    ToolUse()) if self.feedback else ToolUse()
        outcomes = [(str(task), bool(r.hidden_ok), batch.weighted(i, self.weights) or 0.0)
                    for batch, batch_reports in zip(batches, reports, strict=True)
                    for i, (task, r) in enumerate(zip(batch.columns.get("task_id") or [], batch_reports, strict=True))
                    ] if self.hints is not None else []
        gathered = gather_across_processes((local, frames, tools, outcomes))
        health = sum((h for h, _, _, _ in gathered[1:]), gathered[0][0])
        self._window = self._window + health
        self._tools = sum((t for _, _, t, _ in gathered), self._tools)
        if self.hints is not None:  # every process moves the curriculum alike: its prompts are read locally
            self._hint_metrics = self.hints.observe(state.global_step, [o for *_, os in gathered for o in os],
                                                    write=state.is_world_process_zero)
        if self.guard is not None:  # every process sees the same counts, so all stop together
            self.guard.observe(health, control, state.global_step >= state.max_steps)
        if write and state.is_world_process_zero:
            frames = [f.assign(process=rank) for rank, (_, fs, _, _) in enumerate(gathered) for f in fs]
            if frames:
                step = pd.concat(frames, ignore_index=True)
                step.insert(step.columns.get_loc("task_id") + 1, "sample", step.groupby("task_id").cumcount())
                write_parquet_atomic(step, RunFolder(self.out_dir).completions_at(state.global_step))
        if local.internal_errors:
            self.forget()


class ProgressCallback(TrainerCallback):
    """Calls ``report(step, max_steps, logs)`` after each log: for script lines or a notebook bar. Between them, when
    a step takes longer than ``progress.EVERY`` seconds (the first one above all), a heartbeat line says which step
    is under way, how long it has run and, after the first, the rate and time left; ``stop`` ends it
    (``heartbeat_of``)."""

    def __init__(self, report: Callable[[int, int, dict[str, Any]], None]) -> None:
        self.report = report
        self.line: ProgressLine | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.stop()
            self.line = ProgressLine("training", state.max_steps, "steps", done=state.global_step,
                                     note=f"step {state.global_step + 1} under way").start()

    def on_step_begin(self, args, state, control, **kwargs):
        if self.line is not None:
            self.line.update(state.global_step, f"step {state.global_step + 1} under way")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs is not None:
            self.report(state.global_step, state.max_steps, logs)
            if self.line is not None:
                self.line.update(state.global_step, say=False)

    def on_train_end(self, args, state, control, **kwargs):
        self.stop()

    def stop(self) -> None:
        """End the heartbeat (if any)."""
        if self.line is not None:
            self.line.stop()
            self.line = None


@contextmanager
def heartbeat_of(trainer: Any) -> Iterator[None]:
    """Around ``trainer.train()``: its ``ProgressCallback``'s heartbeat ends however training ends."""
    try:
        yield
    finally:
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, ProgressCallback):
                callback.stop()


class StopFileCallback(TrainerCallback):
    """Ends training after the current step, saving a checkpoint, once ``out_dir/STOP`` exists.

    Every process checks the file and they agree (gathered), so all stop at the same step. The file stays for the
    caller to see and remove (``run_training`` also removes a stale one before it starts).
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.path = RunFolder(Path(out_dir)).stop

    def on_step_end(self, args, state, control, **kwargs):
        if any(gather_across_processes(self.path.exists())):
            control.should_save = True
            control.should_training_stop = True


class ModelCardCallback(TrainerCallback):
    """After every checkpoint save, writes the run's model card (``rust_rewards.train.model_card``) over the stock one
    TRL has just written to the run folder, naming that checkpoint as the adapter so far."""

    def __init__(self, run: RunDescription) -> None:
        self.run = run

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            write_model_card(self.run, self.run.output_dir / f"checkpoint-{state.global_step}", state)
