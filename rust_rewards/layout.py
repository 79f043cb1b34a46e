"""The names of what a training run folder (``train.py --output-dir``) and an eval folder (``eval.py --out``) hold:
the one place the writers (``rust_rewards.train``, ``rust_rewards.eval.scoring``) and the readers
(``rust_rewards.runs.records``, viz.py) take them from.

Training run folder: ``params.json`` (the first start's parameters), ``params_history.jsonl`` (one line per start),
``metrics.jsonl`` (one line per logged step), ``completions/step_NNNNNN.parquet`` (one row per sampled completion),
``eval/step_NNNNNN.parquet`` (held-out evaluations), with ``--pass-rate-k`` ``pass_rate_samples.jsonl`` and
``pass_rates.json``, with ``--hints`` ``hints.jsonl`` and ``hint_levels.json``,
``checkpoint-N/``, ``adapter/`` and, while asked to stop, ``STOP``. Eval folder: ``summary.json`` (per model)
and ``results.parquet`` (one row per completion).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PARAMS_FILE = "params.json"
PARAMS_HISTORY_FILE = "params_history.jsonl"
METRICS_FILE = "metrics.jsonl"
COMPLETIONS_DIR = "completions"
HELD_OUT_DIR = "eval"
STEP_GLOB = "step_*.parquet"
"""The per-step parquet files of ``completions/`` and ``eval/``."""
STOP_FILE = "STOP"
"""Created in a run folder to stop its training cleanly at the end of the current step (with a checkpoint)."""
PASS_RATES_FILE = "pass_rates.json"
"""The starting policy's hidden-test passes per training task (``--pass-rate-k``), reused when a run resumes."""
PASS_RATE_SAMPLES_FILE = "pass_rate_samples.jsonl"
"""The pass-rate filter's samples and verdicts, appended as they come: an interrupted filter resumes from them."""
HINTS_FILE = "hints.jsonl"
"""With ``--hints``: one line per step, each task's hint fraction in its groups and how many groups had reward
spread."""
HINT_LEVELS_FILE = "hint_levels.json"
"""With ``--hints adaptive``: each task's current hint level, reused when the run resumes."""
ADAPTER_DIR = "adapter"
CHECKPOINT_GLOB = "checkpoint-*"

SUMMARY_FILE = "summary.json"
RESULTS_FILE = "results.parquet"

TASK_FILES = ("qwen3-rust-finetune/*.jsonl", "qwen3-rust-finetune/*.parquet",
              "qwen3-rust-finetune/processed*/*.parquet")
"""Task files the forms offer (relative to the workspace): the task sets and what process_data.py wrote."""
MODEL_DIRS = ("outputs/tiny-model*/",)
"""Local model folders the train form offers."""
ADAPTER_DIRS = (f"outputs/*/{ADAPTER_DIR}/", f"outputs/*/{CHECKPOINT_GLOB}/")
"""Adapters the forms offer: finished runs' and their checkpoints'."""


def step_file_name(step: int) -> str:
    """``step_000012.parquet`` for step 12."""
    return f"step_{step:06d}.parquet"


@dataclass(frozen=True)
class RunFolder:
    """The paths of one training run folder."""

    root: Path

    @property
    def params(self) -> Path:
        return self.root / PARAMS_FILE

    @property
    def params_history(self) -> Path:
        return self.root / PARAMS_HISTORY_FILE

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def completions(self) -> Path:
        return self.root / COMPLETIONS_DIR

    @property
    def stop(self) -> Path:
        return self.root / STOP_FILE

    @property
    def hints(self) -> Path:
        return self.root / HINTS_FILE

    @property
    def hint_levels(self) -> Path:
        return self.root / HINT_LEVELS_FILE

    def completions_at(self, step: int) -> Path:
        """The parquet file of the completions sampled at ``step``."""
        return self.completions / step_file_name(step)

    def held_out_at(self, step: int) -> Path:
        """The parquet file of the held-out evaluation at ``step``."""
        return self.root / HELD_OUT_DIR / step_file_name(step)

    def completion_files(self) -> list[Path]:
        """Every step's completions file written so far, oldest first."""
        return sorted(self.completions.glob(STEP_GLOB))


@dataclass(frozen=True)
class EvalFolder:
    """The paths of one eval folder."""

    root: Path

    @property
    def summary(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def results(self) -> Path:
        return self.root / RESULTS_FILE
