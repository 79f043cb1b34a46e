import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    from pathlib import Path

    import marimo as mo

    from rust_rewards.eval.inference import run_inference
    from rust_rewards.ui.entry_points import INFERENCE
    from rust_rewards.workspace import use_workspace

    use_workspace(Path(__file__).parent)


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


@app.cell
def _():
    cli_params = INFERENCE.command_line()
    controls, run_button = INFERENCE.controls(cli_params)
    return cli_params, controls, run_button


@app.cell
def _(controls, form_problem, run_button):
    INFERENCE.form(controls, run_button, form_problem)
    return


@app.cell
def _(cli_params, controls):
    params, form_problem, _status = INFERENCE.checked(cli_params, controls)
    _status
    return form_problem, params


@app.cell
def _(params, run_button):
    predictions = INFERENCE.run(params, run_button, lambda progress: run_inference(params, progress=progress))
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
