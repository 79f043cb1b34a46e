"""What a GRPO run records while it trains: reward timing, verifier health, ``metrics.jsonl`` lines and
per-completion rows.

``RewardRecorder`` wraps TRL reward functions (keeping each ``__name__``, sync or async): it times
every call, reports ``reward_time`` (wall time of the whole reward phase of a generation batch) and
``reward_time/<name>`` through TRL's ``log_metric``, and keeps each batch's prompts, completions,
columns and rewards. ``completion_rows`` turns a batch into rows with the rewards and ``Report.flat()``
verdict of every completion; ``StepHealth`` counts ``verify/completions``, ``verify/internal_errors`` and
``verify/timeouts``; ``InfraGuard`` decides when verification keeps failing for infrastructure reasons
(``InfrastructureError``). The trainer callbacks that write all this live in ``rust_rewards.train.callbacks``:
this module does not import transformers.
"""
from __future__ import annotations

import datetime
import functools
import inspect
import json
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rust_rewards.atomic import write_json_atomic, write_text_atomic
from rust_rewards.layout import HELD_OUT_DIR, STEP_GLOB, RunFolder
from rust_rewards.report import Report
from rust_rewards.rewards.cargo_tool import tool_calls
from rust_rewards.runs.records import HEALTH_KEYS, load_params
from rust_rewards.rust.extract import completion_text

_TRL_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments", "completion_ids", "prompts",
               "completions")

RewardFunc = Callable[..., Any]
ReportsFor = Callable[[Sequence[Any], dict[str, list[Any]]], list[Report]]
"""(completions, task columns) -> one verifier report per completion."""


def record_start(out_dir: str | Path, record: dict[str, Any], fresh: bool = False) -> dict[str, Any]:
    """Record one start of a run in ``out_dir``; return the parameters of its first start.

    ``params.json`` is written once, by the first start, and never rewritten (a resumed run keeps it) unless
    ``fresh`` (the earlier starts trained nothing: this one's settings are the run's); every start, the first
    included, appends ``{"started_at": ..., **record}`` to ``params_history.jsonl``.
    """
    run = RunFolder(Path(out_dir))
    run.root.mkdir(parents=True, exist_ok=True)
    first = {} if fresh else load_params(run.root)
    if not first:
        write_json_atomic(record, run.params)
        first = record
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with open(run.params_history, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"started_at": started, **record}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return first


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

    def weighted(self, i: int, weights: dict[str, float]) -> float | None:
        """Completion ``i``'s weighted reward (unlisted rewards weigh 1); None when every reward is None."""
        values = [(name, _finite(rewards[i])) for name, rewards in self.rewards.items()]
        if all(v is None for _, v in values):
            return None
        return sum(weights.get(name, 1.0) * v for name, v in values if v is not None)


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
        if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__):
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
                    reports: Sequence[Report], tests_asked: bool = True) -> pd.DataFrame:
    """One row per completion: step, task, prompt, completion, weighted reward, each reward, verdict (the
    ``sample`` number is given per step, over all batches and processes, by ``RunLogCallback``; ``tests_asked``:
    the answer format asks for a test module, else ``tests_ok`` is None)."""
    if len(reports) != len(batch.completions):
        raise ValueError(f"{len(reports)} reports for {len(batch.completions)} completions")
    task_ids = batch.columns.get("task_id") or [""] * len(batch.completions)
    rows = []
    for i, (completion, report) in enumerate(zip(batch.completions, reports, strict=True)):
        task_id = str(task_ids[i])
        values = {name: _finite(batch.rewards[name][i]) for name in batch.rewards}
        rows.append({
            "step": step,
            "task_id": task_id,
            "prompt": _prompt_text(batch.prompts[i]) if i < len(batch.prompts) else "",
            "completion": completion_text(completion),
            "tool_calls": len(tool_calls(completion)),
            "reward": batch.weighted(i, weights),
            **values,
            **report.flat(tests_asked),
        })
    frame = pd.DataFrame(rows)
    for column in ("reward", *batch.rewards, "verify_seconds"):
        frame[column] = pd.to_numeric(frame[column]).astype("float64")
    return frame


@dataclass(frozen=True)
class StepHealth:
    """How verification went for the completions of one step (or of a logging window)."""

    step: int
    completions: int = 0
    internal_errors: int = 0
    timeouts: int = 0
    first_error: str = ""

    @classmethod
    def of(cls, step: int, reports: Sequence[Report]) -> StepHealth:
        errors = [r.internal_error for r in reports if r.internal_error]
        return cls(step, len(reports), len(errors), sum(1 for r in reports if r.timed_out),
                   errors[0] if errors else "")

    def __add__(self, other: StepHealth) -> StepHealth:
        return StepHealth(other.step, self.completions + other.completions,
                          self.internal_errors + other.internal_errors, self.timeouts + other.timeouts,
                          self.first_error or other.first_error)

    def metrics(self) -> dict[str, int]:
        return dict(zip(HEALTH_KEYS, (self.completions, self.internal_errors, self.timeouts), strict=True))


def gather_across_processes(item: Any) -> list[Any]:
    """``item`` of every training process, in rank order (``[item]`` in a single process); every process must
    call it at the same point."""
    from accelerate import PartialState

    if PartialState().num_processes == 1:
        return [item]
    from accelerate.utils import gather_object

    return gather_object([item])


class InfrastructureError(RuntimeError):
    """Training stopped because verification failed for infrastructure reasons, not because of the model."""


@dataclass(frozen=True)
class InfraStop:
    """Why and where an ``InfraGuard`` stopped training."""

    reason: str
    steps: tuple[StepHealth, ...]

    def message(self, checkpoint: str | None) -> str:
        """The full explanation, ending with how to continue from ``checkpoint`` (the last one kept)."""
        per_step = ", ".join(f"step {h.step}: {h.internal_errors}/{h.completions}" for h in self.steps)
        first = next(h for h in self.steps if h.first_error)
        resume = (f"rerun with the same --output-dir to resume from {Path(checkpoint).name}" if checkpoint
                  else "no checkpoint was saved before, so a rerun starts from the beginning")
        return (f"training stopped at step {self.steps[-1].step}: {self.reason}. Completions whose verification "
                f"failed for infrastructure reasons (internal errors, scored None by every reward): {per_step}. "
                f"First internal error (step {first.step}): {first.first_error.strip()}. No checkpoint or "
                f"adapter was written from these steps; fix the verifier (sandbox, toolchain, workdir), then "
                f"{resume}.")


class InfraGuard:
    """Decides, step by step, whether internal errors of the verifier are too many to keep training.

    Stops when more than ``max_share`` of one step's completions had internal errors, or when
    ``max_steps`` consecutive steps (0: never) had any. While such a streak may still reach
    ``max_steps``, a checkpoint due on a step with internal errors is saved at the next clean step
    instead, so every checkpoint comes from a step without them (the last step of the run always saves).
    """

    def __init__(self, max_share: float = 0.5, max_steps: int = 3) -> None:
        self.max_share = max_share
        self.max_steps = max_steps
        self.streak: list[StepHealth] = []
        self.save_owed = False
        self.stopped: InfraStop | None = None

    def observe(self, health: StepHealth, control: Any, last_step: bool) -> InfraStop | None:
        """Record one step and steer the trainer's ``control`` (stop, skip or postpone the save)."""
        if health.completions == 0:
            return None
        if not health.internal_errors:
            self.streak = []
            if self.save_owed:
                control.should_save, self.save_owed = True, False
            return None
        self.streak.append(health)
        share = health.internal_errors / health.completions
        if share > self.max_share:
            reason = (f"{health.internal_errors} of {health.completions} completions ({share:.0%}) had internal "
                      f"errors, more than --max-internal-error-share {self.max_share:g}")
        elif self.max_steps > 0 and len(self.streak) >= self.max_steps:
            reason = (f"{len(self.streak)} consecutive steps had internal errors "
                      f"(--max-internal-error-steps {self.max_steps})")
        else:
            if self.max_steps > 0 and control.should_save and not last_step:
                control.should_save, self.save_owed = False, True
            return None
        control.should_training_stop, control.should_save, control.should_log = True, False, True
        self.stopped = InfraStop(reason, tuple(self.streak))
        return self.stopped


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _json_value(value.item())
    return value


def roll_back_records(out_dir: Path, step: int) -> int:
    """Forget what a run folder recorded after ``step`` (the step a resumed run restarts from): its lines in
    ``metrics.jsonl`` and ``hints.jsonl`` and its completions and held-out parquet files, so that the steps the
    resumed run trains again are recorded once. Returns how many records it removed.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> for k in (1, 2, 3):
    ...     append_metrics(out, k, {"loss": 0.5})
    >>> roll_back_records(out, 2), [json.loads(row)["step"] for row in (out / "metrics.jsonl").open()]
    (1, [1, 2])
    """
    run = RunFolder(out_dir)
    removed = 0
    for path in (run.metrics, run.hints):
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if _step_of(line) <= step]
        if len(kept) != len(lines):
            removed += len(lines) - len(kept)
            write_text_atomic("".join(line + "\n" for line in kept), path)
    for folder in (run.completions, run.root / HELD_OUT_DIR):
        for path in sorted(folder.glob(STEP_GLOB)) if folder.is_dir() else []:
            if int(path.stem.removeprefix("step_")) > step:
                path.unlink()
                removed += 1
    return removed


def _step_of(line: str) -> int:
    try:
        return int(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return 0


def append_metrics(out_dir: Path, step: int, logs: dict[str, Any]) -> None:
    """Append one step's logs as a JSON line to ``out_dir/metrics.jsonl`` (non-finite numbers become null)."""
    row = {"step": step, **{k: _json_value(v) for k, v in logs.items()}, "time": time.time()}
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(RunFolder(out_dir).metrics, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


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
    if logs.get("completions/clipped_ratio") is not None:
        parts.append(f"cut {logs['completions/clipped_ratio']:.0%}")
    if logs.get("frac_reward_zero_std") is not None:
        parts.append(f"tied groups {logs['frac_reward_zero_std']:.0%}")
    if logs.get("loss") is not None:
        parts.append(f"loss {logs['loss']:.4f}")
    if logs.get("mean_token_accuracy") is not None:
        parts.append(f"token accuracy {logs['mean_token_accuracy']:.3f}")
    if logs.get("step_time") is not None:
        shares = [f"{name} {logs[key]:.0%}" for name, key in (("generation", "generation_share"),
                                                              ("rewards", "reward_share"))
                  if logs.get(key) is not None]
        parts.append(f"{logs['step_time']:.1f} s/step" + (f" ({', '.join(shares)})" if shares else ""))
    total = logs.get("verify/completions")
    if logs.get("verify/internal_errors"):
        parts.append(f"INTERNAL ERRORS {logs['verify/internal_errors']}/{total}")
    if logs.get("verify/timeouts"):
        parts.append(f"timeouts {logs['verify/timeouts']}/{total}")
    return " | ".join(parts)


def what_changed(history: Sequence[dict[str, Any]], max_total: float) -> str | None:
    """The closing line of a GRPO run: the mean reward of its first and second half of logged steps (of its one step,
    when it logged one), how many groups had rewards that differ (the ones GRPO learns from) and the range the loss
    moved in; None without rewards.

    >>> line = what_changed([{"reward": 1.0, "frac_reward_zero_std": 0.5, "loss": 0.1},
    ...                      {"reward": 3.0, "frac_reward_zero_std": 0.0, "loss": -0.2}], 8.5)
    >>> print(*line.split("; "), sep=";\\n")
    what changed: mean reward 1.00 (step 1) -> 3.00 (step 2), of 8.50 at most;
    groups whose rewards differ 75%;
    loss between -0.2000 and 0.1000
    """
    steps = [h for h in history if h.get("reward") is not None]
    if not steps:
        return None
    half = max(1, len(steps) // 2)
    first, last = steps[:half], steps[half:] or steps[-1:]

    def span(part: Sequence[dict[str, Any]]) -> str:
        a, b = steps.index(part[0]) + 1, steps.index(part[-1]) + 1
        return f"step {a}" if a == b else f"steps {a}-{b}"

    def mean(part: Sequence[dict[str, Any]], key: str) -> float:
        values = [h[key] for h in part if h.get(key) is not None]
        return sum(values) / len(values) if values else math.nan

    change = (f"{mean(steps, 'reward'):.2f} (one step: nothing to compare)" if len(steps) == 1 else
              f"{mean(first, 'reward'):.2f} ({span(first)}) -> {mean(last, 'reward'):.2f} ({span(last)})")
    line = f"what changed: mean reward {change}, of {max_total:.2f} at most"
    if any(h.get("frac_reward_zero_std") is not None for h in steps):
        line += f"; groups whose rewards differ {1 - mean(steps, 'frac_reward_zero_std'):.0%}"
    losses = [h["loss"] for h in steps if h.get("loss") is not None]
    if losses:
        line += f"; loss between {min(losses):.4f} and {max(losses):.4f}"
    return line
