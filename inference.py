import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import dataclasses
    import logging
    import typing
    from collections.abc import Callable, Mapping
    from pathlib import Path
    from typing import Any

    import marimo as mo
    import pandas as pd

    from rust_rewards.feedback import DEFAULT_MAX_TOKENS
    from rust_rewards.generation import (
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
    from rust_rewards.importers import load_tasks
    from rust_rewards.params import coerce_value
    from rust_rewards.progress import marimo_progress
    from rust_rewards.tasks import Task

    log = logging.getLogger("inference")


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

    model: str = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    adapter: str = ""
    merge: bool = False
    tasks: str = "qwen3-rust-finetune/processed/eval.parquet"
    out: str = ""
    name: str = ""
    n: int = 1
    temperature: float = 0.2
    top_p: float = 0.9
    max_new_tokens: int = 512
    greedy: bool = False
    seed: int = 0
    limit: int = 0
    batch_size: int = 8
    chunk_size: int = 32
    backend: str = "auto"
    repair_rounds: int = 0
    feedback_tokens: int = DEFAULT_MAX_TOKENS

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
    """Fill ``InferenceParams`` from CLI args or form values; unknown names and bad values raise."""
    hints = typing.get_type_hints(InferenceParams)
    kwargs: dict[str, Any] = {}
    for raw, value in values.items():
        key = str(raw).replace("-", "_")
        if key not in hints:
            raise ValueError(f"unknown parameter --{raw}; known: {', '.join(sorted(hints))}")
        kwargs[key] = coerce_value(str(raw), hints[key], value)
    return InferenceParams(**kwargs)


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
    defaults = InferenceParams()
    form = (
        mo.md(
            """
            **Model** {model} **LoRA adapter** (optional) {adapter} {merge}

            **Tasks file** {tasks} **Output parquet** (empty: derived from the model) {out} **Label** {name}

            {n} {temperature} {top_p} {max_new_tokens} {greedy} {seed}

            {limit} {batch_size} {chunk_size} {backend}

            {repair_rounds} {feedback_tokens}
            """
        )
        .batch(
            model=mo.ui.text(value=defaults.model, full_width=True),
            adapter=mo.ui.text(value=defaults.adapter, full_width=True),
            merge=mo.ui.checkbox(label="merge adapter", value=defaults.merge),
            tasks=mo.ui.text(value=defaults.tasks, full_width=True),
            out=mo.ui.text(value=defaults.out, full_width=True),
            name=mo.ui.text(value=defaults.name),
            n=mo.ui.number(start=1, stop=200, value=defaults.n, label="samples per task"),
            temperature=mo.ui.number(start=0.01, stop=2.0, step=0.01, value=defaults.temperature,
                                     label="temperature"),
            top_p=mo.ui.number(start=0.01, stop=1.0, step=0.01, value=defaults.top_p, label="top_p"),
            max_new_tokens=mo.ui.number(start=1, stop=8192, value=defaults.max_new_tokens,
                                        label="max new tokens"),
            greedy=mo.ui.checkbox(label="greedy", value=defaults.greedy),
            seed=mo.ui.number(start=0, stop=2**31 - 1, value=defaults.seed, label="seed"),
            limit=mo.ui.number(start=0, stop=10**7, value=defaults.limit, label="limit (0 = all)"),
            batch_size=mo.ui.number(start=1, stop=1024, value=defaults.batch_size, label="batch size"),
            chunk_size=mo.ui.number(start=1, stop=100000, value=defaults.chunk_size, label="rows per chunk"),
            backend=mo.ui.dropdown(options=["auto", *BACKENDS], value=defaults.backend, label="backend"),
            repair_rounds=mo.ui.number(start=0, stop=10, value=defaults.repair_rounds, label="repair rounds"),
            feedback_tokens=mo.ui.number(start=32, stop=4096, value=defaults.feedback_tokens,
                                         label="feedback tokens (max)"),
        )
        .form(submit_button_label="Generate")
    )
    form
    return (form,)


@app.cell
def _(form):
    if mo.app_meta().mode == "script":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        params = params_from_mapping(mo.cli_args())
    else:
        mo.stop(form.value is None, mo.md("Fill the form and press **Generate**."))
        params = params_from_mapping(form.value)
    params
    return (params,)


@app.cell
def _(params):
    if mo.app_meta().mode == "script":
        predictions = run_inference(params, progress=log_progress)
    else:
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
