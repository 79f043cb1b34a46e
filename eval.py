import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")

with app.setup:
    from pathlib import Path

    import marimo as mo
    import pandas as pd

    from rust_rewards.eval.metrics import FLAG_NOTE, comparison_table, rounds_table
    from rust_rewards.eval.scoring import run_eval
    from rust_rewards.layout import EvalFolder
    from rust_rewards.ui.charts import pass_at_k_chart, rates_chart, rounds_chart
    from rust_rewards.ui.entry_points import EVAL
    from rust_rewards.workspace import use_workspace

    use_workspace(Path(__file__).parent)


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


@app.cell
def _():
    cli_params = EVAL.command_line()
    controls, run_button = EVAL.controls(cli_params)
    return cli_params, controls, run_button


@app.cell
def _(controls, form_problem, run_button):
    EVAL.form(controls, run_button, form_problem)
    return


@app.cell
def _(cli_params, controls):
    params, form_problem, _status = EVAL.checked(cli_params, controls)
    _status
    return form_problem, params


@app.cell
def _(params, run_button):
    results, summaries = EVAL.run(params, run_button, lambda progress: run_eval(params, progress=progress))
    _out = EvalFolder(Path(params.out))
    mo.md(f"Wrote `{_out.results}` and `{_out.summary}`")
    return results, summaries


@app.cell
def _(summaries):
    mo.vstack([
        mo.md("## Side by side"),
        mo.ui.table(comparison_table(summaries).round(4), selection=None),
        mo.md(FLAG_NOTE),
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
