import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import dataclasses
    import logging
    import time
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    import altair as alt
    import marimo as mo
    import pandas as pd

    from rust_rewards.atomic import write_json_atomic, write_parquet_atomic
    from rust_rewards.data.importers import LOCAL_SUFFIXES, load_tasks
    from rust_rewards.eval.metrics import ModelSummary, comparison_table, long_metrics, round_metrics, summarize
    from rust_rewards.params import exit_with_usage_if_asked, fill_params, param
    from rust_rewards.tasks import Task
    from rust_rewards.ui.forms import check_form, param_controls, param_panel
    from rust_rewards.ui.paths import require_file, resolve_files
    from rust_rewards.ui.progress import marimo_progress
    from rust_rewards.verify.verifier import BACKENDS, verifier_for

    log = logging.getLogger("eval")
    ROOT = Path(__file__).resolve().parent
    TASK_FILES = ("qwen3-rust-finetune/*.jsonl", "qwen3-rust-finetune/*.parquet",
                  "qwen3-rust-finetune/processed*/*.parquet")
    PREDICTION_FILES = ("qwen3-rust-finetune/predictions/*.parquet", "qwen3-rust-finetune/predictions/*.jsonl",
                        "outputs/**/predictions*.parquet")


@app.cell(hide_code=True)
def _():
    mo.md(r"""
    # Eval: score predictions with the training verifier

    Every completion goes through exactly the verifier the rewards use (build, clippy, the model's own
    tests, the task's hidden reference tests). Predictions with repair rounds (`inference.py
    --repair-rounds N`) are scored per round: round 0 is the one-shot answer, round N the answer after up
    to N repairs. Script:
    `python eval.py --tasks T --predictions preds.parquet [--predictions other.parquet] --out DIR --k 1,5`.
    """)
    return


@app.class_definition
@dataclasses.dataclass
class EvalParams:
    """Every knob of an eval run (CLI flags use the same names; repeat --predictions or use commas)."""

    tasks: str = param("qwen3-rust-finetune/processed/eval.parquet", help="tasks the predictions answer "
                       "(process_data.py's eval.parquet, any task jsonl/parquet, or a Hugging Face dataset); their "
                       "hidden tests decide pass@k", group="Data", files=TASK_FILES)
    predictions: list[str] = param(default_factory=list, help="prediction files (parquet/jsonl: task_id, completion; "
                                   "optional model, sample, round), one model per file unless it has a model column",
                                   group="Data", files=PREDICTION_FILES)
    out: str = param("qwen3-rust-finetune/eval", help="folder for results.parquet (one row per completion) and "
                     "summary.json (per model)", group="Output")
    k: list[int] = param(default_factory=lambda: [1, 5], help="k values of hidden-test pass@k, comma-separated, "
                         "each >= 1", group="Metrics")
    workers: int = param(0, help="cargo processes at once (0: one per usable CPU)", group="Verifier", advanced=True,
                         bounds=(0, None))
    top: int = param(10, help="most frequent compiler error codes and clippy lints listed per model (0: none)",
                     group="Metrics", bounds=(0, None))
    verifier: str = param("local", help="where cargo runs: local sandboxes, or workers of a Ray cluster",
                          group="Verifier", choices=BACKENDS)
    ray_address: str = param("auto", help="the Ray cluster of `--verifier ray`: auto, local or HOST:PORT",
                             group="Verifier", advanced=True)

    def __post_init__(self) -> None:
        if any(k < 1 for k in self.k):
            raise ValueError(f"--k values must be >= 1, got {self.k}")
        if self.verifier not in BACKENDS:
            raise ValueError(f"--verifier: expected one of {BACKENDS}, got {self.verifier!r}")


@app.function
def params_from_mapping(values: Mapping[str, Any]) -> EvalParams:
    """Fill ``EvalParams`` from CLI args or form values; unknown names and bad values raise, naming the flag."""
    exit_with_usage_if_asked(EvalParams, values, "eval.py")
    return fill_params(EvalParams, values)


@app.function
def checked_params(params: EvalParams) -> EvalParams:
    """``params`` with input paths resolved (``rust_rewards.ui.paths``); ``ValueError`` for what the run would refuse
    before verifying anything: no predictions file, a missing one, a missing tasks file."""
    params = resolve_files(params, ROOT)
    if not params.predictions:
        raise ValueError("no predictions file given (--predictions PATH)")
    for path in params.predictions:
        require_file("predictions", path)
    require_file("tasks", params.tasks, LOCAL_SUFFIXES)
    return params


@app.function
def run_summary(params: EvalParams) -> str:
    """One line (markdown) saying what an eval run with ``params`` does."""
    files = ", ".join(f"`{Path(p).name}`" for p in params.predictions)
    return (f"Ready: score {files} against the hidden tests of `{params.tasks}` on the {params.verifier} verifier, "
            f"pass@k for k = {', '.join(map(str, params.k))}; results go to `{params.out}`.")


@app.function
def read_predictions(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Predictions from parquet/jsonl files: columns model, task_id, sample, completion (+ origin).

    ``model`` defaults to the file name without suffix; ``sample`` to the row's rank among rows of
    the same (model, task_id). ``origin`` says ``file:row`` (1-based) for error messages. When any file has a
    ``round`` column (repair rounds), it is kept after ``sample`` (0 for files without one).
    """
    if not paths:
        raise ValueError("no predictions file given (--predictions PATH)")
    frames = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"predictions file not found: {path}")
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix in (".jsonl", ".json"):
            df = pd.read_json(path, lines=path.suffix == ".jsonl", dtype=False)
        else:
            raise ValueError(f"{path}: predictions must be .parquet, .jsonl or .json")
        missing = [c for c in ("task_id", "completion") if c not in df.columns]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; found {list(df.columns)}")
        df = df.reset_index(drop=True)
        df["origin"] = [f"{path}:{i + 1}" for i in range(len(df))]
        if "model" not in df.columns:
            df["model"] = path.name.removesuffix(path.suffix)
        nulls = df[df["completion"].isna() | df["task_id"].isna() | df["model"].isna()]
        if not nulls.empty:
            raise ValueError(f"{nulls['origin'].iloc[0]}: null task_id, model or completion")
        df["task_id"] = df["task_id"].astype(str)
        df["model"] = df["model"].astype(str)
        if "sample" not in df.columns:
            df["sample"] = df.groupby(["model", "task_id"]).cumcount()
        frames.append(df[["model", "task_id", "sample", *(["round"] if "round" in df.columns else []),
                          "completion", "origin"]])
    preds = pd.concat(frames, ignore_index=True)
    keys = ["model", "task_id", "sample"]
    if "round" in preds.columns:
        preds["round"] = preds["round"].fillna(0)
        keys.append("round")
    for column in keys[2:]:
        try:
            preds[column] = preds[column].astype(int)
        except (TypeError, ValueError):
            raise ValueError(f"column {column!r} must hold integers") from None
    dup = preds[preds.duplicated(keys, keep=False)]
    if not dup.empty:
        first = dup.iloc[0]
        rows = ", ".join(dup[(dup[keys] == first[keys]).all(axis=1)]["origin"])
        where = f"model={first['model']!r}, task_id={first['task_id']!r}, sample={first['sample']}"
        where += f", round={first['round']}" if "round" in keys else ""
        raise ValueError(f"duplicate prediction ({where}) at {rows}: give each file its own model name")
    return preds


@app.function
def score_predictions(
    tasks: Sequence[Task], predictions: pd.DataFrame,
    progress: Callable[[int, int], None] | bool = False, workers: int = 0, backend: str = "local",
    ray_address: str = "auto",
) -> pd.DataFrame:
    """Verify every prediction against its task's hidden tests: one row per completion.

    Columns: model, task_id, sample, (round,) completion, every key of ``Report.flat()`` (``internal_error``
    included).
    A completion without code scores ``hidden_ok=False`` on a task with hidden tests (it stays in the pass@k
    denominator); one the verifier failed on internally has ``hidden_ok`` null and is reported, not scored.
    An unknown task id raises, naming the prediction row.
    ``workers`` > 0 replaces the process-wide verifier with one of that many workers (0: the shared
    default, one worker per usable CPU); ``backend="ray"`` verifies on the Ray cluster at ``ray_address``.
    """
    by_id = {t.task_id: t for t in tasks}
    unknown = predictions[~predictions["task_id"].isin(by_id)]
    if not unknown.empty:
        row = unknown.iloc[0]
        where = row["origin"] if "origin" in row else f"row {unknown.index[0]}"
        raise KeyError(
            f"{where}: task_id {row['task_id']!r} is not in the tasks file"
            f" ({len(unknown)} prediction(s) with unknown task ids)"
        )
    hidden = {tid: task.hidden_tests() for tid, task in by_id.items()}
    verifier = verifier_for(workers, backend, ray_address)
    reports = verifier.verify_many(
        predictions["completion"].tolist(),
        hidden=[hidden[tid] for tid in predictions["task_id"]],
        progress=progress,
    )
    flat = pd.DataFrame([report.flat() for report in reports], index=predictions.index)
    crashed = int((flat["internal_error"] != "").sum())
    if crashed:
        log.warning("the verifier failed internally on %d completion(s): see column internal_error", crashed)
    base = predictions[["model", "task_id", "sample", *(["round"] if "round" in predictions else []), "completion"]]
    return pd.concat([base, flat], axis=1).reset_index(drop=True)


@app.function
def write_outputs(out: str | Path, results: pd.DataFrame, summaries: dict[str, ModelSummary]) -> None:
    """``out/results.parquet`` and ``out/summary.json``, each written atomically."""
    out = Path(out)
    write_parquet_atomic(results, out / "results.parquet")
    write_json_atomic({model: s.to_dict() for model, s in summaries.items()}, out / "summary.json")


@app.function
def run_eval(
    params: EvalParams, progress: Callable[[int, int], None] | bool = False
) -> tuple[pd.DataFrame, dict[str, ModelSummary]]:
    """Load tasks and predictions, verify, summarize per model, write the outputs."""
    tasks = load_tasks(params.tasks)
    predictions = read_predictions(params.predictions)
    began = time.perf_counter()
    results = score_predictions(tasks, predictions, progress=progress, workers=params.workers,
                                backend=params.verifier, ray_address=params.ray_address)
    log.info("verified %d completions in %.1f s", len(results), time.perf_counter() - began)
    summaries = summarize(results, params.k, params.top)
    write_outputs(params.out, results, summaries)
    return results, summaries


@app.function
def rates_chart(summaries: dict[str, ModelSummary]) -> alt.LayerChart:
    """Build/clippy/test rates, hidden pass@1 and hack flags per model, with 95% intervals."""
    data = long_metrics(summaries)
    data = data[~data["metric"].str.startswith("pass@")]
    base = alt.Chart(data).encode(
        x=alt.X("metric:N", title=None, sort=None),
        xOffset="model:N",
        color=alt.Color("model:N"),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", title="rate", scale=alt.Scale(domain=[0, 1])),
        tooltip=["model", "metric", alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")],
    )
    return (bars + base.mark_errorbar().encode(y="lo:Q", y2="hi:Q")).properties(width=480, height=260)


@app.function
def pass_at_k_chart(summaries: dict[str, ModelSummary]) -> alt.LayerChart:
    """Hidden-test pass@k per model against k, with task-bootstrap 95% intervals."""
    data = long_metrics(summaries)
    data = data[data["metric"].str.startswith("pass@")].copy()
    data["k"] = data["metric"].str.removeprefix("pass@").astype(int)
    base = alt.Chart(data).encode(x=alt.X("k:O", title="k"), color="model:N")
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="hidden pass@k", scale=alt.Scale(domain=[0, 1])),
        tooltip=["model", "k", alt.Tooltip("value:Q", format=".3f")],
    )
    return (line + base.mark_errorbar().encode(y="lo:Q", y2="hi:Q")).properties(width=320, height=260)


@app.function
def rounds_chart(summaries: dict[str, ModelSummary]) -> alt.FacetChart | None:
    """Each metric per repair round, models side by side, with 95% intervals (None without repair rounds)."""
    data = round_metrics(summaries)
    if data.empty:
        return None
    base = alt.Chart().encode(x=alt.X("round:O", title="repair round"), color="model:N")
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="rate", scale=alt.Scale(domain=[0, 1])),
        tooltip=["model", "round", "metric", alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("lo:Q", format=".3f"), alt.Tooltip("hi:Q", format=".3f")],
    )
    bars = base.mark_errorbar().encode(y="lo:Q", y2="hi:Q")
    return alt.layer(line, bars, data=data).properties(width=180, height=200).facet(
        column=alt.Column("metric:N", title=None, sort=list(data["metric"].drop_duplicates())))


@app.function
def rounds_table(summaries: dict[str, ModelSummary]) -> pd.DataFrame:
    """One row per (model, round): n, revised answers, rates, hidden pass@1 (pass@1 after that many rounds)."""
    return pd.DataFrame(
        [{"model": model, "round": r.round, "n": r.n, "revised": r.revised, "build": r.build_rate,
          "clippy": r.clippy_rate, "test": r.test_rate, "hidden pass@1": r.hidden_pass_at_1,
          "hidden pass@1 95% CI": r.ci.get("hidden_pass_at_1"), "hack flags": r.hack_flag_rate}
         for model, s in summaries.items() for r in s.rounds])


@app.function
def log_progress(done: int, total: int) -> None:
    """Script-mode progress: a log line every 10% (and at the end)."""
    step = max(1, total // 10)
    if done == total or done % step == 0:
        log.info("verified %d/%d", done, total)


@app.cell
def _():
    is_script = mo.app_meta().mode == "script"
    if is_script:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cli_params = params_from_mapping(mo.cli_args())
    return cli_params, is_script


@app.cell
def _(cli_params, is_script):
    controls = None if is_script else param_controls(EvalParams, cli_params, ROOT)
    run_button = mo.ui.run_button(label="Evaluate")
    return controls, run_button


@app.cell
def _(controls, form_problem, run_button):
    mo.stop(controls is None)
    mo.vstack([param_panel(controls, EvalParams, problem=form_problem), run_button])
    return


@app.cell
def _(cli_params, controls, is_script):
    if is_script:
        params, form_problem, _status = checked_params(cli_params), None, None
    else:
        params, form_problem, _status = check_form(controls.value, params_from_mapping, checked_params, run_summary,
                                                   "evaluate")
    _status
    return form_problem, params


@app.cell
def _(is_script, params, run_button):
    if is_script:
        results, summaries = run_eval(params, progress=log_progress)
    else:
        mo.stop(params is None, mo.md("Fix the parameters above, then press **Evaluate**."))
        mo.stop(not run_button.value, mo.md("Press **Evaluate** to score the predictions."))
        with marimo_progress("Verifying", remove_on_exit=True) as _progress:
            results, summaries = run_eval(params, progress=_progress)
    mo.md(f"Wrote `{Path(params.out) / 'results.parquet'}` and `{Path(params.out) / 'summary.json'}`")
    return results, summaries


@app.cell
def _(summaries):
    mo.vstack([
        mo.md("## Side by side"),
        mo.ui.table(comparison_table(summaries).round(4), selection=None),
        mo.hstack([
            mo.ui.altair_chart(rates_chart(summaries)),
            mo.ui.altair_chart(pass_at_k_chart(summaries)),
        ]),
    ])
    return


@app.cell
def _(summaries):
    _chart = rounds_chart(summaries)
    mo.stop(_chart is None)
    mo.vstack([
        mo.md("## Repair rounds (round 0: one-shot; round N: the answer after up to N repairs)"),
        mo.ui.table(rounds_table(summaries).round(4), selection=None),
        _chart,
    ])
    return


@app.cell
def _(summaries):
    mo.vstack([
        mo.md("## Most frequent compiler errors and clippy lints (completions showing each)"),
        mo.hstack([
            mo.ui.table(pd.DataFrame(
                [(m, code, n) for m, s in summaries.items() for code, n in s.top_error_codes],
                columns=["model", "error code", "completions"]), selection=None),
            mo.ui.table(pd.DataFrame(
                [(m, lint, n) for m, s in summaries.items() for lint, n in s.top_clippy_lints],
                columns=["model", "clippy lint", "completions"]), selection=None),
        ]),
    ])
    return


@app.cell
def _(results):
    mo.vstack([
        mo.md("## Results"),
        mo.ui.table(results.drop(columns=["diagnostics"]), page_size=10),
    ])
    return


if __name__ == "__main__":
    app.run()
