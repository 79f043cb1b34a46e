"""Held-out evaluation during training (``train.py --eval-tasks FILE --eval-every N``).

Every ``every`` optimizer steps (and at the end of training, unless that step was just evaluated) the main process
samples ``n`` completions per held-out task with the CURRENT policy: through the rollouts' own vLLM engine when GRPO
generates with vLLM in one process (``RolloutEngineGenerator``: the current weights pushed to it first), else the
trainer's LoRA-wrapped model through HF ``generate`` and ``rust_rewards.sampling.engines``' batching. It verifies
them against the hidden tests with the same verifier as eval.py, and logs ``eval/*`` metrics (``eval_metrics``,
computed by ``rust_rewards.eval.metrics``) as an extra ``metrics.jsonl`` line at that step and to wandb when a run
is active. Per-completion rows (eval.py's results columns) go to ``OUT/eval/step_<N>.parquet``. A long evaluation
says how far it is (sampling, then verifying) at least every ``progress.EVERY`` seconds.

The training trajectory is not changed: every RNG state (python, numpy, torch CPU and CUDA) is saved before and
restored after, generation runs under ``torch.no_grad`` (``inference_mode``) with the model in eval mode (its
previous mode restored), and neither the dataloader nor the optimizer is touched. The sampling itself is seeded with
the run's seed, so every evaluation draws from the same random stream (less noise between steps; HF generation
only: vLLM's sampler keeps its own).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pandas as pd
from transformers import TrainerCallback

from rust_rewards.atomic import write_parquet_atomic
from rust_rewards.eval.metrics import summarize_model
from rust_rewards.layout import RunFolder
from rust_rewards.prompts import SYSTEM_PROMPT, asks_for_tests, system_prompt
from rust_rewards.sampling.decoding import DEFAULT_ENGINE, fence_stop
from rust_rewards.sampling.engines import (
    DEFAULT_BATCH_SIZE,
    Generation,
    HFGenerator,
    SamplingParams,
    decode_generation,
    render_chat,
)
from rust_rewards.tasks import Task
from rust_rewards.train.progress import ProgressLine
from rust_rewards.train.run_log import append_metrics
from rust_rewards.verify.verifier import Verifier, get_verifier

EVAL_KEYS = ("eval/build_rate", "eval/clippy_rate", "eval/test_rate", "eval/hidden_pass_at_1",
             "eval/hidden_pass_at_1_lo", "eval/hidden_pass_at_1_hi", "eval/n", "eval/seconds")


def eval_file(out_dir: str | Path, step: int) -> Path:
    """The held-out evaluation results of ``step`` in the run folder ``out_dir``."""
    return RunFolder(Path(out_dir)).held_out_at(step)


def eval_metrics(results: pd.DataFrame) -> dict[str, float | int | None]:
    """``eval/*`` metrics of one evaluation's result rows (eval.py's columns), by ``summarize_model``: build,
    clippy and test rates over completions, hidden pass@1 (mean over tasks with hidden tests) with its 95% Wilson
    interval (None when no task has hidden tests), and ``eval/n`` completions."""
    summary = summarize_model(results)
    lo, hi = summary.ci.get("hidden_pass_at_1", (None, None))
    return {
        "eval/build_rate": summary.build_rate,
        "eval/clippy_rate": summary.clippy_rate,
        "eval/test_rate": summary.test_rate,
        "eval/hidden_pass_at_1": summary.hidden_pass_at_1,
        "eval/hidden_pass_at_1_lo": lo,
        "eval/hidden_pass_at_1_hi": hi,
        "eval/n": summary.n,
    }


@contextmanager
def preserved_rng():
    """Restore python ``random``, numpy and torch (CPU and every CUDA device) RNG states on exit."""
    import numpy as np
    import torch

    py, npy, cpu = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


@contextmanager
def eval_mode(model: Any):
    """``model.eval()`` inside, its previous mode back on exit."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


class PolicyGenerator(HFGenerator):
    """``HFGenerator``'s batching and decoding on a model already in memory (the policy being trained)."""

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = DEFAULT_BATCH_SIZE,
                 engine: str = DEFAULT_ENGINE, stop_at_fence: str = "auto") -> None:
        self.model = model
        self.engine = engine
        self.tokenizer = tokenizer
        self.stop = fence_stop(tokenizer, stop_at_fence)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self.device = next(model.parameters()).device
        self.batch_size = batch_size
        eos = model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None} or {tokenizer.eos_token_id}


class RolloutEngineGenerator:
    """Held-out sampling through the GRPO trainer's own vLLM engine (TRL's ``VLLMGeneration``, colocate or server),
    so evaluation costs what a rollout costs instead of a slow HF ``generate`` beside it.

    The current policy weights are pushed to the engine first (``sync_weights``: the rollouts would do the same at
    the next step), and the engine's rollout settings (temperature, top-p, length) are swapped for the evaluation's
    during the call and restored after. One process only: the engine's calls are collectives across processes.
    Untested on hardware (vLLM needs a GPU); on CPU the same calls are exercised with a stand-in engine.
    """

    backend = "vllm-rollouts"
    system = SYSTEM_PROMPT
    SETTINGS = ("temperature", "top_p", "max_completion_length")

    def __init__(self, engine: Any, tokenizer: Any) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        eos = tokenizer.eos_token_id
        self.eos_ids = {eos} if eos is not None else set()

    def render(self, task_prompt: str, repairs: Sequence[tuple[str, str]] = ()) -> str:
        return render_chat(self.tokenizer, task_prompt, self.system, repairs)

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        saved = {name: getattr(self.engine, name) for name in self.SETTINGS}
        self.engine.temperature = 0.0 if params.greedy else params.temperature
        self.engine.top_p = 1.0 if params.greedy else params.top_p
        self.engine.max_completion_length = params.max_new_tokens
        try:
            self.engine.sync_weights()
            _, completions, _, _ = self.engine.generate(prompts=ids, images=None, num_generations=1)
        finally:
            for name, value in saved.items():
                setattr(self.engine, name, value)
        return [decode_generation(self.tokenizer, ids, self.eos_ids, params.max_new_tokens) for ids in completions]


def evaluate_policy(model: Any, tokenizer: Any, tasks: Sequence[Task], sampling: SamplingParams,
                    batch_size: int = DEFAULT_BATCH_SIZE, label: str = "policy", engine: Any = None,
                    answer_format: str = "solution+tests", verifier: Verifier | None = None,
                    generation_engine: str = DEFAULT_ENGINE, stop_at_fence: str = "auto",
                    progress: str | None = None) -> pd.DataFrame:
    """Sample ``sampling.n`` completions per task with ``model`` (through ``engine``, the rollouts' vLLM engine, when
    given, else HF generation by ``generation_engine`` a batch at a time, answers ended at their closing fence as
    ``stop_at_fence`` says), prompted for ``answer_format``, and verify them: eval.py's
    result rows (model, task_id, sample, completion, ``Report.flat()``) plus completion_tokens and truncated. RNG
    states and the model's mode are restored afterwards. ``progress``: the title of its progress lines (sampling,
    then verifying: ``rust_rewards.train.progress``; None: silent)."""
    import torch

    generator = (RolloutEngineGenerator(engine, tokenizer) if engine is not None
                 else PolicyGenerator(model, tokenizer, batch_size, generation_engine, stop_at_fence))
    generator.system = system_prompt(answer_format)
    work = [(task, sample) for task in tasks for sample in range(sampling.n)]
    with preserved_rng(), eval_mode(model), torch.no_grad():
        torch.manual_seed(sampling.seed)
        random.seed(sampling.seed)
        prompts = [generator.render(task.prompt) for task, _ in work]
        with _progress(progress, "sampling", len(work)) as line:
            gens = _sample(generator, prompts, sampling, line)
        hidden = {task.task_id: task.hidden_tests() for task in tasks}
        with _progress(progress, "verifying", len(work)) as line:
            reports = (verifier or get_verifier()).verify_many(
                [g.text for g in gens], hidden=[hidden[t.task_id] for t, _ in work],
                progress=None if line is None else lambda done, total: line.update(done))
    rows = [{"model": label, "task_id": task.task_id, "sample": sample, "completion": gen.text,
             "completion_tokens": gen.tokens, "truncated": gen.truncated,
             **report.flat(tests_asked=asks_for_tests(answer_format))}
            for (task, sample), gen, report in zip(work, gens, reports, strict=True)]
    return pd.DataFrame(rows)


def _progress(title: str | None, phase: str, total: int) -> AbstractContextManager[ProgressLine | None]:
    """The progress line of one phase of an evaluation titled ``title`` (none without a title)."""
    return nullcontext() if title is None else ProgressLine(f"{title}, {phase}", total, "completions")


def _sample(generator: PolicyGenerator | RolloutEngineGenerator, prompts: list[str], sampling: SamplingParams,
            line: ProgressLine | None) -> list[Generation]:
    """The completions of ``prompts``, a batch of ``generator``'s at a time (the rollouts' engine: all in one call,
    one weight sync), counted on ``line``."""
    size = generator.batch_size if isinstance(generator, PolicyGenerator) else len(prompts)
    gens: list[Generation] = []
    for start in range(0, len(prompts), max(size, 1)):
        gens += generator.generate(prompts[start:start + size], sampling)
        if line is not None:
            line.update(len(gens))
    return gens


class HeldOutEvalCallback(TrainerCallback):
    """Evaluates the policy on held-out tasks every ``every`` steps (0: only at the end) and at the end of training.

    Runs on the main process only; writes ``OUT/eval/step_<N>.parquet`` and a ``metrics.jsonl`` line of ``eval/*``
    at step N, and logs the same to wandb when a wandb run is active. ``tokenizer`` is a separate copy (its padding
    side is set to left), not the trainer's. ``engine``: the rollouts' vLLM engine (``use_rollout_engine``), else
    HF generation by ``generation_engine`` (``rust_rewards.sampling.decoding``), ending answers at their closing fence
    as ``stop_at_fence`` says.
    """

    def __init__(self, out_dir: str | Path, tasks: Sequence[Task], tokenizer: Any, sampling: SamplingParams,
                 every: int = 0, batch_size: int = DEFAULT_BATCH_SIZE, use_wandb: bool = False,
                 answer_format: str = "solution+tests", verifier: Verifier | None = None,
                 generation_engine: str = DEFAULT_ENGINE, stop_at_fence: str = "auto") -> None:
        self.out_dir = Path(out_dir)
        self.generation_engine = generation_engine
        self.stop_at_fence = stop_at_fence
        self.verifier = verifier
        self.answer_format = answer_format
        self.tasks = list(tasks)
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.every = every
        self.batch_size = batch_size
        self.use_wandb = use_wandb
        self.last_step: int | None = None
        self.history: list[dict[str, Any]] = []
        self.engine: Any = None

    def use_rollout_engine(self, trainer: Any) -> str:
        """Sample through ``trainer``'s vLLM engine when it has one and runs in one process; says which backend."""
        engine = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
        if engine is None:
            return "hf"
        if trainer.accelerator.num_processes > 1:
            print("held-out eval: HF generate on the main process (the vLLM engine's calls are collectives across "
                  f"{trainer.accelerator.num_processes} processes)", flush=True)
            return "hf"
        self.engine = engine
        return RolloutEngineGenerator.backend

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every > 0 and state.global_step % self.every == 0:
            self.evaluate(state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.last_step != state.global_step:
            self.evaluate(state, model)

    def evaluate(self, state: Any, model: Any) -> dict[str, Any] | None:
        self.last_step = state.global_step
        if not state.is_world_process_zero or model is None:
            return None
        began = time.perf_counter()
        results = evaluate_policy(model, self.tokenizer, self.tasks, self.sampling, self.batch_size,
                                  engine=self.engine, answer_format=self.answer_format, verifier=self.verifier,
                                  generation_engine=self.generation_engine, stop_at_fence=self.stop_at_fence,
                                  progress=f"step {state.global_step} held-out eval")
        results.insert(0, "step", state.global_step)
        write_parquet_atomic(results, eval_file(self.out_dir, state.global_step))
        metrics = {**eval_metrics(results), "eval/seconds": time.perf_counter() - began}
        append_metrics(self.out_dir, state.global_step, metrics)
        self.history.append({"step": state.global_step, **metrics})
        if self.use_wandb:
            log_to_wandb(metrics, state.global_step)
        print(f"step {state.global_step} held-out eval: hidden pass@1 {fmt(metrics['eval/hidden_pass_at_1'])} "
              f"[{fmt(metrics['eval/hidden_pass_at_1_lo'])}, {fmt(metrics['eval/hidden_pass_at_1_hi'])}], build "
              f"{metrics['eval/build_rate']:.2f}, n {metrics['eval/n']}, {metrics['eval/seconds']:.1f} s", flush=True)
        return metrics


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def log_to_wandb(metrics: dict[str, Any], step: int) -> None:
    """``wandb.log`` only when a wandb run is active (never starts one)."""
    try:
        import wandb
    except ImportError:
        return
    if wandb.run is not None:
        wandb.log({**metrics, "train/global_step": step})
