"""Training tasks that can teach (open-r1's pass-rate filter, done once up front): before GRPO, sample the starting
policy K times per training task, verify the samples, score them with the run's rewards and weights (a cut-off answer
earns nothing), and keep the tasks whose K rewards are not all equal (under the correctness recipe: a mix of hidden-
test passes, or of builds, the term that shapes them; ``--pass-rate-keep hidden``: only a mix of hidden-test passes
and failures). A group whose answers all score alike has zero advantage and no gradient.

The counts are written to the run folder (``PASS_RATES_FILE``) and reused when the run resumes with the same
starting policy and sampling. The work itself is kept as it comes (``PASS_RATE_SAMPLES_FILE``, ``SampleLog``): the
tasks are sampled in chunks of one generation batch, each chunk seeded on its own (the run's seed and the chunk's
place), so an interrupted filter resumes with the tasks it had not judged and keeps the tasks an uninterrupted one
keeps. It says how far it is at least every ``progress.EVERY`` seconds. Too few mixed tasks stops the run before any
training (``NoSignalError``), with the counts: the go/no-go.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rust_rewards.atomic import write_json_atomic, write_text_atomic
from rust_rewards.layout import PASS_RATE_SAMPLES_FILE, PASS_RATES_FILE
from rust_rewards.rewards import rewards_from_report, weighted_total
from rust_rewards.rewards.recipes import resolve_weights
from rust_rewards.sampling.engines import DEFAULT_BATCH_SIZE, Generation, Generator, SamplingParams, make_generator
from rust_rewards.tasks import Task
from rust_rewards.train.config import TrainParams
from rust_rewards.train.progress import ProgressLine
from rust_rewards.verify.verifier import Verifier


class NoSignalError(ValueError):
    """Too few training tasks have a mix of passes and failures for GRPO to learn from."""


@dataclass(frozen=True)
class PassRates:
    """``k`` samples per training task: hidden-test passes (a cut-off answer counts as a failure) and each sample's
    weighted reward total."""

    k: int
    passed: dict[str, int]
    totals: dict[str, list[float]]
    setup: dict[str, Any]
    seconds: float = 0.0

    def mixed(self) -> list[str]:
        """Tasks whose samples' rewards are not all equal (a GRPO group of them has a signal)."""
        return [t for t, values in self.totals.items() if max(values) > min(values)]

    def hidden_mixed(self) -> list[str]:
        """Tasks whose samples both pass and fail the hidden tests (a signal in correctness itself)."""
        return [t for t, n in self.passed.items() if 0 < n < self.k]

    def kept(self, keep: str) -> list[str]:
        """The tasks a run trains on: ``mixed()`` for ``keep="rewards"``, ``hidden_mixed()`` for ``"hidden"``."""
        return self.hidden_mixed() if keep == "hidden" else self.mixed()

    def verdict(self) -> str:
        """One line: how many tasks have a signal, how many of them a mix of hidden-test passes and failures."""
        hidden = len(self.hidden_mixed())
        always = sum(n == self.k for n in self.passed.values())
        never = sum(n == 0 for n in self.passed.values())
        return (f"pass-rate filter ({self.k} samples per task, {self.seconds:.0f} s): {len(self.mixed())} of "
                f"{len(self.passed)} training tasks have unequal rewards; hidden tests: {hidden} mixed, {never} "
                f"never passed, {always} always passed ({sum(self.passed.values())}/{self.k * len(self.passed)})")


def _setup(p: TrainParams) -> dict[str, Any]:
    """What the counts depend on: a resumed run reuses them only when all of it is unchanged."""
    return {"model": p.model, "init_adapter": p.init_adapter, "answer_format": p.answer_format, "k": p.pass_rate_k,
            "rewards": p.rewards, "reward_weights": p.reward_weights,
            "temperature": p.temperature, "top_p": p.top_p, "max_new_tokens": p.max_completion_length,
            "seed": p.seed, "data": p.data, "max_tasks": p.max_tasks, "engine": p.generation_engine,
            "stop_at_fence": p.stop_at_fence}


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists)."""
    return json.loads(json.dumps(value))


@dataclass
class SampleLog:
    """The filter's work in the run folder (``PASS_RATE_SAMPLES_FILE``): a header line (what the samples depend
    on), then per task a line of its ``k`` samples and, once verified, a line of its verdict (hidden-test passes,
    reward totals, seconds). Lines are appended and synced as they come; a last line cut short by a crash is
    ignored."""

    path: Path
    samples: dict[str, list[dict[str, Any]]]
    verdicts: dict[str, dict[str, Any]]

    @classmethod
    def open(cls, path: Path, header: dict[str, Any]) -> SampleLog:
        """The work saved at ``path`` for ``header``; a file of another header is started anew (and says so)."""
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        rows = []
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # cut short by a crash
                continue
        log = cls(path, {}, {})
        if rows and rows[0] == {"header": _as_json(header)}:
            for row in rows[1:]:
                (log.samples if "samples" in row else log.verdicts)[row["task_id"]] = row
            if not text.endswith("\n"):
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write("\n")  # the next line starts on a line of its own
            return log
        if rows:
            print(f"pass-rate filter: {path} holds the samples of other settings; sampling anew", flush=True)
        write_text_atomic(json.dumps({"header": header}) + "\n", path)
        return log

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` as JSON lines, synced to disk; each one is also kept in memory."""
        with open(self.path, "ab") as handle:
            handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode())
            handle.flush()
            os.fsync(handle.fileno())
        for row in rows:
            (self.samples if "samples" in row else self.verdicts)[row["task_id"]] = row


def _saved_rates(path: Path, setup: dict[str, Any], tasks: Sequence[Task]) -> PassRates | None:
    """The counts in ``path`` when they are of ``setup`` and exactly ``tasks``."""
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    if saved.get("setup") != _as_json(setup) or set(saved.get("passed", {})) != {t.task_id for t in tasks}:
        return None
    return PassRates(saved["k"], saved["passed"], saved["totals"], saved["setup"], saved.get("seconds", 0.0))


def chunk_seed(seed: int, chunk: int) -> int:
    """The sampling seed of the ``chunk``-th chunk of tasks: the same for a chunk whichever chunks came before."""
    return (seed * 1_000_003 + chunk) % 2**63


def sample_pass_rates(p: TrainParams, tasks: Sequence[Task], verifier: Verifier,
                      batch_size: int = DEFAULT_BATCH_SIZE, generator: Generator | None = None) -> PassRates:
    """``p.pass_rate_k`` samples per task from the starting policy (``p.model`` + ``p.init_adapter``; or
    ``generator``), with the rollouts' prompt, temperature, top-p and length, verified by ``verifier``; read back
    from the run folder when it already holds them for the same setup.

    The tasks go in chunks of ``batch_size // k`` (one generation call each, seeded by ``chunk_seed``); each
    chunk's samples and then its verdicts are appended to the ``SampleLog`` as they come, so Ctrl-C keeps them and
    the same call resumes with the tasks not judged (the model is loaded only when something is left to sample)."""
    import torch

    out, k = Path(p.output_dir), p.pass_rate_k
    setup = _setup(p)
    rates = _saved_rates(out / PASS_RATES_FILE, setup, tasks)
    if rates is not None:
        return rates
    per_chunk = max(1, batch_size // k)
    log = SampleLog.open(out / PASS_RATE_SAMPLES_FILE, {"setup": setup, "tasks_per_chunk": per_chunk})
    chunks = [list(tasks[i:i + per_chunk]) for i in range(0, len(tasks), per_chunk)]
    judged = sum(t.task_id in log.verdicts for t in tasks)
    if judged < len(tasks):
        print(f"pass-rate filter, before step 1: {len(tasks) - judged} training tasks x {k} samples from the starting "
              f"policy, verified (--pass-rate-k 0 skips it); kept as they come in {log.path}"
              + (f" ({judged} tasks already judged there)" if judged else ""), flush=True)
    sampling = SamplingParams(n=k, temperature=p.temperature, top_p=p.top_p,
                              max_new_tokens=p.max_completion_length, seed=p.seed)
    weights = resolve_weights(p.rewards, p.reward_weights)
    progress = ProgressLine("pass-rate filter", len(tasks) * k, "samples", done=judged * k)
    try:
        with progress:
            for n, chunk in enumerate(chunks):
                todo = [t for t in chunk if t.task_id not in log.verdicts]
                if not todo:
                    continue
                first, last = n * per_chunk + 1, n * per_chunk + len(chunk)
                where = f"task{f' {first}' if first == last else f's {first}-{last}'} of {len(tasks)}"
                began = time.monotonic()
                if any(t.task_id not in log.samples for t in todo):  # the whole chunk, as its seed drew it
                    progress.update(note=f"{where}: sampling")
                    generator = generator or make_generator(
                        "hf", p.model, p.init_adapter or None, batch_size=batch_size, seed=p.seed,
                        answer_format=p.answer_format, engine=p.generation_engine, stop_at_fence=p.stop_at_fence)
                    torch.manual_seed(chunk_seed(p.seed, n))
                    gens = generator.generate([generator.render(t.prompt) for t in chunk for _ in range(k)], sampling)
                    log.append([{"task_id": t.task_id, "samples": [asdict(g) for g in gens[i * k:(i + 1) * k]]}
                                for i, t in enumerate(chunk) if t.task_id not in log.verdicts])
                log.append(_verdicts(todo, log, verifier, weights, progress, where, began))
                progress.update(progress.done + len(todo) * k, note="")
    except KeyboardInterrupt:
        judged = sum(t.task_id in log.verdicts for t in tasks)
        sampled = sum(t.task_id in log.samples and t.task_id not in log.verdicts for t in tasks)
        print(f"pass-rate filter interrupted: {judged} of {len(tasks)} tasks judged"
              + (f" and {sampled} more sampled" if sampled else "") + f", kept in {log.path}; the same command "
              "resumes the filter with the rest", file=sys.stderr, flush=True)
        raise
    verdicts = [log.verdicts[t.task_id] for t in tasks]
    rates = PassRates(k, {v["task_id"]: v["passed"] for v in verdicts}, {v["task_id"]: v["totals"] for v in verdicts},
                      setup, sum(v["seconds"] for v in verdicts))
    write_json_atomic(asdict(rates), out / PASS_RATES_FILE)
    return rates


def _verdicts(todo: list[Task], log: SampleLog, verifier: Verifier, weights: dict[str, float],
              progress: ProgressLine, where: str, began: float) -> list[dict[str, Any]]:
    """Verify the saved samples of ``todo``: one verdict row per task (hidden-test passes, a cut-off answer counting
    as a failure; weighted reward totals, a cut-off answer earning nothing; its share of the chunk's seconds)."""
    gens = [Generation(**g) for t in todo for g in log.samples[t.task_id]["samples"]]
    hidden = [t.hidden_tests() for t in todo for _ in log.samples[t.task_id]["samples"]]
    reports = verifier.verify_many([g.text for g in gens], hidden=hidden,
                                   progress=lambda done, total: progress.update(note=f"{where}: verified "
                                                                                     f"{done}/{total}"))
    rows, at = [], 0
    seconds = (time.monotonic() - began) / len(todo)
    for task in todo:
        k = len(log.samples[task.task_id]["samples"])
        mine = list(zip(gens[at:at + k], reports[at:at + k], strict=True))
        at += k
        rows.append({"task_id": task.task_id, "passed": sum(bool(r.hidden_ok) and not g.truncated for g, r in mine),
                     "totals": [0.0 if g.truncated else weighted_total(rewards_from_report(r), weights)
                                for g, r in mine], "seconds": seconds})
    return rows


def tasks_with_signal(p: TrainParams, tasks: Sequence[Task], rates: PassRates) -> list[Task]:
    """The tasks ``rates`` found with a signal (``p.pass_rate_keep``: unequal rewards, or a mix of hidden-test
    passes and failures), in their order; ``NoSignalError`` when fewer than ``p.min_mixed_tasks``."""
    mixed = set(rates.kept(p.pass_rate_keep))
    if len(mixed) < p.min_mixed_tasks:
        what = "a mix of hidden-test passes" if p.pass_rate_keep == "hidden" else "GRPO a signal"
        raise NoSignalError(
            f"{rates.verdict()}: fewer than --min-mixed-tasks {p.min_mixed_tasks} tasks would give {what}; "
            "not training. Start from a stronger policy (an SFT adapter: --stage sft, then --init-adapter), "
            "easier tasks, a higher --temperature or more samples (--pass-rate-k), or --pass-rate-k 0 to train on "
            "every task anyway")
    return [task for task in tasks if task.task_id in mixed]
