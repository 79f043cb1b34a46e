import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    import sys
    from dataclasses import asdict
    from pathlib import Path

    import marimo as mo

    from rust_rewards.data.pipeline import EVAL_FILE, MANIFEST_FILE, TRAIN_FILE, run_pipeline
    from rust_rewards.ui.charts import dropped_chart
    from rust_rewards.ui.entry_points import PROCESS
    from rust_rewards.workspace import use_workspace

    use_workspace(Path(__file__).parent)


@app.cell(hide_code=True)
def _():
    mo.md(r"""
    # Process Rust task data

    Load a task set (our canonical jsonl/parquet, Oxen `ox/Rust`, a Hugging Face dataset, MultiPL-E or
    Exercism rows), validate it, drop exact and near-duplicate prompts, check every reference solution
    against its reference tests with the verifier, drop prompts over the token budget, split train/eval
    deterministically, and write `train.parquet`, `eval.parquet` and `manifest.json`.

    As a script: `python process_data.py --source PATH_OR_NAME --out DIR [--no-verify] [--tokenizer none]`.
    """)
    return


@app.cell
def _():
    cli_params = PROCESS.command_line()
    controls, run_button = PROCESS.controls(cli_params)
    return cli_params, controls, run_button


@app.cell
def _(controls, form_problem, run_button):
    PROCESS.form(controls, run_button, form_problem)
    return


@app.cell
def _(cli_params, controls):
    params, form_problem, _status = PROCESS.checked(cli_params, controls)
    _status
    return form_problem, params


@app.cell
def _(params, run_button):
    _log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    result = PROCESS.run(params, run_button, lambda progress: run_pipeline(params, progress=progress, log=_log))
    return (result,)


@app.cell
def _(result):
    _counts = result.manifest["counts"]
    mo.vstack([
        mo.md("## Result"),
        mo.hstack([mo.stat(value=str(v), label=k.replace("_", " ")) for k, v in _counts.items()],
                  wrap=True),
        mo.md(f"Written to `{Path(result.manifest['params']['out']).resolve()}`: "
              f"`{TRAIN_FILE}`, `{EVAL_FILE}`, `{MANIFEST_FILE}`."),
        mo.ui.table([s.summary() for s in result.stages], label="stages", selection=None),
    ])
    return


@app.cell
def _(result):
    _rows = [asdict(d) for d in result.dropped]
    _chart = dropped_chart(result.dropped)
    mo.vstack([
        mo.md(f"## Dropped rows ({len(_rows)})"),
        *([mo.ui.altair_chart(_chart), mo.ui.table(_rows, label="dropped rows and why", selection=None)]
          if _chart is not None else [mo.md("Nothing was dropped.")]),
        mo.md("### Failures by reason"),
        mo.ui.table([{"reason": k, "count": v} for k, v in result.manifest["failures_by_reason"].items()]
                    + [{"reason": f"error code {k}", "count": v}
                       for k, v in result.manifest["compile_error_codes"].items()], selection=None),
    ])
    return


if __name__ == "__main__":
    app.run()
