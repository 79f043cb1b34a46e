"""One training run from start to end (``run_training``): resolve the params, resume or refuse, record the start,
train the stage, save the adapter, upload, report; each step a function of its own."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from rust_rewards.cpus import contiguous_lm_head, cpu_share, keep_freed_memory
from rust_rewards.data.bundled import BUNDLED_TASKS
from rust_rewards.data.dpo_pairs import read_pairs
from rust_rewards.data.pipeline import count_prompt_tokens
from rust_rewards.data.sft_rows import SFTSet
from rust_rewards.layout import ADAPTER_DIR, PARAMS_FILE, STOP_FILE
from rust_rewards.rewards.recipes import max_total
from rust_rewards.runs.records import param_changes
from rust_rewards.sampling.engines import ignore_library_warnings
from rust_rewards.tasks import Task
from rust_rewards.train.checkpoints import (
    Claim,
    RunFolderError,
    adapter_from_checkpoint,
    checkpoint_step,
    claim_run_folder,
    find_checkpoint,
    finished_run,
    move_aside,
    save_adapter,
)
from rust_rewards.train.config import (
    PASS_RATE_KEEP,
    TOOL_WARM_SHARE,
    TOOL_WARM_STEPS,
    TOOL_WARM_THREADS,
    TrainParams,
)
from rust_rewards.train.cpu_memory import CpuRun, available_gib, fit_line
from rust_rewards.train.gpu_plan import ModelShape
from rust_rewards.train.model_card import RunDescription, write_model_card
from rust_rewards.train.oxen_upload import upload_to_oxen
from rust_rewards.train.resolve import ResolvedParams, resolve_params, select_rewards
from rust_rewards.train.run_log import (
    InfraGuard,
    InfrastructureError,
    format_log_line,
    record_start,
    roll_back_records,
    what_changed,
)
from rust_rewards.train.tiny_model import WarmStart, build_tiny_model
from rust_rewards.train.trainers import (
    Progress,
    TrainTasksError,
    build_stage_trainer,
    load_eval_tasks,
    load_train_tasks,
    sft_data,
    too_few_tasks,
)
from rust_rewards.verify.verifier import Verifier, verifier_for


@dataclasses.dataclass
class TrainResult:
    """What a finished run left behind."""

    output_dir: Path
    adapter_dir: Path
    global_step: int
    resumed_from: str | None
    last_metrics: dict[str, Any]
    oxen_error: str | None = None
    stopped: bool = False
    """Stopped on request (``STOP`` file) before ``max_steps``: rerun with the same output dir to resume."""


def quiet_script_logs() -> None:
    """Script mode: keep the log to our step lines (no weight-loading bars; ``run_training`` ignores the library
    warnings a user cannot act on)."""
    import transformers

    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()


def print_progress(step: int, max_steps: int, logs: dict[str, Any]) -> None:
    """Script-mode progress: one readable line per logged step."""
    print(format_log_line(step, max_steps, logs), flush=True)


def run_training(params: TrainParams | ResolvedParams, progress: Progress | None = print_progress) -> TrainResult:
    """Train a LoRA adapter with GRPO (``stage="sft"``: supervised, on verified reference answers; ``"dpo"``: DPO on
    the preference pairs of ``dpo_pairs``); write params,
    metrics, completions (GRPO), checkpoints and the adapter.

    Under ``accelerate launch`` every process trains and verifies its own completions (the local verifier
    with its share of this machine's CPUs, ``cpu_share``; or the Ray cluster); only the main process writes.

    Refuses, before any model loads, a run folder holding another run (``RunFolderError``; ``--overwrite`` moves it
    aside) and data that cannot train (``TrainTasksError``). Raises ``InfrastructureError`` (no adapter written, the
    last checkpoint kept) when the verifier's internal errors cross the ``max_internal_error_*`` limits.
    """
    from accelerate import PartialState

    ignore_library_warnings()
    p = resolve_params(params)  # as it is when the command line resolved it
    out = Path(p.output_dir)
    claim = claim_run_folder(out, dataclasses.asdict(p), p.overwrite)
    try:
        checkpoint = None if claim == "move" else find_checkpoint(out, p.resume)
    except (FileExistsError, FileNotFoundError) as err:  # --resume yes/no and what the folder holds disagree
        raise RunFolderError(str(err)) from None
    finished = finished_run(checkpoint, p.max_steps)
    if finished is not None:
        return already_finished(out, checkpoint, finished)
    _, weights = select_rewards(p)
    tasks = load_train_tasks(p)
    pairs = preference_pairs(p)
    if p.eval_tasks:
        load_eval_tasks(p)  # refused here, before any model loads
    run = RunDescription.of(p, weights, len(tasks), max_total(weights, any(t.reference_tests.strip() for t in tasks)))
    if p.build_tiny_model:
        if p.feedback_turns:  # the tool-calling model keeps its own warm start (config.TOOL_WARM_SHARE)
            build_tiny_model(p.model, tasks_path=BUNDLED_TASKS, task_limit=None, warm_start=WarmStart(
                tool_calls=TOOL_WARM_SHARE, steps=TOOL_WARM_STEPS, threads=TOOL_WARM_THREADS))
        else:
            build_tiny_model(p.model)
    if p.use_cpu and p.stage == "grpo" and (line := cpu_memory_line(p, tasks)):
        print(line, flush=True)  # refused in cpu_memory_line when it cannot fit, before the model loads
    processes = PartialState(cpu=bool(p.use_cpu))
    verifier = use_verifier(p, processes)  # the run's one verifier, from its flags, for every stage below
    sft = stage_data(p, tasks, verifier, pairs)
    if processes.is_main_process:
        record_run_start(out, start_record(p, weights, tasks, sft, pairs, checkpoint), start_summary(p, run), claim)
        start = checkpoint_step(checkpoint)
        removed = roll_back_records(out, start)  # steps trained again are recorded once
        if checkpoint is not None:
            print(f"resuming from {Path(checkpoint).name} (step {start} of {p.max_steps})"
                  + (f"; {removed} records of later steps replaced as they are trained again" if removed else ""),
                  flush=True)
    processes.wait_for_everyone()  # the folder is this run's (another one moved aside) before any process writes
    if p.generation_engine == "vllm":  # its engine, built by the first sampling call, serves this rank
        from rust_rewards.sampling import vllm_engine

        vllm_engine.plan(max(p.lora_r, vllm_engine.adapter_rank(p.init_adapter) if p.init_adapter else 0))
    if p.stage == "grpo" and p.pass_rate_k:
        tasks = filter_tasks(p, tasks, verifier, processes)
        run = dataclasses.replace(run, n_tasks=len(tasks))
    trainer, adapter, stopped = train_stage(p, run, tasks, sft, pairs, checkpoint, progress, verifier)
    oxen_error = upload_to_oxen(out, p.oxen_repo, p.oxen_dest) if p.oxen_repo and processes.is_main_process else None
    history = [h for h in trainer.state.log_history if "train_runtime" not in h]
    processes.wait_for_everyone()
    if processes.is_main_process:
        (out / STOP_FILE).unlink(missing_ok=True)
    if p.stage == "grpo" and processes.is_main_process and (line := what_changed(history, run.max_reward)):
        print(line, flush=True)
    if stopped:
        print(f"stopped on request at step {trainer.state.global_step} of {trainer.state.max_steps}: "
              f"checkpoint-{trainer.state.global_step} kept; run again with the same output dir to resume", flush=True)
    return TrainResult(out, adapter, trainer.state.global_step, checkpoint,
                       history[-1] if history else {}, oxen_error, stopped)


def cpu_memory_line(p: TrainParams, tasks: list[Task]) -> str:
    """The expected peak memory of a GRPO run on the CPU (``cpu_memory``; per process under ``accelerate launch``),
    from the model's config and its tokenizer's longest prompt; raises ``NotEnoughMemory`` when it cannot fit. Empty
    when the model's config or tokenizer cannot be read here (the model's load says why)."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        config, tokenizer = AutoConfig.from_pretrained(p.model), AutoTokenizer.from_pretrained(p.model)
    except (OSError, ValueError):
        return ""
    longest = max(count_prompt_tokens(tasks, tokenizer), default=0)
    run = CpuRun(p.per_device_train_batch_size, p.per_device_train_batch_size * p.gradient_accumulation_steps, longest,
                 p.max_completion_length, p.lora_r, p.gradient_checkpointing)
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return fit_line(ModelShape.from_config(config), run, available_gib() / processes)


def filter_tasks(p: TrainParams, tasks: list[Task], verifier: Verifier, processes: Any) -> list[Task]:
    """The training tasks the starting policy sometimes passes and sometimes fails (``--pass-rate-k``), sampled on
    the main process; ``NoSignalError`` (before any training) when too few."""
    from rust_rewards.train.pass_rates import NoSignalError, sample_pass_rates, tasks_with_signal

    if processes.is_main_process:
        sample_pass_rates(p, tasks, verifier)
    processes.wait_for_everyone()
    rates = sample_pass_rates(p, tasks, verifier)  # read back from the run folder
    kept = tasks_with_signal(p, tasks, rates)
    if (why := too_few_tasks(p, len(kept))) is not None:
        raise NoSignalError(f"{rates.verdict()}: kept {why}")
    if processes.is_main_process:
        print(f"{rates.verdict()}: training on the {len(kept)} tasks {PASS_RATE_KEEP[p.pass_rate_keep]}", flush=True)
    return kept


def already_finished(out: Path, checkpoint: str, state: dict[str, Any]) -> TrainResult:
    """The result of a run whose ``checkpoint`` already reached its target: nothing is trained, the adapter is
    taken from the checkpoint when the run folder has none."""
    print(f"{checkpoint} is already at step {state['global_step']} of {state['max_steps']}: "
          "nothing to train (raise --max-steps to continue)", flush=True)
    adapter = out / ADAPTER_DIR
    if not (adapter / "adapter_config.json").is_file():
        adapter = adapter_from_checkpoint(Path(checkpoint), adapter)
    logs = [h for h in state.get("log_history", []) if "train_runtime" not in h]
    return TrainResult(out, adapter, state["global_step"], checkpoint, logs[-1] if logs else {})


def preference_pairs(p: TrainParams) -> list[dict[str, Any]] | None:
    """The preference stage's pairs (``None`` for the other stages); a file without pairs raises
    ``TrainTasksError`` naming ``--dpo-pairs``."""
    if p.stage != "dpo":
        return None
    try:
        return read_pairs(p.dpo_pairs)
    except ValueError as err:  # no pairs, or not pairs: the data cannot train this stage
        raise TrainTasksError(str(err)) from None


def stage_data(p: TrainParams, tasks: list[Task], verifier: Verifier,
               pairs: list[dict[str, Any]] | None) -> SFTSet | None:
    """The supervised stage's verified reference answers (``None`` for the other stages), announced with their
    counts, as the preference stage's ``pairs`` are."""
    sft = sft_data(p, tasks, verifier) if p.stage == "sft" else None
    if sft is not None:
        print(f"supervised stage: {sft.counts()['rows']} rows"
              + (" (whole answers and their --hint-levels cuts)" if p.sft_hints else "")
              + f" from the verified reference answers of {len(tasks)} tasks; "
              f"skipped: {dict(sft.skipped) or 'none'}", flush=True)
    if pairs is not None:
        print(f"preference stage: {len(pairs)} pairs of {len({r.get('task_id') for r in pairs})} prompts from "
              f"{p.dpo_pairs}", flush=True)
    return sft


def start_record(p: TrainParams, weights: dict[str, float], tasks: list[Task], sft: SFTSet | None,
                 pairs: list[dict[str, Any]] | None, checkpoint: str | None) -> dict[str, Any]:
    """What this start records in the run folder: the params and the values derived from them."""
    return {**dataclasses.asdict(p), "derived": {
        "reward_weights": weights,
        "n_tasks": len(tasks),
        **({"sft": sft.counts()} if sft is not None else {"dpo": {"pairs": len(pairs)}} if pairs is not None else {
            "prompts_per_step": p.prompts_per_step(),
            "completions_per_step": p.per_device_train_batch_size * p.gradient_accumulation_steps}),
        "resumed_from": checkpoint,
    }}


def start_summary(p: TrainParams, run: RunDescription) -> list[str]:
    """What a run says before its first step: model, data, stage, steps, what a step holds, rewards, output folder
    (the full settings stay in its ``params.json``)."""
    steps = (f"{p.max_steps} step{'s' * (p.max_steps > 1)}" if p.max_steps > 0
             else f"{p.num_train_epochs:g} epochs over the data")
    if p.stage == "grpo":
        prompts = p.prompts_per_step()
        step = [f"each step: {prompts:g} prompt{'s' * (prompts != 1)}, a group of {p.num_generations} completions each",
                f"rewards: {run.rewards_text()}; the weighted total is at most {run.max_reward:g}"]
    else:
        step = [f"each step: {p.per_device_train_batch_size * p.gradient_accumulation_steps} "
                f"{'rows' if p.stage == 'sft' else 'pairs'}"]
    out = Path(p.output_dir)
    return [f"model: {run.model_text()}", f"data: {run.data_text()}", f"stage: {p.stage} (preset {p.preset}), {steps}",
            *step, f"output: {out} (full settings: {out / PARAMS_FILE})"]


def record_run_start(out: Path, record: dict[str, Any], summary: list[str], claim: Claim = "new") -> None:
    """Main process: move another run aside (``claim`` "move"), drop a stale STOP file, record this start (its
    settings the run's when the earlier starts trained nothing: ``claim`` "restart"), print its ``summary`` and
    what changed since the first start."""
    if claim == "move":
        print(f"--overwrite: the run that was in {out} (other settings) moved to {move_aside(out)}", flush=True)
    if claim == "restart":
        print(f"{out}: its earlier start trained nothing; this start's settings replace its {PARAMS_FILE}", flush=True)
    remove_stale_stop(out)
    first = record_start(out, record, fresh=claim == "restart")
    print("\n".join(summary), flush=True)
    changes = param_changes(first, record)
    if changes:
        print(f"changed since the first start ({out / PARAMS_FILE}): "
              + ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changes.items()), flush=True)


def remove_stale_stop(out: Path) -> None:
    """Remove a STOP file older than this process (left by a run that ended before it saw it); one written since
    it started (Stop pressed while the run was loading) stays and stops the run after its first step."""
    import psutil

    stop = out / STOP_FILE
    try:
        if stop.stat().st_mtime < psutil.Process().create_time():
            stop.unlink(missing_ok=True)
    except FileNotFoundError:
        pass


def use_verifier(p: TrainParams, processes: Any) -> Verifier:
    """The verifier of ``p``'s flags, made the process-wide one; with several processes each gets its share of
    this machine's CPUs and says so."""
    verifier = verifier_for(cpu_share() if processes.num_processes > 1 else 0, p.verifier, p.ray_address,
                            p.verifier_mode)
    if processes.num_processes > 1:
        print(f"process {processes.process_index}/{processes.num_processes}: verifies its own completions "
              f"({verifier.backend}, {verifier.workers} workers)", flush=True)
    return verifier


def train_stage(p: TrainParams, run: RunDescription, tasks: list[Task], sft: SFTSet | None,
                pairs: list[dict[str, Any]] | None, checkpoint: str | None, progress: Progress | None,
                verifier: Verifier) -> tuple[Any, Path, bool]:
    """Build the stage's trainer, train it (from ``checkpoint``) with ``torch_threads`` threads, save the adapter and
    the model card of ``run`` (``rust_rewards.train.model_card``, also after every checkpoint):
    ``(trainer, adapter folder, stopped on request)``. ``InfrastructureError`` when the verifier's internal errors
    stopped it. On CPU, freed memory is kept for reuse (``cpus.keep_freed_memory``: same results, faster sampling)
    and in bf16 the output layer gets contiguous inputs (``cpus.contiguous_lm_head``: the dry run 86 -> 71 s)."""
    import torch

    from rust_rewards.train.callbacks import ModelCardCallback, heartbeat_of

    out = Path(p.output_dir)
    if p.use_cpu:
        keep_freed_memory()
    threads = torch.get_num_threads()
    if p.torch_threads > 0:
        torch.set_num_threads(p.torch_threads)
    guard = InfraGuard(p.max_internal_error_share, p.max_internal_error_steps)
    try:
        trainer = build_stage_trainer(p, tasks, sft, pairs, progress, guard, verifier)
        trainer.add_callback(ModelCardCallback(run))
        if p.use_cpu and p.bf16:
            contiguous_lm_head(trainer.model)
        with heartbeat_of(trainer):
            trainer.train(resume_from_checkpoint=checkpoint)
        stopped = (out / STOP_FILE).is_file() and trainer.state.global_step < trainer.state.max_steps
        if guard.stopped is not None:
            raise InfrastructureError(guard.stopped.message(find_checkpoint(out, "auto")))
        adapter = save_adapter(trainer, out / ADAPTER_DIR)
        if trainer.accelerator.is_main_process:
            write_model_card(run, adapter, trainer.state)
    finally:
        torch.set_num_threads(threads)
    return trainer, adapter, stopped
