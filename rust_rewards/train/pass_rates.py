"""Training tasks that can teach (open-r1's pass-rate filter, done once up front): before GRPO, sample the starting
policy K times per training task, verify the samples, score them with the run's rewards and weights (a cut-off answer
earns nothing), and keep the tasks whose K rewards are not all equal (under the correctness recipe: a mix of hidden-
test passes, or of builds, the term that shapes them; ``--pass-rate-keep hidden``: only a mix of hidden-test passes
and failures). A group whose answers all score alike has zero advantage and no gradient.

The counts are written to the run folder (``PASS_RATES_FILE``) and reused when the run resumes with the same
starting policy and sampling. Too few mixed tasks stops the run before any training (``NoSignalError``), with the
counts: the go/no-go.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rust_rewards.atomic import write_json_atomic
from rust_rewards.eval.generation import DEFAULT_BATCH_SIZE, SamplingParams, make_generator
from rust_rewards.layout import PASS_RATES_FILE
from rust_rewards.rewards import rewards_from_report, weighted_total
from rust_rewards.rewards.recipes import resolve_weights
from rust_rewards.tasks import Task
from rust_rewards.train.config import TrainParams
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
            "seed": p.seed, "data": p.data, "max_tasks": p.max_tasks}


def sample_pass_rates(p: TrainParams, tasks: Sequence[Task], verifier: Verifier,
                      batch_size: int = DEFAULT_BATCH_SIZE) -> PassRates:
    """``p.pass_rate_k`` samples per task from the starting policy (``p.model`` + ``p.init_adapter``), with the
    rollouts' prompt, temperature, top-p and length, verified by ``verifier``; read back from the run folder when
    it already holds them for the same setup."""
    path = Path(p.output_dir) / PASS_RATES_FILE
    setup = _setup(p)
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("setup") == setup and set(saved.get("passed", {})) == {t.task_id for t in tasks}:
            return PassRates(saved["k"], saved["passed"], saved["totals"], saved["setup"], saved.get("seconds", 0.0))
    began = time.monotonic()
    generator = make_generator("hf", p.model, p.init_adapter or None, batch_size=batch_size, seed=p.seed,
                               answer_format=p.answer_format, engine=p.generation_engine)
    sampling = SamplingParams(n=p.pass_rate_k, temperature=p.temperature, top_p=p.top_p,
                              max_new_tokens=p.max_completion_length, seed=p.seed)
    work = [task for task in tasks for _ in range(p.pass_rate_k)]
    gens = generator.generate([generator.render(task.prompt) for task in work], sampling)
    reports = verifier.verify_many([g.text for g in gens], hidden=[task.hidden_tests() for task in work])
    weights = resolve_weights(p.rewards, p.reward_weights)
    passed = {task.task_id: 0 for task in tasks}
    totals: dict[str, list[float]] = {task.task_id: [] for task in tasks}
    for task, gen, report in zip(work, gens, reports, strict=True):
        passed[task.task_id] += int(bool(report.hidden_ok) and not gen.truncated)
        totals[task.task_id].append(0.0 if gen.truncated else weighted_total(rewards_from_report(report), weights))
    rates = PassRates(p.pass_rate_k, passed, totals, setup, time.monotonic() - began)
    write_json_atomic(asdict(rates), path)
    return rates


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
