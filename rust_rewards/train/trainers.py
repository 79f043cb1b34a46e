"""Each stage's trainer for resolved params: its data (task prompts, verified reference answers, preference pairs),
its model and adapter, its config and our callbacks (metrics file, stop file, progress, held-out evaluation) ahead
of wandb's."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rust_rewards.data.importers import TaskDataError, TaskSourceError, load_tasks
from rust_rewards.data.sft_rows import NoSFTRowsError, SFTSet, sft_rows
from rust_rewards.prompts import (
    asks_for_tests,
    chat_messages,
    has_chat_template,
    render_prompt,
    system_prompt,
    trl_example,
)
from rust_rewards.report import Report
from rust_rewards.tasks import REWARD_COLUMNS, Task
from rust_rewards.train.config import TrainParams
from rust_rewards.train.hints import HintCurriculum, HintSteps, hinted_rows, hinted_sft_rows, parse_levels
from rust_rewards.train.model_setup import lora_config, trainer_model
from rust_rewards.train.resolve import ResolvedParams, select_rewards
from rust_rewards.train.run_log import InfraGuard, RewardRecorder
from rust_rewards.train.trl_configs import dpo_config, grpo_config, sft_config
from rust_rewards.verify.verifier import Verifier, get_verifier

Progress = Callable[[int, int, dict[str, Any]], None]
"""``progress(step, max_steps, logs)``: called with each logged step."""


class TrainTasksError(ValueError):
    """The training or held-out tasks (``--data``, ``--eval-tasks``) cannot be read, hold none or too few: a mistake
    of the user's, one line."""


SHOWN_ISSUES = 3
"""Problems of a task file a refusal quotes; the rest are counted."""


def read_tasks(flag: str, source: str, split: str | None = None) -> list[Task]:
    """The tasks of ``source`` (any source ``load_tasks`` reads); a missing, malformed or empty one raises
    ``TrainTasksError`` naming ``flag``: one line, the first problems quoted and the rest counted."""
    try:
        tasks = list(load_tasks(source, split=split))
    except TaskSourceError as err:
        raise TrainTasksError(f"{flag} {source}: " + " ".join(part.strip() for part in str(err).splitlines())
                              ) from None
    except TaskDataError as err:
        shown = "; ".join(str(issue) for issue in err.issues[:SHOWN_ISSUES])
        more = f"; and {len(err.issues) - SHOWN_ISSUES} more" if len(err.issues) > SHOWN_ISSUES else ""
        raise TrainTasksError(f"{flag} {source}: {len(err.issues)} problem(s) in its rows ({shown}{more}): fix "
                              "them (process_data.py --source FILE validates a task file and names every one)"
                              ) from None
    if not tasks:
        raise TrainTasksError(f"{flag} {source}: no tasks to train on" if flag == "--data" else
                              f"{flag} {source}: no tasks in it (an empty eval split: give a task file with tasks, or "
                              f"leave {flag} out)")
    return tasks


def grpo_prompts(p: TrainParams) -> int:
    """Distinct task prompts one GRPO generation batch samples, over all processes (``WORLD_SIZE``): TRL's sampler
    drops a last batch with fewer, so fewer tasks than this train not one step."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return p.per_device_train_batch_size * world * (p.steps_per_generation or p.gradient_accumulation_steps
                                                    ) // p.num_generations


def too_few_tasks(p: TrainParams, n: int) -> str | None:
    """Why ``n`` tasks cannot train one GRPO step of ``p`` (what it needs, the way out), or None when they can."""
    needed = grpo_prompts(p)
    if n >= needed:
        return None
    world = int(os.environ.get("WORLD_SIZE", "1"))
    steps = (f"--steps-per-generation {p.steps_per_generation}" if p.steps_per_generation
             else f"--gradient-accumulation-steps {p.gradient_accumulation_steps}")
    batch = next((b for b in range(p.per_device_train_batch_size, 0, -1)
                  if b * p.gradient_accumulation_steps % p.num_generations == 0
                  and 0 < b * world * (p.steps_per_generation or p.gradient_accumulation_steps) // p.num_generations
                  <= n), None)
    lower = f", or lower --per-device-train-batch-size to {batch}" if batch else ""
    return (f"{n} task{'s' * (n != 1)}, fewer than the {needed} distinct prompts a GRPO step samples "
            f"(--per-device-train-batch-size {p.per_device_train_batch_size} x {steps}"
            f"{f' x {world} processes' if world > 1 else ''} / --num-generations {p.num_generations}), so not one "
            f"step would train: give at least {needed} tasks{lower}")


def load_train_tasks(params: TrainParams) -> list[Task]:
    """The training tasks (any source ``load_tasks`` reads), the first ``max_tasks`` when > 0; a missing, malformed
    or empty source, or (GRPO) fewer tasks than one step samples, raises ``TrainTasksError`` naming the flag."""
    tasks = read_tasks("--data", params.data, params.data_split or None)
    kept = tasks[: params.max_tasks] if params.max_tasks > 0 else tasks
    why = too_few_tasks(params, len(kept)) if params.stage == "grpo" else None
    if why is not None:
        flag = f"--max-tasks {params.max_tasks}" if len(kept) < len(tasks) else f"--data {params.data}"
        raise TrainTasksError(f"{flag}: {why}")
    return kept


def load_eval_tasks(p: TrainParams) -> list[Task]:
    """The held-out tasks of ``--eval-tasks``, the first ``eval_limit`` when > 0 (``TrainTasksError`` as
    ``read_tasks``)."""
    tasks = read_tasks("--eval-tasks", p.eval_tasks)
    return tasks[: p.eval_limit] if p.eval_limit > 0 else tasks


def task_dataset(tasks: Sequence[Task], feedback: bool = False, answer_format: str = "solution+tests",
                 hints: tuple[HintSteps, Callable[[list[dict[str, str]]], str]] | None = None,
                 tokenizer: Any = None) -> Any:
    """A ``datasets.Dataset`` with a conversational ``prompt`` (asking for ``answer_format``) and the columns reward
    functions read; with ``feedback`` the system prompt also offers the ``cargo_check`` tool. With ``hints`` (the
    curriculum and ``chat_renderer``), each prompt is read as rendered text holding the task's current hint, and a
    ``hint`` column goes to the rewards (``train.hints``). ``tokenizer``: the model's; one without a chat template
    gets each prompt as its plain completion text (``prompts.trl_example``)."""
    from datasets import Dataset

    system = system_prompt(answer_format, feedback)
    rows = []
    for task in tasks:
        row = {**task.to_row(), "task_prompt": task.prompt}
        rows.append({"prompt": chat_messages(task.prompt, system), **{k: row[k] for k in REWARD_COLUMNS}})
    if tokenizer is not None and hints is None:
        rows = [trl_example(row, tokenizer) for row in rows]
    dataset = Dataset.from_list(rows)
    if hints is not None:
        steps, render = hints
        dataset.set_transform(hinted_rows(steps.curriculum, render, lambda: steps.step))
    return dataset


def chat_renderer(model: str | Any) -> Callable[[list[dict[str, str]]], str]:
    """A conversation as the text prompt of ``model`` (a name, or its tokenizer): ``prompts.render_prompt`` (the chat
    template with the generation prompt, or the plain completion prompt), as TRL would tokenize it (a leading BOS
    left to the tokenizer, which adds it to a text prompt)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model) if isinstance(model, str) else model
    return lambda messages: render_prompt(tokenizer, messages, bos=False)


def hint_steps(p: TrainParams) -> HintSteps | None:
    """``--hints``' curriculum (levels saved by a run this one resumes are taken up), or None when off."""
    if p.hints == "off":
        return None
    from rust_rewards.layout import RunFolder

    curriculum = HintCurriculum(parse_levels(p.hint_levels), mode=p.hints, lower_at=p.hint_lower_at,
                                max_steps=max(1, p.max_steps))
    curriculum.load(RunFolder(Path(p.output_dir)).hint_levels)
    return HintSteps(curriculum, Path(p.output_dir))


def task_reports(verifier: Verifier) -> Callable[[Sequence[Any], Mapping[str, list[Any]]], list[Report]]:
    """``verifier``'s reports for one batch, asked exactly as the rewards ask (so they are cache hits)."""
    from rust_rewards.rewards import reports_for

    return lambda completions, columns: reports_for(list(completions), verifier, **columns)


def sft_data(p: TrainParams, tasks: Sequence[Task], verifier: Verifier) -> SFTSet:
    """The reference answers of ``tasks`` verified by the run's ``verifier`` (answers longer than
    ``max_completion_length`` tokens skipped); with ``--sft-hints`` as text, once whole and once per hint cut."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(p.model)
    try:
        sft = sft_rows(tasks, p.data, lambda text: len(tokenizer(text, add_special_tokens=False).input_ids),
                       p.max_completion_length, answer_format=p.answer_format, verifier=verifier)
    except NoSFTRowsError as err:
        raise TrainTasksError(f"--data {err}") from None
    if p.sft_hints:
        sft.rows = hinted_sft_rows(sft.rows, {task.task_id: task.reference_code for task in tasks},
                                   parse_levels(p.hint_levels), chat_renderer(p.model))
    return sft


def run_callbacks(p: TrainParams, log: Any, progress: Progress | None) -> list[Any]:
    """A run's callbacks: its ``metrics.jsonl`` writer, the stop-file check, then progress lines; sets the wandb
    project when logging."""
    from rust_rewards.train.callbacks import ProgressCallback, StopFileCallback

    if p.wandb:
        os.environ.setdefault("WANDB_PROJECT", p.wandb_project)
    return [log, StopFileCallback(p.output_dir)] + ([] if progress is None else [ProgressCallback(progress)])


def eval_callbacks(p: TrainParams, verifier: Verifier) -> list[Any]:
    """The held-out evaluation callback (``rust_rewards.train.evaluation``) when ``--eval-tasks`` is set, else none:
    its tasks (the first ``eval_limit``), its own copy of the tokenizer, the rollouts' temperature and top-p."""
    if not p.eval_tasks:
        return []
    from transformers import AutoTokenizer

    from rust_rewards.sampling.engines import SamplingParams
    from rust_rewards.train.evaluation import HeldOutEvalCallback

    tasks = load_eval_tasks(p)
    sampling = SamplingParams(n=p.eval_n, temperature=p.temperature, top_p=p.top_p, seed=p.seed,
                              max_new_tokens=p.eval_max_new_tokens or p.max_completion_length)
    tokenizer = AutoTokenizer.from_pretrained(p.model, padding_side="left")
    return [HeldOutEvalCallback(p.output_dir, tasks, tokenizer, sampling, p.eval_every, use_wandb=p.wandb,
                                answer_format=p.answer_format, verifier=verifier,
                                generation_engine=p.generation_engine, stop_at_fence=p.stop_at_fence)]


def with_our_callbacks_first(trainer: Any) -> Any:
    """Drop the Trainer's printer (our progress lines replace it) and move wandb's callback after ours, so the
    metrics our callbacks add (``reward_share``, ``verify/*``) reach wandb too."""
    from transformers import PrinterCallback
    from transformers.integrations import WandbCallback

    trainer.pop_callback(PrinterCallback)
    wandb_callback = trainer.pop_callback(WandbCallback)
    if wandb_callback is not None:
        trainer.add_callback(wandb_callback)
    return trainer


def build_sft_trainer(p: ResolvedParams, rows: Sequence[dict[str, Any]], progress: Progress | None,
                      verifier: Verifier) -> Any:
    """The ``SFTTrainer`` of the supervised stage: same LoRA settings (or ``init_adapter``), same outputs."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    tokenizer = AutoTokenizer.from_pretrained(p.model)
    trainer = SFTTrainer(
        model=trainer_model(p),
        args=sft_config(p),
        train_dataset=Dataset.from_list([trl_example({"prompt": r["prompt"], "completion": r["completion"]}, tokenizer)
                                         for r in rows]),
        processing_class=tokenizer,
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p, verifier),
    )
    return with_our_callbacks_first(trainer)


def build_dpo_trainer(p: ResolvedParams, pairs: Sequence[dict[str, Any]], progress: Progress | None,
                      verifier: Verifier) -> Any:
    """The ``DPOTrainer`` of the preference stage: same LoRA settings (or ``init_adapter``), same outputs; the
    reference model is the base with the adapter switched off (TRL's default with PEFT)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    tokenizer = AutoTokenizer.from_pretrained(p.model)
    trainer = DPOTrainer(
        model=trainer_model(p),
        args=dpo_config(p),
        train_dataset=Dataset.from_list([trl_example({k: r[k] for k in ("prompt", "chosen", "rejected")}, tokenizer)
                                         for r in pairs]),
        processing_class=tokenizer,
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p, verifier),
    )
    return with_our_callbacks_first(trainer)


def build_grpo_trainer(
    p: ResolvedParams,
    tasks: Sequence[Task],
    progress: Progress | None = None,
    guard: InfraGuard | None = None,
    verifier: Verifier | None = None,
) -> Any:
    """The ``GRPOTrainer`` for resolved params (rollouts by ``p.generation_engine``), with our reward timing and log
    callbacks.

    Our ``RunLogCallback`` runs before the wandb callback, so ``reward_share`` and the ``verify/*``
    counts reach wandb too; ``guard`` (default: from the params) stops training on internal errors. A model without
    a chat template gets plain text prompts (no ``--feedback-turns``: tool calls need a chat template).
    """
    from transformers import AutoTokenizer

    from rust_rewards.rewards.cargo_tool import cargo_check_tool
    from rust_rewards.train.callbacks import RunLogCallback
    from rust_rewards.train.rollouts import EngineGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(p.model)
    if p.feedback_turns and not has_chat_template(tokenizer):
        raise ValueError(f"--feedback-turns {p.feedback_turns}: {p.model} has no chat template, which the cargo_check "
                         "tool calls need; train it with --feedback-turns 0")
    verifier = verifier or get_verifier()
    funcs, weights = select_rewards(p, verifier)
    recorder = RewardRecorder(funcs)
    guard = guard or InfraGuard(p.max_internal_error_share, p.max_internal_error_steps)
    hints = hint_steps(p)
    log = RunLogCallback(p.output_dir, recorder, weights, task_reports(verifier), p.completions_every, guard,
                         feedback=p.feedback_turns > 0,
                         tests_asked=asks_for_tests(p.answer_format), verifier=verifier, hints=hints)
    trainer = EngineGRPOTrainer(
        model=trainer_model(p),
        reward_funcs=recorder.wrapped,
        args=grpo_config(p, [weights[f.__name__] for f in funcs]),
        train_dataset=task_dataset(tasks, feedback=p.feedback_turns > 0, answer_format=p.answer_format,
                                   hints=None if hints is None else (hints, chat_renderer(tokenizer)),
                                   tokenizer=tokenizer),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, log, progress) + eval_callbacks(p, verifier),
        tools=[cargo_check_tool(verifier)] if p.feedback_turns else None,
        generation_engine=p.generation_engine,
        share_prompt=p.share_prompt,
        stop_at_fence=p.stop_at_fence,
    )
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    end_ids = (*trainer.eos_token_ids, tokenizer.pad_token_id)
    for func in funcs:  # no reward for an answer cut at the length limit (TRL's own truncation test)
        func.end_ids = tuple(int(i) for i in end_ids if i is not None)
    for callback in trainer.callback_handler.callbacks:
        if hasattr(callback, "use_rollout_engine"):
            callback.use_rollout_engine(trainer)
    return with_our_callbacks_first(trainer)


def build_stage_trainer(p: ResolvedParams, tasks: Sequence[Task], sft: SFTSet | None,
                        pairs: Sequence[dict[str, Any]] | None, progress: Progress | None, guard: InfraGuard,
                        verifier: Verifier | None = None) -> Any:
    """The trainer of ``p``'s stage: supervised on ``sft``'s rows, DPO on ``pairs``, else GRPO on ``tasks``, rewarded
    by ``verifier`` (stopped by ``guard`` on its internal errors)."""
    verifier = verifier or get_verifier()
    if sft is not None:
        return build_sft_trainer(p, sft.rows, progress, verifier)
    if pairs is not None:
        return build_dpo_trainer(p, pairs, progress, verifier)
    return build_grpo_trainer(p, tasks, progress, guard, verifier)
