"""Write sampled completions for tasks as a predictions file, resumably (``rust_rewards.sampling``'s backends).

Work is a list of (task_id, sample) pairs, and with repair rounds (task_id, sample, round) triples. Finished
chunks are written to ``<out>.parts/`` as they complete; a rerun with the same output path skips every row
already there (or already in ``<out>``) and the final parquet is written atomically, after which the parts
folder is removed.

Repair rounds (``repair_rounds`` > 0): after round r-1 is complete, its answers are verified with the task's
hidden tests (the report eval computes); an answer that fails a check the model may see gets round r, generated
from the original chat + that answer + a user turn holding ``feedback_message(report)``; an answer that passes
them is carried into round r unchanged (``carried``). Every (task_id, sample) thus has one row per round 0..N,
and round N holds the final answer after up to N repairs.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.prompts import asks_for_tests
from rust_rewards.report import Report
from rust_rewards.rewards.feedback import DEFAULT_MAX_TOKENS, feedback_message
from rust_rewards.sampling.engines import Generator, SamplingParams, token_counter
from rust_rewards.tasks import Task
from rust_rewards.verify.verifier import Verifier, get_verifier

DEFAULT_CHUNK_SIZE = 64
"""Completions per generation call and per chunk written to disk (one full batch)."""

RUN_COLUMNS = ("model", "base_model", "adapter", "backend", "answer_format", "temperature", "top_p",
               "max_new_tokens", "greedy", "seed")
"""Columns that must match between a resumed run and the rows already written."""

PREDICTION_COLUMNS = ("task_id", "sample", "completion", "completion_tokens", "truncated", *RUN_COLUMNS,
                      "generated_at", "gen_seconds")

ROUND_DEFAULTS: dict[str, Any] = {"round": 0, "feedback": "", "carried": False}
"""Columns written only with repair rounds, and their value for a row without them (a first answer):
``round`` (0 = the first answer), ``feedback`` (the user turn this answer replies to, "" in round 0 and when
carried) and ``carried`` (copied unchanged from round - 1, which passed every check the model may see)."""


def prediction_columns(repair_rounds: int = 0) -> list[str]:
    """The output's columns: ``PREDICTION_COLUMNS``, plus ``round`` after ``sample`` and ``feedback, carried``
    at the end when ``repair_rounds`` > 0."""
    if not repair_rounds:
        return list(PREDICTION_COLUMNS)
    return ["task_id", "sample", "round", *PREDICTION_COLUMNS[2:], "feedback", "carried"]


def parts_dir(out: str | Path) -> Path:
    """Where finished chunks of ``out`` wait until the final file is written."""
    out = Path(out)
    return out.with_name(out.name + ".parts")


def read_done(out: str | Path) -> pd.DataFrame:
    """Rows already generated for ``out``: the final file (if any) plus every finished chunk.

    When any row has a ``round``, rows without one (written by a run without repair rounds) are round 0.
    """
    out = Path(out)
    frames = [pd.read_parquet(out)] if out.exists() else []
    frames += [pd.read_parquet(p) for p in sorted(parts_dir(out).glob("chunk_*.parquet"))]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    done = pd.concat(frames, ignore_index=True)
    if "round" in done.columns:
        for column, default in ROUND_DEFAULTS.items():
            done[column] = done[column].fillna(default).astype(type(default))
    return done.drop_duplicates(_row_key(done), keep="first")


def _row_key(rows: pd.DataFrame) -> list[str]:
    return ["task_id", "sample", "round"] if "round" in rows.columns else ["task_id", "sample"]


def check_compatible(done: pd.DataFrame, run: dict[str, Any], out: str | Path) -> None:
    """Refuse to resume into an output written with another model, adapter or sampling setup."""
    for column, value in run.items():
        if done.empty or column not in done.columns:
            continue
        seen = {None if pd.isna(v) else v for v in done[column].unique()}
        if seen != {value}:
            raise ValueError(
                f"{out} already holds rows with {column}={sorted(map(str, seen))}, this run has {value!r}:"
                " choose another --out or delete the old file to start over"
            )


def run_columns(
    params: SamplingParams, *, model: str, base_model: str, adapter: str | None, backend: str,
    answer_format: str = "solution+tests",
) -> dict[str, Any]:
    """The per-run values written on every row (and checked on resume)."""
    sampling = {k: v for k, v in asdict(params).items() if k in RUN_COLUMNS}
    return {"model": model, "base_model": base_model, "adapter": adapter or "", "backend": backend,
            "answer_format": answer_format, **sampling}


def generate_predictions(
    tasks: Sequence[Task],
    generator: Generator,
    params: SamplingParams,
    out: str | Path,
    *,
    model: str,
    base_model: str,
    adapter: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Callable[[int, int], None] | None = None,
    repair_rounds: int = 0,
    feedback_tokens: int = DEFAULT_MAX_TOKENS,
    verifier: Verifier | None = None,
    answer_format: str = "solution+tests",
) -> pd.DataFrame:
    """Generate ``params.n`` completions per task into ``out`` (parquet) and return every row.

    Resumable: rows already in ``out`` or its parts folder are skipped. ``progress(done, total)`` is called
    after each chunk, counted in generated completions of this run (the total grows as repair rounds find
    answers to repair). ``repair_rounds`` > 0 adds rounds 1..N (see the module docstring), with feedback of at
    most ``feedback_tokens`` tokens of the generator's tokenizer, scored by ``verifier`` (default: the shared one);
    ``answer_format`` (the generator's prompt asks for it) is written on every row, and with ``solution`` the repair
    feedback does not ask for tests.
    """
    if repair_rounds < 0:
        raise ValueError(f"repair_rounds must be >= 0, got {repair_rounds}")
    out = Path(out)
    run = run_columns(params, model=model, base_model=base_model, adapter=adapter, backend=generator.backend,
                      answer_format=answer_format)
    done = read_done(out)
    check_compatible(done, run, out)
    last = int(done["round"].max()) if "round" in done.columns else 0
    if last > repair_rounds:
        raise ValueError(f"{out} already holds repair rounds up to {last}, this run asks for {repair_rounds}:"
                         f" pass --repair-rounds {last} or choose another --out")
    writer = _ChunkWriter(parts_dir(out), repair_rounds, progress)
    have = set(zip(done["task_id"].astype(str), done["sample"].astype(int), strict=True))
    pending = [(t, s, ()) for t in tasks for s in range(params.n) if (t.task_id, s) not in have]
    writer.generate(generator, params, pending, {"round": 0}, run, chunk_size)
    if repair_rounds:
        count = token_counter(generator.tokenizer)
        verifier = verifier or get_verifier()
        for number in range(1, repair_rounds + 1):
            pending = _repairs(tasks, params.n, read_done(out), number, writer, verifier,
                               lambda report: feedback_message(report, feedback_tokens, count,
                                                               tests_asked=asks_for_tests(answer_format)))
            writer.generate(generator, params, pending, {"round": number}, run, chunk_size)
    result = read_done(out)
    order = {t.task_id: i for i, t in enumerate(tasks)}
    result = result.assign(_order=result["task_id"].map(order).fillna(len(order)))
    result = result.sort_values(["_order", *_row_key(result)], kind="stable").drop(columns="_order")
    result = result.reset_index(drop=True)[prediction_columns(repair_rounds)]
    result["sample"] = result["sample"].astype(int)
    write_parquet_atomic(result, out)
    shutil.rmtree(writer.parts, ignore_errors=True)
    return result


Pending = list[tuple[Task, int, tuple[tuple[str, str], ...]]]
"""(task, sample, repair turns) still to generate; the turns are (previous answer, feedback) pairs."""


class _ChunkWriter:
    """Writes finished rows as numbered chunks in the parts folder and reports generation progress."""

    def __init__(self, parts: Path, repair_rounds: int,
                 progress: Callable[[int, int], None] | None) -> None:
        self.parts = parts
        self.number = len(list(parts.glob("chunk_*.parquet"))) if parts.exists() else 0
        self.columns = prediction_columns(repair_rounds)
        self.progress = progress
        self.done = self.total = 0

    def write(self, rows: list[dict[str, Any]]) -> None:
        rows = [{**ROUND_DEFAULTS, **row} for row in rows]
        write_parquet_atomic(pd.DataFrame(rows, columns=self.columns), self.parts / f"chunk_{self.number:05d}.parquet")
        self.number += 1

    def generate(self, generator: Generator, params: SamplingParams, pending: Pending, extra: dict[str, Any],
                 run: dict[str, Any], chunk_size: int) -> None:
        """Generate ``pending`` chunk by chunk; each row gets ``extra`` (its round) and its feedback turn."""
        self.total += len(pending)
        if self.progress:
            self.progress(self.done, self.total)
        rendered: dict[str, str] = {}
        for start in range(0, len(pending), chunk_size):
            chunk = pending[start : start + chunk_size]
            prompts = [rendered.setdefault(t.task_id, generator.render(t.prompt)) if not turns
                       else generator.render(t.prompt, turns) for t, _, turns in chunk]
            began = time.perf_counter()
            gens = generator.generate(prompts, params)
            seconds = (time.perf_counter() - began) / len(chunk)
            stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            self.write([
                {"task_id": t.task_id, "sample": s, **extra, "completion": g.text, "completion_tokens": g.tokens,
                 "truncated": g.truncated, **run, "generated_at": stamp, "gen_seconds": round(seconds, 4),
                 "feedback": turns[-1][1] if turns else ""}
                for (t, s, turns), g in zip(chunk, gens, strict=True)
            ])
            self.done += len(chunk)
            if self.progress:
                self.progress(self.done, self.total)


def _repairs(tasks: Sequence[Task], n: int, done: pd.DataFrame, number: int, writer: _ChunkWriter,
             verifier: Verifier, feedback: Callable[[Report], str | None]) -> Pending:
    """Round ``number``'s work: verify round ``number - 1``'s answers still without a successor; write the ones
    that pass every visible check as carried rows; return the others with their feedback turn."""
    done = done if "round" in done.columns else done.assign(**ROUND_DEFAULTS)
    by_id = {t.task_id: t for t in tasks}
    wanted = {(t.task_id, s) for t in tasks for s in range(n)}
    have = set(zip(done.loc[done["round"] == number, "task_id"], done.loc[done["round"] == number, "sample"],
                   strict=True))
    previous = [row for row in done[done["round"] == number - 1].to_dict("records")
                if (row["task_id"], row["sample"]) in wanted and (row["task_id"], row["sample"]) not in have]
    reports = verifier.verify_many([row["completion"] for row in previous],
                                   hidden=[by_id[row["task_id"]].hidden_tests() for row in previous])
    carried: list[dict[str, Any]] = []
    pending: Pending = []
    for row, report in zip(previous, reports, strict=True):
        message = feedback(report)
        if message is None:
            carried.append({**row, "round": number, "feedback": "", "carried": True, "gen_seconds": 0.0})
        else:
            pending.append((by_id[row["task_id"]], int(row["sample"]), ((row["completion"], message),)))
    if carried:
        writer.write(carried)
    return pending
