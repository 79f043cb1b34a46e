"""What a GRPO run writes while it trains: reward timing, ``metrics.jsonl`` and per-completion parquet.

``RewardRecorder`` wraps TRL reward functions (keeping each ``__name__``, sync or async): it times
every call, reports ``reward_time`` (wall time of the whole reward phase of a generation batch) and
``reward_time/<name>`` through TRL's ``log_metric``, and keeps each batch's prompts, completions,
columns and rewards. ``RunLogCallback`` appends one JSON line per logged step to ``metrics.jsonl``
(adding ``reward_share`` = reward_time / step_time) and writes ``completions/step_NNNNNN.parquet``
with the rewards and ``Report.flat()`` verdict of every completion of the step.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from transformers import TrainerCallback

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.extract import completion_text
from rust_rewards.report import Report

METRICS_FILE = "metrics.jsonl"
COMPLETIONS_DIR = "completions"
TASK_KWARGS = ("task_id", "reference_tests", "test_shape", "crate_name", "edition", "extra_files",
               "test_release")
"""Dataset columns TRL passes to reward functions that the per-completion log keeps."""
_TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments", "completion_ids", "prompts",
               "completions")

RewardFunc = Callable[..., Any]
ReportsFor = Callable[[Sequence[Any], dict[str, list[Any]]], list[Report]]
"""(completions, task columns) -> one verifier report per completion."""


def completion_file(out_dir: str | Path, step: int) -> Path:
    return Path(out_dir) / COMPLETIONS_DIR / f"step_{step:06d}.parquet"


def _interval_union(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length covered by possibly overlapping (start, end) intervals."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


@dataclass
class RewardBatch:
    """One generation batch as the reward functions saw it."""

    prompts: list[Any]
    completions: list[Any]
    columns: dict[str, list[Any]]
    rewards: dict[str, list[float | None]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    intervals: list[tuple[float, float]] = field(default_factory=list)

    @property
    def reward_time(self) -> float:
        return _interval_union(self.intervals)


class RewardRecorder:
    """Times TRL reward functions and keeps what they scored, batch by batch.

    TRL calls every reward function once per generation batch with the same ``completions`` list,
    synchronously one after another or, for ``async`` functions, concurrently on its event loop
    thread; a batch is complete when all functions have returned.
    """

    def __init__(self, funcs: Sequence[RewardFunc]) -> None:
        names = [f.__name__ for f in funcs]
        if len(set(names)) != len(names):
            raise ValueError(f"reward function names must be unique, got {names}")
        self.names = names
        self.wrapped = [self._wrap(f) for f in funcs]
        self._lock = threading.Lock()
        self._open: dict[int, RewardBatch] = {}
        self._done: list[RewardBatch] = []

    def _wrap(self, func: RewardFunc) -> RewardFunc:
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                out = await func(*args, **kwargs)
                self._record(func.__name__, kwargs, out, start, time.perf_counter())
                return out
            return timed_async

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = func(*args, **kwargs)
            self._record(func.__name__, kwargs, out, start, time.perf_counter())
            return out
        return timed

    def _record(self, name: str, kwargs: dict[str, Any], out: Any, start: float, end: float) -> None:
        completions = kwargs.get("completions")
        if completions is None:
            return
        with self._lock:
            batch = self._open.get(id(completions))
            if batch is None:
                columns = {k: list(v) for k, v in kwargs.items() if k not in _TRL_KWARGS and isinstance(v, list)}
                batch = RewardBatch(list(kwargs.get("prompts") or []), list(completions), columns)
                self._open[id(completions)] = batch
            batch.rewards[name] = [None if r is None else float(r) for r in out]
            batch.seconds[name] = end - start
            batch.intervals.append((start, end))
            complete = len(batch.rewards) == len(self.names)
            if complete:
                del self._open[id(completions)]
                self._done.append(batch)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"reward_time/{name}", end - start)
            if complete:
                log_metric("reward_time", batch.reward_time)

    def pop_batches(self) -> list[RewardBatch]:
        """Completed batches since the last call (oldest first)."""
        with self._lock:
            done, self._done = self._done, []
        return done


def _prompt_text(prompt: Any) -> str:
    """The task text of a prompt: the last user message of a conversation, or the string itself."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1]) if users else completion_text(prompt)


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def completion_rows(step: int, batch: RewardBatch, weights: dict[str, float],
                    reports: Sequence[Report]) -> pd.DataFrame:
    """One row per completion: step, task, prompt, completion, weighted reward, each reward, verdict."""
    if len(reports) != len(batch.completions):
        raise ValueError(f"{len(reports)} reports for {len(batch.completions)} completions")
    task_ids = batch.columns.get("task_id") or [""] * len(batch.completions)
    seen: dict[str, int] = {}
    rows = []
    for i, (completion, report) in enumerate(zip(batch.completions, reports, strict=True)):
        task_id = str(task_ids[i])
        seen[task_id] = seen.get(task_id, -1) + 1
        values = {name: _finite(batch.rewards[name][i]) for name in batch.rewards}
        total = sum(weights.get(name, 1.0) * v for name, v in values.items() if v is not None)
        rows.append({
            "step": step,
            "task_id": task_id,
            "sample": seen[task_id],
            "prompt": _prompt_text(batch.prompts[i]) if i < len(batch.prompts) else "",
            "completion": completion_text(completion),
            "reward": total if any(v is not None for v in values.values()) else None,
            **values,
            **report.flat(),
        })
    frame = pd.DataFrame(rows)
    for column in ("reward", *batch.rewards, "verify_seconds"):
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    return frame


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return value


class RunLogCallback(TrainerCallback):
    """Writes ``metrics.jsonl`` on every log and the step's completions parquet at every step end."""

    def __init__(self, out_dir: str | Path, recorder: RewardRecorder, weights: dict[str, float],
                 reports_for: ReportsFor, completions_every: int = 1) -> None:
        self.out_dir = Path(out_dir)
        self.recorder = recorder
        self.weights = weights
        self.reports_for = reports_for
        self.completions_every = completions_every

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero or "train_runtime" in logs:
            return
        if logs.get("reward_time") is not None and logs.get("step_time"):
            logs["reward_share"] = logs["reward_time"] / logs["step_time"]
        row = {"step": state.global_step, **{k: _json_value(v) for k, v in logs.items()}, "time": time.time()}
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.out_dir / METRICS_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    def on_step_end(self, args, state, control, **kwargs):
        batches = self.recorder.pop_batches()
        if not batches or not state.is_world_process_zero:
            return
        if self.completions_every < 1 or state.global_step % self.completions_every:
            return
        frames = []
        for batch in batches:
            reports = self.reports_for(batch.completions, batch.columns)
            frames.append(completion_rows(state.global_step, batch, self.weights, reports))
        write_parquet_atomic(pd.concat(frames, ignore_index=True), completion_file(self.out_dir, state.global_step))


class ProgressCallback(TrainerCallback):
    """Calls ``report(step, max_steps, logs)`` after each log: for script lines or a notebook bar."""

    def __init__(self, report: Callable[[int, int, dict[str, Any]], None]) -> None:
        self.report = report

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs is not None:
            self.report(state.global_step, state.max_steps, logs)


def format_log_line(step: int, max_steps: int, logs: dict[str, Any]) -> str:
    """A readable one-line summary of one logged step."""
    if "train_runtime" in logs:
        return f"done: {step} steps in {logs['train_runtime']:.1f} s"
    parts = [f"step {step}/{max_steps}"]
    if logs.get("reward") is not None:
        parts.append(f"reward {logs['reward']:.3f} ± {logs.get('reward_std') or 0.0:.3f}")
    per_func = [(k[len("rewards/"):-len("/mean")], v) for k, v in logs.items()
                if k.startswith("rewards/") and k.endswith("/mean") and v is not None]
    if per_func:
        parts.append(" ".join(f"{name.removesuffix('_reward')} {v:.2f}" for name, v in per_func))
    if logs.get("completions/mean_length") is not None:
        parts.append(f"len {logs['completions/mean_length']:.0f}")
    if logs.get("loss") is not None:
        parts.append(f"loss {logs['loss']:.4f}")
    if logs.get("step_time") is not None:
        share = logs.get("reward_share")
        parts.append(f"{logs['step_time']:.1f} s/step" + (f" (rewards {share:.0%})" if share is not None else ""))
    return " | ".join(parts)
