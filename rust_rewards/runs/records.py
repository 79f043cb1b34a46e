"""Read a training output dir and an eval output dir into DataFrames (what viz.py plots).

Training dir (written by train.py, named in ``rust_rewards.layout``): ``params.json`` (the first start's
parameters), ``params_history.jsonl`` (one JSON object per start, resumes included), ``metrics.jsonl`` (one JSON
object per logged step) and ``completions/step_NNNNNN.parquet`` (one row per completion with its
rewards and ``Report.flat()`` verdict). Eval dir (written by eval.py): ``summary.json`` and ``results.parquet``.
Readers tolerate a run that is still being written: a missing file means "not logged yet" and an
unterminated last line of ``metrics.jsonl`` is skipped.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rust_rewards.eval.metrics import ModelSummary, long_metrics, summarize
from rust_rewards.layout import (
    COMPLETIONS_DIR,
    METRICS_FILE,
    PARAMS_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    EvalFolder,
    RunFolder,
)
from rust_rewards.rust.extract import completion_text

REQUIRED_COMPLETION_COLUMNS = ("step", "completion", "reward", "build_ok", "clippy_ok", "tests_ok")
CHECK_COLUMNS = {"build": "build_ok", "clippy": "clippy_ok", "tests": "tests_ok", "hidden tests": "hidden_ok"}
"""Pass-rate name -> boolean completion column (``hidden_ok`` is null for tasks without hidden tests)."""
GATE_COLUMNS = {"on task": "off_task", "signatures match": "mismatched", "no hack flag": "forbidden"}
"""Gate name -> the list column whose items fail it: ``off_task`` (required items missing: an answer to another
task), ``mismatched`` (an item with another signature than the task's: an honest miss, named apart from hacks),
``forbidden`` (a banned construct)."""
PASS_CHECKS = (*GATE_COLUMNS, *CHECK_COLUMNS)
"""Every check of ``pass_rates``, in its order: the gates, then build, clippy and the tests."""

HEALTH_KEYS = ("verify/completions", "verify/internal_errors", "verify/timeouts")
"""``metrics.jsonl`` keys per logged step: completions verified, those whose verification failed for
infrastructure reasons (``Report.internal_error``), those with a timed-out phase (``Report.timed_out``)."""

REWARD_PREFIX = "rewards/"
REWARD_SUFFIX = "/mean"


class RunLogError(ValueError):
    """A log file exists but cannot be read; the message names the file, line or column."""


@dataclass(frozen=True)
class DirState:
    """What a folder holds: ``ok``, ``empty`` (a run with nothing logged yet), ``missing`` or ``invalid``."""

    kind: str
    message: str

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


@dataclass
class RunLogs:
    """Everything logged so far by one training run."""

    path: Path
    params: dict[str, Any]
    metrics: pd.DataFrame
    completions: pd.DataFrame
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def last_step(self) -> int | None:
        steps = [int(df["step"].max()) for df in (self.metrics, self.completions) if not df.empty]
        return max(steps) if steps else None


@dataclass
class EvalLogs:
    """One eval output dir: a summary per model and the per-completion results (empty if absent)."""

    path: Path
    summaries: dict[str, ModelSummary]
    results: pd.DataFrame


def _has_metric_lines(path: Path) -> bool:
    metrics = RunFolder(path).metrics
    if not metrics.is_file():
        return False
    return any(line.strip() for line in metrics.read_text(encoding="utf-8").splitlines())


def inspect_run(path: str | os.PathLike[str]) -> DirState:
    """Say whether ``path`` is a training output dir with something to plot, without raising."""
    if not str(path).strip():
        return DirState("missing", "Choose a training output directory (`--run DIR` or the field above).")
    folder = Path(path).expanduser()
    if not folder.exists():
        return DirState("missing", f"`{folder}` does not exist (yet): no training has written there.")
    if not folder.is_dir():
        return DirState("invalid", f"`{folder}` is a file, not a training output directory.")
    run = RunFolder(folder)
    if not any(marker.exists() for marker in (run.params, run.metrics, run.completions)):
        return DirState(
            "invalid",
            f"`{folder}` is not a training run: no {PARAMS_FILE}, {METRICS_FILE} or {COMPLETIONS_DIR}/.",
        )
    if not _has_metric_lines(folder) and not run.completion_files():
        return DirState("empty", f"`{folder}` is a training run with no logged step yet.")
    return DirState("ok", f"`{folder}`")


def inspect_eval(path: str | os.PathLike[str]) -> DirState:
    """Say whether ``path`` is an eval output dir (``summary.json`` or ``results.parquet``)."""
    if not str(path).strip():
        return DirState("missing", "No eval directory given (`--eval DIR` or the field above).")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return DirState("missing", f"`{folder}` is not an existing directory.")
    evals = EvalFolder(folder)
    if not evals.summary.is_file() and not evals.results.is_file():
        return DirState("invalid", f"`{folder}` is not an eval dir: no {SUMMARY_FILE} or {RESULTS_FILE}.")
    return DirState("ok", f"`{folder}`")


def load_params(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``params.json`` of a run as a dict (empty when it is not written yet)."""
    file = RunFolder(Path(path)).params
    if not file.is_file():
        return {}
    try:
        params = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RunLogError(f"{file}: not valid JSON ({err})") from err
    if not isinstance(params, dict):
        raise RunLogError(f"{file}: expected a JSON object, got {type(params).__name__}")
    return params


def _json_lines(file: Path, required: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (none if it is missing), each with a ``required`` field.

    An unterminated last line (being written) is skipped; any other bad line is a ``RunLogError``.
    """
    if not file.is_file():
        return []
    text = file.read_text(encoding="utf-8")
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise RunLogError(f"{file}:{number}: not valid JSON ({err.msg})") from err
        if not isinstance(row, dict) or required not in row:
            raise RunLogError(f"{file}:{number}: expected a JSON object with a {required!r} field")
        rows.append(row)
    return rows


def load_params_history(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``params_history.jsonl``: the parameters of every start of the run, oldest first."""
    return _json_lines(RunFolder(Path(path)).params_history, "started_at")


def param_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Parameters whose value differs between two starts: name -> (before, after).

    ``derived`` values and the start time are left out (a resume always differs there).
    """
    skip = {"derived", "started_at"}
    names = [k for k in after if k not in skip] + [k for k in before if k not in skip and k not in after]
    return {k: (before.get(k), after.get(k)) for k in names if before.get(k) != after.get(k)}


def load_metrics(path: str | os.PathLike[str]) -> pd.DataFrame:
    """``metrics.jsonl`` as one row per step, sorted by step.

    Several objects for one step (a resumed run, a final summary line) merge: the last non-null value
    of each column wins. An unterminated last line (being written) is skipped.
    """
    rows = _json_lines(RunFolder(Path(path)).metrics, "step")
    if not rows:
        return pd.DataFrame(columns=["step"])
    frame = pd.DataFrame(rows)
    frame["step"] = pd.to_numeric(frame["step"], errors="raise").astype(int)
    return frame.groupby("step", sort=True).last().reset_index()


_PARQUET_CACHE: dict[Path, tuple[tuple[int, int], pd.DataFrame]] = {}


def _read_completion_file(file: Path) -> pd.DataFrame:
    """One step's parquet file, cached by (mtime, size) so periodic refreshes re-read only new files."""
    stat = file.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    cached = _PARQUET_CACHE.get(file)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        frame = pd.read_parquet(file)
    except Exception as err:  # pyarrow raises several types for a corrupt file
        raise RunLogError(f"{file}: cannot read parquet ({err})") from err
    missing = [column for column in REQUIRED_COMPLETION_COLUMNS if column not in frame.columns]
    if missing:
        raise RunLogError(f"{file}: missing column(s) {', '.join(missing)}")
    _PARQUET_CACHE[file] = (key, frame)
    return frame


def _text(value: Any) -> str:
    """A prompt cell as text (a conversational prompt is a list of {role, content})."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return value
    try:
        messages = list(value)
    except TypeError:
        return str(value)
    return "\n\n".join(
        str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in messages
    )


def cell_items(value: Any) -> list[str]:
    """A list-valued cell (numpy array from parquet, list, None) as a list of strings."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, str):
        return [value] if value else []
    return [str(item) for item in value]


def verdict(row: dict[str, Any]) -> str:
    """A one-word summary of a completion's checks, the first failing one."""
    if "has_code" in row and not row["has_code"]:
        return "no code"
    if not row.get("build_ok"):
        return "build error"
    if not row.get("clippy_ok"):
        return "clippy"
    tests = row.get("tests_ok")
    if tests is None or (isinstance(tests, float) and pd.isna(tests)):  # no test module asked for
        return "clippy clean"
    if not tests:
        return "tests fail"
    return "tests pass"


def load_completions(path: str | os.PathLike[str]) -> pd.DataFrame:
    """All ``completions/step_*.parquet`` files as one table, with text ``prompt``/``completion``,
    ``error_codes`` as lists of strings and a ``verdict`` column."""
    frames = [_read_completion_file(file) for file in RunFolder(Path(path)).completion_files()]
    if not frames:
        return pd.DataFrame(columns=[*REQUIRED_COMPLETION_COLUMNS, "error_codes", "verdict"])
    frame = pd.concat(frames, ignore_index=True)
    frame["step"] = frame["step"].astype(int)
    frame["completion"] = [
        completion_text(v.tolist() if hasattr(v, "tolist") else v) for v in frame["completion"]
    ]
    if "prompt" in frame.columns:
        frame["prompt"] = [_text(v) for v in frame["prompt"]]
    if "error_codes" not in frame.columns:
        frame["error_codes"] = [[] for _ in range(len(frame))]
    frame["error_codes"] = [cell_items(v) for v in frame["error_codes"]]
    frame["verdict"] = [verdict(row) for row in frame.to_dict("records")]
    return frame.sort_values("step", kind="stable").reset_index(drop=True)


def load_run(path: str | os.PathLike[str]) -> RunLogs:
    """Read everything a training run has logged so far."""
    folder = Path(path).expanduser()
    return RunLogs(folder, load_params(folder), load_metrics(folder), load_completions(folder),
                   load_params_history(folder))


def dir_signature(path: str | os.PathLike[str]) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime, size) of every log file: it changes exactly when there is something new to read."""
    run, evals = RunFolder(Path(path).expanduser()), EvalFolder(Path(path).expanduser())
    files = [run.params, run.params_history, run.metrics, *run.completion_files(), evals.summary, evals.results]
    signature = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        signature.append((file.name, stat.st_mtime_ns, stat.st_size))
    return tuple(signature)


def ema(values: pd.Series, smoothing: float) -> pd.Series:
    """Debiased exponential moving average (TensorBoard's smoothing); 0 leaves the values as they are."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    numeric = pd.to_numeric(values, errors="coerce").astype(float)
    if smoothing == 0.0:
        return numeric
    return numeric.ewm(alpha=1.0 - smoothing, adjust=True, ignore_na=True).mean()


def reward_names(metrics: pd.DataFrame) -> list[str]:
    """Reward function names that have a ``rewards/<name>/mean`` column, in logged order."""
    return [
        column[len(REWARD_PREFIX):-len(REWARD_SUFFIX)]
        for column in metrics.columns
        if column.startswith(REWARD_PREFIX) and column.endswith(REWARD_SUFFIX)
    ]


def metric_series(metrics: pd.DataFrame, columns: dict[str, str], smoothing: float = 0.0) -> pd.DataFrame:
    """Tidy rows (step, series, value, smoothed) for the given {label: metrics column}; columns that
    were never logged (absent or all null) are left out."""
    parts = []
    for label, column in columns.items():
        if column not in metrics.columns:
            continue
        values = pd.to_numeric(metrics[column], errors="coerce")
        if values.notna().sum() == 0:
            continue
        part = pd.DataFrame({"step": metrics["step"].astype(int), "series": label, "value": values})
        part["smoothed"] = ema(part["value"], smoothing).to_numpy()
        parts.append(part.dropna(subset=["value"]))
    if not parts:
        return pd.DataFrame(columns=["step", "series", "value", "smoothed"])
    return pd.concat(parts, ignore_index=True)


def reward_series(metrics: pd.DataFrame, smoothing: float = 0.0) -> pd.DataFrame:
    """Tidy rows for every ``rewards/<name>/mean`` column."""
    return metric_series(
        metrics, {name: f"{REWARD_PREFIX}{name}{REWARD_SUFFIX}" for name in reward_names(metrics)}, smoothing
    )


def pass_rates(completions: pd.DataFrame) -> pd.DataFrame:
    """Per step and check (build, clippy, tests, hidden tests): the fraction of completions that pass, as the rewards
    count them: an answer to another task (``off_task``: it lacks the task's required items) passes nothing, so the
    dashboard agrees with the logged rewards. Three shares (``GATE_COLUMNS``) say why an answer that builds can still
    earn nothing: ``on task``, ``signatures match`` and ``no hack flag``.

    ``hidden tests`` is over completions whose task has hidden tests and is left out where none has; ``tests`` is
    left out where no answer was asked for a test module.
    """
    rows = []
    for step, group in completions.groupby("step", sort=True):
        on_task = (group["off_task"].map(lambda v: not cell_items(v)) if "off_task" in group.columns
                   else pd.Series(True, index=group.index))
        for check, column in GATE_COLUMNS.items():
            if column in group.columns:  # each zeroes the test rewards
                clean = int(group[column].map(lambda v: not cell_items(v)).sum())
                rows.append({"step": int(step), "check": check, "rate": clean / len(group), "passed": clean,
                             "n": len(group)})
        for check, column in CHECK_COLUMNS.items():
            if column not in group.columns:
                continue
            values = group[column].dropna()
            if values.empty:
                continue
            passed = int((values.astype(bool) & on_task[values.index]).sum())
            rows.append({"step": int(step), "check": check, "rate": passed / len(values),
                         "passed": passed, "n": len(values)})
    return pd.DataFrame(rows, columns=["step", "check", "rate", "passed", "n"])


def top_error_codes(completions: pd.DataFrame, top: int = 8) -> list[tuple[str, int]]:
    """The most frequent compiler error codes: (code, completions containing it), most frequent first."""
    counter: Counter[str] = Counter()
    for codes in completions.get("error_codes", pd.Series(dtype=object)):
        counter.update(set(cell_items(codes)))
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def error_code_counts(completions: pd.DataFrame, top: int = 8) -> pd.DataFrame:
    """Per step, how many completions hit each of the ``top`` most frequent error codes overall."""
    codes = [code for code, _ in top_error_codes(completions, top)]
    rows = []
    for step, group in completions.groupby("step", sort=True):
        counter: Counter[str] = Counter()
        for cell in group["error_codes"]:
            counter.update(set(cell_items(cell)))
        rows.extend({"step": int(step), "code": code, "count": counter[code]} for code in codes)
    return pd.DataFrame(rows, columns=["step", "code", "count"])


ANY_CODE = "any"
NO_CODE = "none"


def filter_completions(
    completions: pd.DataFrame,
    steps: tuple[int, int] | None = None,
    rewards: tuple[float, float] | None = None,
    error_code: str = ANY_CODE,
) -> pd.DataFrame:
    """Rows within an inclusive step range and reward range that have ``error_code`` (``any``: no
    filter; ``none``: no error code at all)."""
    mask = pd.Series(True, index=completions.index)
    if steps is not None:
        mask &= completions["step"].between(steps[0], steps[1])
    if rewards is not None:
        mask &= pd.to_numeric(completions["reward"], errors="coerce").between(rewards[0], rewards[1])
    if error_code == NO_CODE:
        mask &= pd.Series([not cell_items(codes) for codes in completions["error_codes"]], index=mask.index)
    elif error_code != ANY_CODE:
        mask &= pd.Series([error_code in cell_items(c) for c in completions["error_codes"]], index=mask.index)
    return completions[mask]


def reward_range(completions: pd.DataFrame) -> tuple[float, float]:
    """The rewards' range widened to tenths (a null reward counts as 0), at least 0.1 wide: the reward filter's."""
    rewards = pd.to_numeric(completions["reward"], errors="coerce").fillna(0.0)
    low, high = math.floor(float(rewards.min()) * 10) / 10, math.ceil(float(rewards.max()) * 10) / 10
    return low, high if high > low else low + 0.1


def verify_health(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per logged step: ``completions``, ``internal_errors`` and ``timeouts`` (from the ``verify/*`` keys;
    steps logged without them are left out)."""
    columns = ["step", "completions", "internal_errors", "timeouts"]
    if not set(HEALTH_KEYS) <= set(metrics.columns):
        return pd.DataFrame(columns=columns)
    frame = metrics[["step", *HEALTH_KEYS]].dropna(subset=list(HEALTH_KEYS))
    frame.columns = columns
    return frame.astype(int).reset_index(drop=True)


def health_warnings(metrics: pd.DataFrame) -> list[str]:
    """One sentence per kind of verifier trouble in the run (internal errors, timeouts); empty if none."""
    health = verify_health(metrics)
    warnings = []
    for column, what in (("internal_errors", "internal errors (verification failed for infrastructure "
                                             "reasons; those completions got no reward)"),
                         ("timeouts", "timeouts (a compile or test phase hit its time limit)")):
        hit = health[health[column] > 0]
        if hit.empty:
            continue
        steps = ", ".join(str(s) for s in hit["step"].head(10)) + (", ..." if len(hit) > 10 else "")
        warnings.append(f"{int(hit[column].sum())} of {int(health['completions'].sum())} completions had {what}, "
                        f"on {len(hit)} of {len(health)} steps (step {steps}).")
    return warnings


def start_table(history: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per start of the run: when, the checkpoint it resumed from, the parameters it changed."""
    rows = []
    for number, start in enumerate(history, start=1):
        resumed = (start.get("derived") or {}).get("resumed_from")
        changes = param_changes(history[number - 2], start) if number > 1 else {}
        rows.append({"start": number, "started_at": start.get("started_at", ""),
                     "resumed_from": Path(resumed).name if resumed else "",
                     "changes": ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())})
    return pd.DataFrame(rows, columns=["start", "started_at", "resumed_from", "changes"])


TABLE_COLUMNS = ("step", "task_id", "reward", "verdict", "build_ok", "clippy_ok", "tests_ok", "hidden_ok",
                 "tests_passed", "tests_failed", "errors", "clippy_lints")


def completion_table(completions: pd.DataFrame) -> pd.DataFrame:
    """The browsable view: one row per completion with short columns; the index keeps the row id."""
    view = completions.copy()
    view["errors"] = [", ".join(cell_items(codes)) for codes in view["error_codes"]]
    view["clippy_lints"] = [", ".join(cell_items(v)) for v in view.get("clippy_warnings", [[]] * len(view))]
    view["reward"] = pd.to_numeric(view["reward"], errors="coerce").round(3)
    return view[[column for column in TABLE_COLUMNS if column in view.columns]]


def _summary_from_dict(model: str, entry: Any, file: Path) -> ModelSummary:
    if not isinstance(entry, dict):
        raise RunLogError(f"{file}: entry for model {model!r} is not a JSON object")
    try:
        return ModelSummary.from_dict(entry)
    except TypeError as err:
        raise RunLogError(f"{file}: entry for model {model!r}: {err}") from err


def load_eval(path: str | os.PathLike[str]) -> EvalLogs:
    """Read an eval dir; without ``summary.json`` the summaries are computed from ``results.parquet``."""
    folder = Path(path).expanduser()
    results_file = EvalFolder(folder).results
    results = pd.DataFrame()
    if results_file.is_file():
        try:
            results = pd.read_parquet(results_file)
        except Exception as err:  # pyarrow raises several types for a corrupt file
            raise RunLogError(f"{results_file}: cannot read parquet ({err})") from err
        if "model" not in results.columns:
            raise RunLogError(f"{results_file}: missing column model")
    summary_file = EvalFolder(folder).summary
    if summary_file.is_file():
        try:
            raw = json.loads(summary_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise RunLogError(f"{summary_file}: not valid JSON ({err})") from err
        if not isinstance(raw, dict):
            raise RunLogError(f"{summary_file}: expected an object of model name -> summary")
        summaries = {str(m): _summary_from_dict(str(m), entry, summary_file) for m, entry in raw.items()}
    elif not results.empty:
        summaries = summarize(results)
    else:
        raise RunLogError(f"{folder}: no {SUMMARY_FILE} and no rows in {RESULTS_FILE}")
    return EvalLogs(folder, summaries, results)


def eval_metrics(logs: EvalLogs) -> pd.DataFrame:
    """Tidy (model, metric, value, lo, hi) rows: rates with Wilson intervals, pass@k with bootstrap ones."""
    return long_metrics(logs.summaries)


def eval_error_codes(logs: EvalLogs) -> pd.DataFrame:
    """(model, code, count) rows from each model's ``top_error_codes``."""
    rows = [
        {"model": model, "code": str(code), "count": int(count)}
        for model, summary in logs.summaries.items()
        for code, count in summary.top_error_codes
    ]
    return pd.DataFrame(rows, columns=["model", "code", "count"])
