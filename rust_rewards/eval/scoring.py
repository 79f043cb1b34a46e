"""What eval.py does: score prediction files with the training verifier against their tasks' hidden tests, summarize
per model (``rust_rewards.eval.metrics``) and write an eval folder (``rust_rewards.layout``: ``results.parquet``,
one row per completion, and ``summary.json``, one entry per model).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rust_rewards.atomic import write_json_atomic, write_parquet_atomic
from rust_rewards.data.importers import load_tasks
from rust_rewards.data.pipeline import EVAL_FILE, PROCESSED_DIR
from rust_rewards.eval.metrics import ModelSummary, comparison_table, hacks, summarize
from rust_rewards.layout import RESULTS_FILE, SUMMARY_FILE, TASK_FILES, EvalFolder
from rust_rewards.params import param
from rust_rewards.prompts import asks_for_tests
from rust_rewards.tasks import Task
from rust_rewards.verify.verifier import BACKENDS, verifier_for

log = logging.getLogger("eval")  # named after the notebook, whose script lines it writes
PREDICTION_FILES = ("qwen3-rust-finetune/predictions/*.parquet", "qwen3-rust-finetune/predictions/*.jsonl",
                    "outputs/**/predictions*.parquet")
"""Prediction files a form offers (relative to the repository)."""


@dataclass
class EvalParams:
    """Every knob of an eval run (CLI flags use the same names; repeat --predictions or use commas)."""

    tasks: str = param(f"{PROCESSED_DIR}/{EVAL_FILE}", help="tasks the predictions answer "
                       "(process_data.py's eval.parquet, any task jsonl/parquet, or a Hugging Face dataset); their "
                       "hidden tests decide pass@k", group="Data", files=TASK_FILES)
    predictions: list[str] = param(default_factory=list, help="prediction files (parquet/jsonl: task_id, completion; "
                                   "optional model, sample, round), one model per file unless it has a model column",
                                   group="Data", files=PREDICTION_FILES)
    out: str = param("qwen3-rust-finetune/eval", help=f"folder for {RESULTS_FILE} (one row per completion) and "
                     f"{SUMMARY_FILE} (per model)", group="Output")
    k: list[int] = param(default_factory=lambda: [1, 5], help="k values of hidden-test pass@k, comma-separated, "
                         "each >= 1", group="Metrics")
    workers: int = param(0, help="cargo processes at once (0: one per usable CPU)", group="Verifier", advanced=True,
                         bounds=(0, None))
    top: int = param(10, help="most frequent compiler error codes and clippy lints listed per model (0: none)",
                     group="Metrics", bounds=(0, None))
    verifier: str = param("local", help="where cargo runs: local sandboxes, or workers of a Ray cluster",
                          group="Verifier", choices=BACKENDS)
    ray_address: str = param("auto", help="the Ray cluster of `--verifier ray`: auto, local or HOST:PORT",
                             group="Verifier", advanced=True)

    def __post_init__(self) -> None:
        if any(k < 1 for k in self.k):
            raise ValueError(f"--k values must be >= 1, got {self.k}")
        if self.verifier not in BACKENDS:
            raise ValueError(f"--verifier: expected one of {BACKENDS}, got {self.verifier!r}")


def _bad_json_row(path: Path) -> str:
    """``:N`` for the first line of a JSON-lines file that is not a JSON object (empty for a ``.json`` file)."""
    if path.suffix != ".jsonl":
        return ""
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            if line.strip() and not isinstance(json.loads(line), dict):
                return f":{number}"
        except json.JSONDecodeError:
            return f":{number}"
    return ""


def read_predictions(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Predictions from parquet/jsonl files: columns model, task_id, sample, completion (+ origin).

    ``model`` defaults to the file name without suffix; ``sample`` to the row's rank among rows of
    the same (model, task_id). ``origin`` says ``file:row`` (1-based) for error messages. When any file has a
    ``round`` column (repair rounds), it is kept after ``sample`` (0 for files without one).
    """
    if not paths:
        raise ValueError("no predictions file given (--predictions PATH)")
    frames = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"predictions file not found: {path}")
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix in (".jsonl", ".json"):
            try:
                df = pd.read_json(path, lines=path.suffix == ".jsonl", dtype=False)
            except ValueError as err:  # pandas names a byte position: name the file and the first bad row
                raise ValueError(f"{path}{_bad_json_row(path)}: not valid JSON ({err})") from None
        else:
            raise ValueError(f"{path}: predictions must be .parquet, .jsonl or .json")
        missing = [c for c in ("task_id", "completion") if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; found {list(df.columns)}")
        df = df.reset_index(drop=True)
        df["origin"] = [f"{path}:{i + 1}" for i in range(len(df))]
        if "model" not in df.columns:
            df["model"] = path.name.removesuffix(path.suffix)
        nulls = df[df["completion"].isna() | df["task_id"].isna() | df["model"].isna()]
        if not nulls.empty:
            raise ValueError(f"{nulls['origin'].iloc[0]}: null task_id, model or completion")
        df["task_id"] = df["task_id"].astype(str)
        df["model"] = df["model"].astype(str)
        if "sample" not in df.columns:
            df["sample"] = df.groupby(["model", "task_id"]).cumcount()
        if "answer_format" not in df.columns:  # predictions written before answer formats asked for tests
            df["answer_format"] = "solution+tests"
        frames.append(df[["model", "task_id", "sample", *(["round"] if "round" in df.columns else []),
                          "completion", "answer_format", "origin"]])
    preds = pd.concat(frames, ignore_index=True)
    keys = ["model", "task_id", "sample"]
    if "round" in preds.columns:
        preds["round"] = preds["round"].fillna(0)
        keys.append("round")
    for column in keys[2:]:
        try:
            preds[column] = preds[column].astype(int)
        except (TypeError, ValueError):
            raise ValueError(f"column {column!r} must hold integers") from None
    dup = preds[preds.duplicated(keys, keep=False)]
    if not dup.empty:
        first = dup.iloc[0]
        rows = ", ".join(dup[(dup[keys] == first[keys]).all(axis=1)]["origin"])
        where = f"model={first['model']!r}, task_id={first['task_id']!r}, sample={first['sample']}"
        where += f", round={first['round']}" if "round" in keys else ""
        raise ValueError(f"duplicate prediction ({where}) at {rows}: give each file its own model name")
    return preds


def score_predictions(
    tasks: Sequence[Task], predictions: pd.DataFrame,
    progress: Callable[[int, int], None] | bool = False, workers: int = 0, backend: str = "local",
    ray_address: str = "auto",
) -> pd.DataFrame:
    """Verify every prediction against its task's hidden tests: one row per completion.

    Columns: model, task_id, sample, (round,) completion, every key of ``Report.flat()`` (``internal_error``
    included; ``tests_ok`` None for answers whose ``answer_format`` asked for no test module) and ``hack_flags``:
    the row's likely-hack reasons (``metrics.hacks``; off-task answers and signature mismatches are in ``off_task``
    and ``mismatched``, no hack).
    A completion without code scores ``hidden_ok=False`` on a task with hidden tests (it stays in the pass@k
    denominator); one the verifier failed on internally has ``hidden_ok`` null and is reported, not scored.
    An unknown task id raises, naming the prediction row.
    ``workers`` > 0 replaces the process-wide verifier with one of that many workers (0: the shared
    default, one worker per usable CPU); ``backend="ray"`` verifies on the Ray cluster at ``ray_address``.
    """
    by_id = {t.task_id: t for t in tasks}
    unknown = predictions[~predictions["task_id"].isin(by_id)]
    if not unknown.empty:
        row = unknown.iloc[0]
        where = row["origin"] if "origin" in row else f"row {unknown.index[0]}"
        raise KeyError(
            f"{where}: task_id {row['task_id']!r} is not in the tasks file"
            f" ({len(unknown)} prediction(s) with unknown task ids)"
        )
    hidden = {tid: task.hidden_tests() for tid, task in by_id.items()}
    verifier = verifier_for(workers, backend, ray_address)
    reports = verifier.verify_many(
        predictions["completion"].tolist(),
        hidden=[hidden[tid] for tid in predictions["task_id"]],
        progress=progress,
    )
    asked = (predictions["answer_format"].map(asks_for_tests) if "answer_format" in predictions
             else [True] * len(reports))
    flat = pd.DataFrame([report.flat(bool(tests)) for report, tests in zip(reports, asked, strict=True)],
                        index=predictions.index)
    flat["hack_flags"] = [hacks(row) for row in flat.to_dict("records")]
    crashed = int((flat["internal_error"] != "").sum())
    if crashed:
        log.warning("the verifier failed internally on %d completion(s): see column internal_error", crashed)
    base = predictions[["model", "task_id", "sample", *(["round"] if "round" in predictions else []), "completion"]]
    return pd.concat([base, flat], axis=1).reset_index(drop=True)


def write_outputs(out: str | Path, results: pd.DataFrame, summaries: dict[str, ModelSummary]) -> None:
    """``out/results.parquet`` and ``out/summary.json``, each written atomically."""
    folder = EvalFolder(Path(out))
    write_parquet_atomic(results, folder.results)
    write_json_atomic({model: s.to_dict() for model, s in summaries.items()}, folder.summary)


def run_eval(
    params: EvalParams, progress: Callable[[int, int], None] | bool = False
) -> tuple[pd.DataFrame, dict[str, ModelSummary]]:
    """Load tasks and predictions, verify, summarize per model, write the outputs."""
    tasks = load_tasks(params.tasks)
    predictions = read_predictions(params.predictions)
    began = time.perf_counter()
    results = score_predictions(tasks, predictions, progress=progress, workers=params.workers,
                                backend=params.verifier, ray_address=params.ray_address)
    log.info("verified %d completions in %.1f s", len(results), time.perf_counter() - began)
    summaries = summarize(results, params.k, params.top)
    write_outputs(params.out, results, summaries)
    folder = EvalFolder(Path(params.out))
    log.info("per model:\n%s", comparison_table(summaries).round(4).to_string(index=False))
    log.info("wrote %s and %s", folder.results, folder.summary)
    return results, summaries


def log_progress(done: int, total: int) -> None:
    """Script-mode progress: a log line every 10% (and at the end)."""
    step = max(1, total // 10)
    if done == total or done % step == 0:
        log.info("verified %d/%d", done, total)
