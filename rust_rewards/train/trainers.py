"""Each stage's trainer for resolved params: its data (task prompts, verified reference answers, preference pairs),
its model and adapter, its config and our callbacks (metrics file, stop file, progress, held-out evaluation) ahead
of wandb's."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rust_rewards.data.importers import TaskDataError, TaskSourceError, load_tasks
from rust_rewards.data.sft_rows import SFTSet, sft_rows
from rust_rewards.prompts import asks_for_tests, chat_messages, system_prompt
from rust_rewards.report import Report
from rust_rewards.tasks import REWARD_COLUMNS, Task
from rust_rewards.train.config import TrainParams
from rust_rewards.train.hints import HintCurriculum, HintSteps, hinted_rows, hinted_sft_rows, parse_levels
from rust_rewards.train.model_setup import lora_config, trainer_model
from rust_rewards.train.resolve import select_rewards
from rust_rewards.train.run_log import InfraGuard, RewardRecorder
from rust_rewards.train.trl_configs import dpo_config, grpo_config, sft_config
from rust_rewards.verify.verifier import Verifier, get_verifier

Progress = Callable[[int, int, dict[str, Any]], None]
"""``progress(step, max_steps, logs)``: called with each logged step."""


class TrainTasksError(ValueError):
    """The training tasks (``--data``) cannot be read or hold none: a mistake of the user's, one line."""


def load_train_tasks(params: TrainParams) -> list[Task]:
    """The training tasks (any source ``load_tasks`` reads), the first ``max_tasks`` when > 0; a missing, malformed
    or empty source raises ``TrainTasksError`` naming ``--data`` (and the row)."""
    try:
        tasks = list(load_tasks(params.data, split=params.data_split or None))
    except (TaskSourceError, TaskDataError) as err:  # one line: a data error lists its rows on lines of their own
        raise TrainTasksError(f"--data {params.data}: " + " ".join(part.strip() for part in str(err).splitlines())
                              ) from None
    if not tasks:
        raise TrainTasksError(f"--data {params.data}: no tasks to train on")
    return tasks[: params.max_tasks] if params.max_tasks > 0 else tasks


def task_dataset(tasks: Sequence[Task], feedback: bool = False, answer_format: str = "solution+tests",
                 hints: tuple[HintSteps, Callable[[list[dict[str, str]]], str]] | None = None) -> Any:
    """A ``datasets.Dataset`` with a conversational ``prompt`` (asking for ``answer_format``) and the columns reward
    functions read; with ``feedback`` the system prompt also offers the ``cargo_check`` tool. With ``hints`` (the
    curriculum and the chat template's renderer), each prompt is read as rendered text holding the task's current
    hint, and a ``hint`` column goes to the rewards (``train.hints``)."""
    from datasets import Dataset

    system = system_prompt(answer_format, feedback)
    rows = []
    for task in tasks:
        row = {**task.to_row(), "task_prompt": task.prompt}
        rows.append({"prompt": chat_messages(task.prompt, system), **{k: row[k] for k in REWARD_COLUMNS}})
    dataset = Dataset.from_list(rows)
    if hints is not None:
        steps, render = hints
        dataset.set_transform(hinted_rows(steps.curriculum, render, lambda: steps.step))
    return dataset


def chat_renderer(model: str) -> Callable[[list[dict[str, str]]], str]:
    """The chat template of ``model``'s tokenizer as text, with the generation prompt, as TRL would tokenize it (a
    leading BOS left to the tokenizer, which adds it to a text prompt)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    bos = tokenizer.bos_token if tokenizer("", add_special_tokens=True).input_ids else None

    def render(messages: list[dict[str, str]]) -> str:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text[len(bos):] if bos and text.startswith(bos) else text

    return render


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
    sft = sft_rows(tasks, p.data, lambda text: len(tokenizer(text, add_special_tokens=False).input_ids),
                   p.max_completion_length, answer_format=p.answer_format, verifier=verifier)
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

    from rust_rewards.eval.generation import SamplingParams
    from rust_rewards.train.evaluation import HeldOutEvalCallback

    tasks = list(load_tasks(p.eval_tasks))
    tasks = tasks[: p.eval_limit] if p.eval_limit > 0 else tasks
    if not tasks:
        raise ValueError(f"--eval-tasks {p.eval_tasks}: no tasks in it")
    sampling = SamplingParams(n=p.eval_n, temperature=p.temperature, top_p=p.top_p, seed=p.seed,
                              max_new_tokens=p.eval_max_new_tokens or p.max_completion_length)
    tokenizer = AutoTokenizer.from_pretrained(p.model, padding_side="left")
    return [HeldOutEvalCallback(p.output_dir, tasks, tokenizer, sampling, p.eval_every, use_wandb=p.wandb,
                                answer_format=p.answer_format, verifier=verifier,
                                generation_engine=p.generation_engine)]


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


def build_sft_trainer(p: TrainParams, rows: Sequence[dict[str, Any]], progress: Progress | None,
                      verifier: Verifier) -> Any:
    """The ``SFTTrainer`` of the supervised stage: same LoRA settings (or ``init_adapter``), same outputs."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    trainer = SFTTrainer(
        model=trainer_model(p),
        args=sft_config(p),
        train_dataset=Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows]),
        processing_class=AutoTokenizer.from_pretrained(p.model),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p, verifier),
    )
    return with_our_callbacks_first(trainer)


def build_dpo_trainer(p: TrainParams, pairs: Sequence[dict[str, Any]], progress: Progress | None,
                      verifier: Verifier) -> Any:
    """The ``DPOTrainer`` of the preference stage: same LoRA settings (or ``init_adapter``), same outputs; the
    reference model is the base with the adapter switched off (TRL's default with PEFT)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOTrainer

    from rust_rewards.train.callbacks import MetricsFileCallback

    trainer = DPOTrainer(
        model=trainer_model(p),
        args=dpo_config(p),
        train_dataset=Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in pairs]),
        processing_class=AutoTokenizer.from_pretrained(p.model),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, MetricsFileCallback(p.output_dir), progress) + eval_callbacks(p, verifier),
    )
    return with_our_callbacks_first(trainer)


def build_grpo_trainer(
    p: TrainParams,
    tasks: Sequence[Task],
    progress: Progress | None = None,
    guard: InfraGuard | None = None,
    verifier: Verifier | None = None,
) -> Any:
    """The ``GRPOTrainer`` for resolved params (rollouts by ``p.generation_engine``), with our reward timing and log
    callbacks.

    Our ``RunLogCallback`` runs before the wandb callback, so ``reward_share`` and the ``verify/*``
    counts reach wandb too; ``guard`` (default: from the params) stops training on internal errors.
    """
    from rust_rewards.rewards.cargo_tool import cargo_check_tool
    from rust_rewards.train.callbacks import RunLogCallback
    from rust_rewards.train.rollouts import EngineGRPOTrainer

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
                                   hints=None if hints is None else (hints, chat_renderer(p.model))),
        peft_config=None if p.init_adapter else lora_config(p),
        callbacks=run_callbacks(p, log, progress) + eval_callbacks(p, verifier),
        tools=[cargo_check_tool(verifier)] if p.feedback_turns else None,
        generation_engine=p.generation_engine,
        share_prompt=p.share_prompt,
    )
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    end_ids = (*trainer.eos_token_ids, tokenizer.pad_token_id)
    for func in funcs:  # no reward for an answer cut at the length limit (TRL's own truncation test)
        func.end_ids = tuple(int(i) for i in end_ids if i is not None)
    for callback in trainer.callback_handler.callbacks:
        if hasattr(callback, "use_rollout_engine"):
            callback.use_rollout_engine(trainer)
    return with_our_callbacks_first(trainer)


def build_stage_trainer(p: TrainParams, tasks: Sequence[Task], sft: SFTSet | None,
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
