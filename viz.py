import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="Rust GRPO dashboard")

with app.setup:
    from pathlib import Path

    import altair as alt
    import marimo as mo

    from rust_rewards.eval.metrics import FLAG_NOTE, comparison_table
    from rust_rewards.runs.findings import completion_findings
    from rust_rewards.runs.overview import VizParams, overview_lines
    from rust_rewards.runs.records import (
        ANY_CODE,
        NO_CODE,
        RunLogError,
        completion_table,
        dir_signature,
        filter_completions,
        inspect_eval,
        load_eval,
        reward_range,
        top_error_codes,
    )
    from rust_rewards.rust.extract import extract_rust
    from rust_rewards.ui.charts import (
        chart_or_note,
        components_chart,
        error_code_chart,
        eval_chart,
        eval_error_chart,
        eval_rounds_chart,
        health_chart,
        held_out_chart,
        length_chart,
        loss_chart,
        pass_rate_chart,
        policy_chart,
        reward_chart,
        share_chart,
        signal_chart,
        time_chart,
        token_accuracy_chart,
    )
    from rust_rewards.ui.page_style import page_style
    from rust_rewards.ui.run_status import run_status
    from rust_rewards.ui.script import is_script, one_line_errors

    alt.data_transformers.disable_max_rows()
    REFRESH_OPTIONS = ["5s", "10s", "30s", "1m", "5m"]
    from rust_rewards.workspace import use_workspace

    use_workspace(Path(__file__).parent)


@app.cell(hide_code=True)
def _():
    with one_line_errors("viz.py"):
        params = VizParams.from_args(mo.cli_args())
    return (params,)


@app.cell(hide_code=True)
def _(params):
    run_text = mo.ui.text(value=params.run, label="Training output dir", full_width=True)
    eval_text = mo.ui.text(value=params.eval, label="Eval output dir (optional)", full_width=True)
    _start = Path(params.run).expanduser().parent if params.run else Path.cwd()
    browser = mo.ui.file_browser(
        initial_path=_start if _start.is_dir() else Path.cwd(),
        selection_mode="directory",
        multiple=False,
        restrict_navigation=True,
        label="Or pick a training output dir (a selection here overrides the field above)",
    )
    refresh = mo.ui.refresh(options=REFRESH_OPTIONS, default_interval=params.refresh, label="Auto-refresh")
    reload = mo.ui.button(value=0, on_click=lambda n: n + 1, label="Reload now", kind="neutral")
    smoothing = mo.ui.slider(0.0, 0.99, step=0.01, value=params.smoothing, label="Smoothing (EMA)",
                             show_value=True)
    return browser, eval_text, refresh, reload, run_text, smoothing


@app.cell(hide_code=True)
def _(browser, eval_text, refresh, reload, run_text, smoothing):
    mo.vstack([
        page_style(),
        mo.md("# Rust GRPO training dashboard"),
        mo.hstack([run_text, eval_text], widths="equal"),
        mo.accordion({"Browse for a run directory": browser}),
        mo.hstack([refresh, reload, smoothing], justify="start", gap=2),
    ])
    return


@app.cell(hide_code=True)
def _(browser, eval_text, run_text):
    _picked = browser.path(0) if browser.value else None
    run_path = str(_picked) if _picked is not None else run_text.value.strip()
    eval_path = eval_text.value.strip()
    return eval_path, run_path


@app.cell(hide_code=True)
def _():
    get_version, set_version = mo.state(0)
    seen_signatures: dict[str, object] = {}
    return get_version, seen_signatures, set_version


@app.cell(hide_code=True)
def _(eval_path, refresh, reload, run_path, seen_signatures, set_version):
    # Every tick and every click compares file stamps; downstream cells rerun only when something changed,
    # so the table selection survives refreshes that bring nothing new.
    _signature = (run_path, dir_signature(run_path) if run_path else (),
                  eval_path, dir_signature(eval_path) if eval_path else (), reload.value)
    refresh.value
    if seen_signatures.get("last") != _signature:
        seen_signatures["last"] = _signature
        set_version(lambda v: v + 1)
    return


@app.cell(hide_code=True)
def _(get_version, run_path):
    get_version()
    run, _status = run_status(run_path)
    _status
    return (run,)


@app.cell(hide_code=True)
def _(params, run):
    if is_script():
        for _line in overview_lines(run, params):
            print(_line)
    return


@app.cell(hide_code=True)
def _(run, smoothing):
    mo.stop(run is None)
    _m = run.metrics
    _s = smoothing.value
    _none = "Not logged by this run (yet)."
    _held = held_out_chart(_m)
    mo.vstack([
        mo.md("## Loss"),
        mo.hstack([chart_or_note(loss_chart(_m, _s), _none),
                   chart_or_note(token_accuracy_chart(_m, _s), "Token accuracy is logged by `--stage sft` runs.")],
                  widths="equal"),
        mo.md("## Rewards"),
        chart_or_note(reward_chart(_m, _s), _none) if _held is None
        else mo.hstack([chart_or_note(reward_chart(_m, _s), _none), _held], widths="equal"),
        chart_or_note(components_chart(_m, _s), _none),
        mo.md("## Completions and policy"),
        mo.hstack([chart_or_note(length_chart(_m, _s), _none), chart_or_note(signal_chart(_m, _s), _none)],
                  widths="equal"),
        chart_or_note(policy_chart(_m, _s), "Entropy / KL not logged by this run."),
        mo.md("## Time"),
        mo.hstack([chart_or_note(time_chart(_m, _s), _none), chart_or_note(share_chart(_m, _s), _none)],
                  widths="equal"),
        mo.md("## Verifier health"),
        chart_or_note(health_chart(_m), "No internal errors or timeouts logged."),
    ])
    return


@app.cell(hide_code=True)
def _(run):
    mo.stop(run is None)
    mo.vstack([
        mo.md("## Verdicts of sampled completions"),
        mo.hstack([
            chart_or_note(pass_rate_chart(run.completions), "No completions logged yet."),
            chart_or_note(error_code_chart(run.completions), "No compiler error codes logged."),
        ], widths="equal"),
    ])
    return


@app.cell(hide_code=True)
def _(eval_path, get_version):
    get_version()
    mo.stop(not eval_path)
    _state = inspect_eval(eval_path)
    _logs = None
    _view = mo.callout(mo.md(_state.message), kind="warn")
    if _state.ok:
        try:
            _logs = load_eval(eval_path)
        except RunLogError as err:
            _view = mo.callout(mo.md(f"**Cannot read this eval.** {err}"), kind="danger")
    if _logs is not None:
        _rounds = eval_rounds_chart(_logs)
        _view = mo.vstack([
            mo.hstack([chart_or_note(eval_chart(_logs), "No metrics in this eval."),
                       chart_or_note(eval_error_chart(_logs), "No compiler error codes in this eval.")],
                      widths="equal"),
            mo.ui.table(comparison_table(_logs.summaries).round(4), selection=None, label="Summary per model"),
            mo.md(FLAG_NOTE),
            *([] if _rounds is None else [_rounds]),
        ])
    mo.vstack([mo.md("## Eval comparison"), _view])
    return


@app.cell(hide_code=True)
def _(run):
    mo.stop(run is None or run.completions.empty)
    _steps = run.completions["step"]
    reward_bounds = reward_range(run.completions)
    step_filter = mo.ui.range_slider(start=int(_steps.min()), stop=int(_steps.max()), step=1,
                                     label="Steps", show_value=True, full_width=True)
    reward_filter = mo.ui.range_slider(start=reward_bounds[0], stop=reward_bounds[1], step=0.1, label="Reward",
                                       show_value=True, full_width=True)
    code_filter = mo.ui.dropdown(
        options=[ANY_CODE, NO_CODE] + [code for code, _ in top_error_codes(run.completions, 50)],
        value=ANY_CODE, label="Error code",
    )
    return code_filter, reward_bounds, reward_filter, step_filter


@app.cell(hide_code=True)
def _(code_filter, reward_bounds, reward_filter, run, step_filter):
    # the full reward range means "no reward filter", which keeps completions whose reward is null
    _rewards = tuple(reward_filter.value)
    _rows = filter_completions(run.completions, tuple(step_filter.value),
                               None if _rewards == reward_bounds else _rewards, code_filter.value)
    table = mo.ui.table(
        completion_table(_rows).reset_index(names="row"),
        selection="single",
        page_size=10,
        label=f"{len(_rows)} of {len(run.completions)} completions (select one to see its code)",
    )
    mo.vstack([mo.md("## Completions"), mo.hstack([step_filter, reward_filter, code_filter], widths="equal"),
               table])
    return (table,)


@app.cell(hide_code=True)
def _(run, table):
    mo.stop(table.value is None or len(table.value) == 0,
            mo.callout(mo.md("Select a row to see the code, the failing tests and the compiler's diagnostics."),
                       kind="neutral"))
    _row = run.completions.loc[int(table.value["row"].iloc[0])]
    _code = extract_rust(_row["completion"])
    mo.vstack([
        mo.md(f"### Step {_row['step']} · task `{_row.get('task_id', '?')}` · "
              f"reward {float(_row['reward']):.3f} · {_row['verdict']}"),
        mo.hstack([
            mo.vstack([mo.md("**Compiled code**"),
                       mo.ui.code_editor(value=_code or "(no ```rust block)", language="rs",
                                         disabled=True)]),
            mo.vstack([mo.md("**Diagnostics**"), mo.plain_text(completion_findings(_row.to_dict()))]),
        ], widths="equal"),
        mo.accordion({"Full completion": mo.plain_text(_row["completion"]),
                      "Prompt": mo.plain_text(str(_row.get("prompt", "")))}),
    ])
    return


if __name__ == "__main__":
    app.run()
