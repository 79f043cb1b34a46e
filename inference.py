import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import dataclasses
    import logging
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import Any

    import marimo as mo
    import pandas as pd

    from rust_rewards.data.importers import LOCAL_SUFFIXES, load_tasks
    from rust_rewards.eval.generation import (
        BACKENDS,
        SamplingParams,
        check_compatible,
        display_name,
        generate_predictions,
        make_generator,
        read_done,
        run_columns,
        vllm_available,
    )
    from rust_rewards.params import exit_with_usage_if_asked, fill_params, param
    from rust_rewards.rewards.feedback import DEFAULT_MAX_TOKENS
    from rust_rewards.tasks import Task
    from rust_rewards.ui.forms import check_form, param_controls, param_panel
    from rust_rewards.ui.paths import repo_path, require_file, resolve_files
    from rust_rewards.ui.progress import marimo_progress

    log = logging.getLogger("inference")
    ROOT = Path(__file__).resolve().parent
    BACKEND_CHOICES = ("auto", *BACKENDS)
    TASK_FILES = ("qwen3-rust-finetune/*.jsonl", "qwen3-rust-finetune/*.parquet",
                  "qwen3-rust-finetune/processed*/*.parquet")
    ADAPTER_DIRS = ("outputs/*/adapter/", "outputs/*/checkpoint-*/")


@app.cell(hide_code=True)
def _():
    mo.md(r"""
    # Inference: sample completions for an eval split

    Same system prompt and chat template as training. Writes one row per (task, sample) to a
    parquet file; a rerun with the same `out` resumes where the last one stopped. With
    `--repair-rounds N`, an answer that fails a check the model may see (build, clippy, its own tests)
    gets up to N follow-up turns with compiler and test feedback, one row per (task, sample, round).
    Script: `python inference.py --model M [--adapter A] --tasks T --out preds.parquet --n 4`.
    """)
    return


@app.class_definition
@dataclasses.dataclass
class InferenceParams:
    """Every knob of an inference run (CLI flags use the same names, with - or _)."""

    model: str = param("Qwen/Qwen2.5-Coder-1.5B-Instruct", help="hub name or local folder of the base model",
                       group="Model")
    adapter: str = param("", help="LoRA adapter folder applied to the model (empty: the base model alone)",
                         group="Model", files=ADAPTER_DIRS)
    merge: bool = param(False, help="merge the adapter into the weights before generating (hf backend only)",
                        group="Model", advanced=True)
    tasks: str = param("qwen3-rust-finetune/processed/eval.parquet", help="tasks to answer: process_data.py's "
                       "eval.parquet, any task jsonl/parquet, or a Hugging Face dataset", group="Data",
                       files=TASK_FILES)
    out: str = param("", help="predictions parquet; a rerun with the same file resumes (empty: "
                     "qwen3-rust-finetune/predictions/LABEL.parquet)", group="Output")
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
    limit: int = param(0, help="answer only the first N tasks (0: all)", group="Data", bounds=(0, None))
    batch_size: int = param(8, help="prompts per generate call (hf backend)", group="Backend", advanced=True,
                            bounds=(1, None))
    chunk_size: int = param(32, help="completions per chunk written to disk (at most what an interrupted run loses)",
                            group="Backend", advanced=True, bounds=(1, None))
    backend: str = param("auto", help="generation engine: auto takes vLLM when installed with a GPU and no merge, "
                         "else hf (transformers)", group="Backend", choices=BACKEND_CHOICES)
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
        return Path("qwen3-rust-finetune/predictions") / f"{self.model_name().replace('/', '__')}.parquet"

    def sampling(self) -> SamplingParams:
        return SamplingParams(n=self.n, temperature=self.temperature, top_p=self.top_p,
                              max_new_tokens=self.max_new_tokens, greedy=self.greedy, seed=self.seed)

    def resolved_backend(self) -> str:
        """``auto`` picks vLLM when it is installed, a GPU is present and no merge is asked; else HF."""
        if self.backend != "auto":
            if self.backend not in BACKENDS:
                raise ValueError(f"--backend must be auto or one of {BACKENDS}, got {self.backend!r}")
            return self.backend
        import torch

        return "vllm" if vllm_available() and torch.cuda.is_available() and not self.merge else "hf"


@app.function
def params_from_mapping(values: Mapping[str, Any]) -> InferenceParams:
    """Fill ``InferenceParams`` from CLI args or form values; unknown names and bad values raise, naming the flag."""
    exit_with_usage_if_asked(InferenceParams, values, "inference.py")
    return fill_params(InferenceParams, values)


@app.function
def checked_params(params: InferenceParams) -> InferenceParams:
    """``params`` with input paths resolved (``rust_rewards.ui.paths``; the model too when it is a local folder);
    ``ValueError`` for what the run would refuse before loading the model: sampling settings that do not go
    together (greedy with n > 1), a missing tasks file."""
    params = dataclasses.replace(resolve_files(params, ROOT), model=repo_path(params.model, ROOT))
    params.sampling()
    require_file("tasks", params.tasks, LOCAL_SUFFIXES)
    return params


@app.function
def run_summary(params: InferenceParams) -> str:
    """One line (markdown) saying what an inference run with ``params`` does."""
    sampling = "greedy" if params.greedy else f"temperature {params.temperature}, top_p {params.top_p}"
    repair = f", up to {params.repair_rounds} repair round(s)" if params.repair_rounds else ""
    limit = f"the first {params.limit} tasks" if params.limit else "every task"
    return (f"Ready: {params.n} completion(s) of at most {params.max_new_tokens} tokens for {limit} of "
            f"`{params.tasks}` ({sampling}{repair}) as **{params.model_name()}** into `{params.out_path()}`.")


@app.function
def read_tasks(path: str | Path, limit: int = 0) -> list[Task]:
    """The tasks of an eval split (any file ``load_tasks`` reads), the first ``limit`` when limit > 0."""
    tasks = list(load_tasks(path))
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return tasks[:limit] if limit > 0 else tasks


@app.function
def run_inference(
    params: InferenceParams, progress: Callable[[int, int], None] | None = None
) -> pd.DataFrame:
    """Generate ``params.n`` completions per task into ``params.out_path()``; returns every row.

    An existing output written with other settings is refused before the model is loaded.
    """
    sampling = params.sampling()
    tasks = read_tasks(params.tasks, params.limit)
    backend = params.resolved_backend()
    run = run_columns(sampling, model=params.model_name(), base_model=params.model,
                      adapter=params.adapter or None, backend=backend)
    check_compatible(read_done(params.out_path()), run, params.out_path())
    generator = make_generator(backend, params.model, params.adapter or None,
                               merge=params.merge, batch_size=params.batch_size, seed=params.seed)
    return generate_predictions(
        tasks, generator, sampling, params.out_path(),
        model=params.model_name(), base_model=params.model, adapter=params.adapter or None,
        chunk_size=params.chunk_size, progress=progress,
        repair_rounds=params.repair_rounds, feedback_tokens=params.feedback_tokens,
    )


@app.function
def log_progress(done: int, total: int) -> None:
    """Script-mode progress: one log line per finished chunk."""
    log.info("generated %d/%d completions", done, total)


@app.cell
def _():
    is_script = mo.app_meta().mode == "script"
    if is_script:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cli_params = params_from_mapping(mo.cli_args())
    return cli_params, is_script


@app.cell
def _(cli_params, is_script):
    controls = None if is_script else param_controls(InferenceParams, cli_params, ROOT)
    run_button = mo.ui.run_button(label="Generate")
    return controls, run_button


@app.cell
def _(controls, form_problem, run_button):
    mo.stop(controls is None)
    mo.vstack([param_panel(controls, InferenceParams, problem=form_problem), run_button])
    return


@app.cell
def _(cli_params, controls, is_script):
    if is_script:
        params, form_problem, _status = checked_params(cli_params), None, None
    else:
        params, form_problem, _status = check_form(controls.value, params_from_mapping, checked_params, run_summary,
                                                   "generate")
    _status
    return form_problem, params


@app.cell
def _(is_script, params, run_button):
    if is_script:
        predictions = run_inference(params, progress=log_progress)
    else:
        mo.stop(params is None, mo.md("Fix the parameters above, then press **Generate**."))
        mo.stop(not run_button.value, mo.md("Press **Generate** to sample completions."))
        with marimo_progress("Generating", remove_on_exit=True) as _progress:
            predictions = run_inference(params, progress=_progress)
    mo.md(f"Wrote **{len(predictions)}** rows to `{params.out_path()}`")
    return (predictions,)


@app.cell
def _(predictions):
    mo.ui.table(predictions[[c for c in ("task_id", "sample", "round", "completion_tokens", "truncated",
                                         "completion", "feedback") if c in predictions.columns]],
                page_size=10)
    return


if __name__ == "__main__":
    app.run()
