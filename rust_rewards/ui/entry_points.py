"""The command line and form of eval.py, inference.py and process_data.py, one ``ScriptOrForm`` each.

Their checks resolve input paths given relative to the repository (``rust_rewards.ui.paths``) and refuse, with a
``ValueError`` naming the flag, what the run would refuse before doing any work; their one-line summaries say what
a run with the parameters does.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rust_rewards.data.importers import LOCAL_SUFFIXES
from rust_rewards.data.pipeline import ProcessParams
from rust_rewards.eval import inference, scoring
from rust_rewards.eval.inference import InferenceParams
from rust_rewards.eval.scoring import EvalParams
from rust_rewards.hub import looks_local
from rust_rewards.models.source import check_adapter_folder, check_model_source
from rust_rewards.ui.paths import repo_path, require_file, resolve_files
from rust_rewards.ui.script import ScriptOrForm
from rust_rewards.workspace import workspace


def check_eval(params: EvalParams) -> EvalParams:
    """``params`` with input paths resolved; ``ValueError`` for what the run would refuse before verifying
    anything: no predictions file, a missing one, a missing tasks file."""
    params = resolve_files(params, workspace())
    if not params.predictions:
        raise ValueError("no predictions file given (--predictions PATH)")
    for path in params.predictions:
        require_file("predictions", path)
    require_file("tasks", params.tasks, LOCAL_SUFFIXES)
    return params


def describe_eval(params: EvalParams) -> str:
    """One line (markdown) saying what an eval run with ``params`` does."""
    files = ", ".join(f"`{Path(p).name}`" for p in params.predictions)
    return (f"Ready: score {files} against the hidden tests of `{params.tasks}` on the {params.verifier} verifier, "
            f"pass@k for k = {', '.join(map(str, params.k))}; results go to `{params.out}`.")


def check_inference(params: InferenceParams) -> InferenceParams:
    """``params`` with input paths resolved (the model too when it is a local folder); ``ValueError`` for what the
    run would refuse before loading the model: sampling settings that do not go together (greedy with n > 1), a
    missing tasks file, a model folder or adapter that cannot load (``rust_rewards.models.source``)."""
    params = dataclasses.replace(resolve_files(params, workspace()), model=repo_path(params.model, workspace()))
    params.sampling()
    require_file("tasks", params.tasks, LOCAL_SUFFIXES)
    check_model_source(params.model, hub=False)  # hub ids: at the start of the run (rust_rewards.eval.inference)
    if params.adapter:
        check_adapter_folder(params.adapter)
    return params


def describe_inference(params: InferenceParams) -> str:
    """One line (markdown) saying what an inference run with ``params`` does."""
    sampling = "greedy" if params.greedy else f"temperature {params.temperature}, top_p {params.top_p}"
    repair = f", up to {params.repair_rounds} repair round(s)" if params.repair_rounds else ""
    limit = f"the first {params.limit} tasks" if params.limit else "every task"
    return (f"Ready: {params.n} completion(s) of at most {params.max_new_tokens} tokens for {limit} of "
            f"`{params.tasks}` ({sampling}{repair}) as **{params.model_name()}** into `{params.out_path()}`.")


def check_process(params: ProcessParams) -> ProcessParams:
    """``params`` with the source path resolved (not a path in an Oxen repo); ``ValueError`` for what the run would
    refuse before verifying anything: a missing local source file or tokenizer folder."""
    if not params.oxen_repo:
        params = resolve_files(params, workspace())
        require_file("source", params.source, LOCAL_SUFFIXES)
    if looks_local(params.tokenizer) and not Path(params.tokenizer).expanduser().is_dir():
        raise ValueError(f"--tokenizer {params.tokenizer!r}: no such tokenizer directory")
    return params


def describe_process(params: ProcessParams) -> str:
    """One line (markdown) saying what a processing run with ``params`` does."""
    source = f"`{params.source}`" + (f" of Oxen repo `{params.oxen_repo}`" if params.oxen_repo else "")
    verify = f"verify references on the {params.verifier} verifier" if params.verify else "no verification"
    budget = ("no token budget" if params.tokenizer.strip().lower() in ("", "none")
              else f"prompts up to {params.max_prompt_tokens} tokens of `{params.tokenizer}`")
    return (f"Ready: process {source} ({verify}, {budget}, {params.eval_fraction:.0%} held out for eval) "
            f"into `{params.out}`.")


EVAL = ScriptOrForm(
    EvalParams, "eval.py", check_eval, describe_eval, verb="evaluate", button="Evaluate",
    waiting="Press **Evaluate** to score the predictions.", progress_title="Verifying",
    script_progress=scoring.log_progress)
INFERENCE = ScriptOrForm(
    InferenceParams, "inference.py", check_inference, describe_inference, verb="generate", button="Generate",
    waiting="Press **Generate** to sample completions.", progress_title="Generating",
    script_progress=inference.log_progress)
PROCESS = ScriptOrForm(
    ProcessParams, "process_data.py", check_process, describe_process, verb="process", button="Process",
    waiting="Set the parameters and press **Process**.", progress_title="Verifying reference solutions",
    script_progress=True, parse=ProcessParams.from_cli, log_info=False, remove_progress=False)
