import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="Rust GRPO dashboard")

with app.setup:
    import math
    from dataclasses import dataclass
    from pathlib import Path

    import altair as alt
    import marimo as mo
    import pandas as pd

    from rust_rewards.eval.metrics import comparison_table, round_metrics
    from rust_rewards.runs.records import (
        ANY_CODE,
        NO_CODE,
        EvalLogs,
        RunLogError,
        RunLogs,
        completion_table,
        dir_signature,
        error_code_counts,
        eval_error_codes,
        eval_metrics,
        filter_completions,
        health_warnings,
        inspect_eval,
        inspect_run,
        load_eval,
        load_run,
        metric_series,
        pass_rates,
        reward_series,
        start_table,
        top_error_codes,
        verify_health,
    )
    from rust_rewards.rust.extract import extract_rust

    alt.data_transformers.disable_max_rows()
    REFRESH_OPTIONS = ["5s", "10s", "30s", "1m", "5m"]
    STEP_AXIS = alt.Axis(format="d", tickMinStep=1)
    COUNT_AXIS = alt.Axis(format="d", tickMinStep=1)
    EVAL_METRICS = ("build_rate", "clippy_rate", "test_rate", "hidden_pass_at_1", "hack_flag_rate")


@app.class_definition
@dataclass(frozen=True)
class VizParams:
    """What the dashboard shows: a training output dir, an optional eval dir, and display settings.

    Filled from the command line (``marimo run viz.py -- --run DIR --eval DIR``); in the page the same
    values are the defaults of the controls at the top.
    """

    run_dir: str = ""
    eval_dir: str = ""
    smoothing: float = 0.6
    refresh: str = "10s"

    @classmethod
    def from_args(cls, args: dict[str, str]) -> "VizParams":
        known = {"run": "run_dir", "eval": "eval_dir", "smoothing": "smoothing", "refresh": "refresh"}
        if any(str(key).lstrip("-") in ("help", "h") for key in args):
            print("usage: python viz.py [--run DIR] [--eval DIR] [--smoothing S] [--refresh T]\n\n"
                  "  --run DIR  a train.py output folder (metrics.jsonl, completions/)\n"
                  "  --eval DIR  an eval.py output folder (summary.json, results.parquet)\n"
                  f"  --smoothing S  exponential smoothing of the curves, in [0, 1) [default: {cls.smoothing}]\n"
                  f"  --refresh T  how often a live run is re-read, e.g. 10s, 1m, off [default: {cls.refresh}]",
                  flush=True)
            raise SystemExit(0)
        unknown = sorted(set(args) - set(known))
        if unknown:
            raise ValueError(f"unknown argument(s) {', '.join('--' + u for u in unknown)}; "
                             f"expected {', '.join('--' + k for k in known)}")
        values: dict[str, object] = {known[key]: value for key, value in args.items()}
        if "smoothing" in values:
            try:
                values["smoothing"] = float(values["smoothing"])
            except ValueError as err:
                raise ValueError(f"--smoothing must be a number, got {values['smoothing']!r}") from err
            if not 0.0 <= values["smoothing"] < 1.0:
                raise ValueError(f"--smoothing must be in [0, 1), got {values['smoothing']}")
        return cls(**values)


@app.function
def line_chart(data: pd.DataFrame, title: str, y_title: str, percent: bool = False) -> alt.Chart | None:
    """Raw values as faint lines and their smoothed values as solid lines, one colour per series."""
    if data.empty:
        return None
    axis = alt.Axis(format=".2~%") if percent else alt.Axis()
    low = float(min(data["value"].min(), data["smoothed"].min()))
    high = float(max(data["value"].max(), data["smoothed"].max()))
    # a constant series (all-zero rewards early in training) gets a visible range instead of NaN ticks
    pad = abs(low) * 0.1 or 1.0
    scale = alt.Scale(domain=[min(low, 0.0), max(high, 0.0) + pad]) if high - low < 1e-12 else alt.Undefined
    base = alt.Chart(data).encode(
        x=alt.X("step:Q", title="step", axis=STEP_AXIS),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom")),
    )
    raw = base.mark_line(opacity=0.3).encode(
        y=alt.Y("value:Q", title=y_title, axis=axis, scale=scale)
    )
    smooth = base.mark_line(point=len(data) < 40).encode(
        y="smoothed:Q",
        tooltip=["series:N", "step:Q", alt.Tooltip("value:Q", format=".4"),
                 alt.Tooltip("smoothed:Q", format=".4")],
    )
    return (raw + smooth).properties(title=title, width="container", height=220)


@app.function
def loss_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Training loss per step: the supervised stage's cross-entropy on answer tokens, or GRPO's policy loss."""
    return line_chart(metric_series(metrics, {"loss": "loss"}, smoothing), "Training loss", "loss")


@app.function
def token_accuracy_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """The supervised stage's share of answer tokens predicted correctly (``--stage sft`` only)."""
    series = metric_series(metrics, {"token accuracy": "mean_token_accuracy"}, smoothing)
    return line_chart(series, "Token accuracy (supervised stage)", "share", percent=True)


@app.function
def reward_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Total (weighted) reward per step."""
    return line_chart(metric_series(metrics, {"total reward": "reward"}, smoothing), "Total reward", "reward")


@app.function
def held_out_chart(metrics: pd.DataFrame) -> alt.Chart | None:
    """``train.py --eval-tasks``: the policy's hidden pass@1 and build rate on held-out tasks, at the steps it was
    evaluated (unsmoothed: a few points); None when the run logged no ``eval/*``."""
    series = metric_series(metrics, {"held-out hidden pass@1": "eval/hidden_pass_at_1",
                                     "held-out build rate": "eval/build_rate"})
    return line_chart(series, "Held-out tasks (current policy)", "rate", percent=True)


@app.function
def components_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Each reward function's mean per step (unweighted)."""
    return line_chart(reward_series(metrics, smoothing), "Reward functions (mean, unweighted)", "reward")


@app.function
def length_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Mean completion length in tokens."""
    series = metric_series(metrics, {"mean length": "completions/mean_length"}, smoothing)
    return line_chart(series, "Completion length", "tokens")


@app.function
def clipped_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Share of completions cut at max_completion_length."""
    series = metric_series(metrics, {"clipped ratio": "completions/clipped_ratio"}, smoothing)
    return line_chart(series, "Clipped completions", "share", percent=True)


@app.function
def policy_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Entropy and KL to the reference model, where logged."""
    series = metric_series(metrics, {"entropy": "entropy", "kl": "kl"}, smoothing)
    return line_chart(series, "Entropy / KL", "nats")


@app.function
def time_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Seconds per optimizer step and the part of it spent computing rewards (running cargo)."""
    series = metric_series(metrics, {"step time": "step_time", "reward time": "reward_time"}, smoothing)
    return line_chart(series, "Time per step", "seconds")


@app.function
def share_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Fraction of the step spent in reward functions."""
    series = metric_series(metrics, {"reward share": "reward_share"}, smoothing)
    return line_chart(series, "Reward share of step time", "share", percent=True)


@app.function
def health_chart(metrics: pd.DataFrame) -> alt.Chart | None:
    """Per step, completions whose verification failed for infrastructure reasons (internal errors: no
    reward) and completions with a timed-out compile or test phase; None when there were none."""
    health = verify_health(metrics)
    if not (health["internal_errors"].any() or health["timeouts"].any()):
        return None
    tidy = health.rename(columns={"internal_errors": "internal errors"}).melt(
        id_vars=["step", "completions"], value_vars=["internal errors", "timeouts"], var_name="kind",
        value_name="count")
    return (
        alt.Chart(tidy)
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("kind:N"),
            y=alt.Y("count:Q", title="completions", axis=COUNT_AXIS),
            color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom"),
                            scale=alt.Scale(domain=["internal errors", "timeouts"], range=["#d62728", "#ff7f0e"])),
            tooltip=["step:O", "kind:N", "count:Q", alt.Tooltip("completions:Q", title="of completions")],
        )
        .properties(title="Verifier internal errors and timeouts per step", width="container", height=220)
    )


@app.function
def health_callout(metrics: pd.DataFrame) -> object | None:
    """A red (internal errors) or orange (timeouts only) callout summing up verifier trouble, else None."""
    warnings = health_warnings(metrics)
    if not warnings:
        return None
    kind = "danger" if verify_health(metrics)["internal_errors"].any() else "warn"
    return mo.callout(mo.md("**Verifier trouble.** " + " ".join(warnings)), kind=kind)


@app.function
def pass_rate_chart(completions: pd.DataFrame) -> alt.Chart | None:
    """Per step, the fraction of sampled completions that build, pass clippy, pass their own tests
    (and the hidden tests, where the task has them)."""
    rates = pass_rates(completions)
    if rates.empty:
        return None
    return (
        alt.Chart(rates)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="step", axis=STEP_AXIS),
            y=alt.Y("rate:Q", title="pass rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%")),
            color=alt.Color("check:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["check:N", "step:Q", alt.Tooltip("rate:Q", format=".1%"), "passed:Q", "n:Q"],
        )
        .properties(title="Pass rates of sampled completions", width="container", height=220)
    )


@app.function
def error_code_chart(completions: pd.DataFrame, top: int = 8) -> alt.Chart | None:
    """Per step, how many completions hit each of the most frequent rustc error codes."""
    counts = error_code_counts(completions, top)
    order = [code for code, _ in top_error_codes(completions, top)]
    if counts.empty or counts["count"].sum() == 0:
        return None
    return (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("count:Q", title="completions", stack="zero", axis=COUNT_AXIS),
            color=alt.Color("code:N", title="error code", sort=order),
            tooltip=["step:O", "code:N", "count:Q"],
        )
        .properties(title=f"Top {top} compiler error codes per step", width="container", height=220)
    )


@app.function
def eval_chart(logs: EvalLogs) -> alt.Chart | None:
    """Models side by side per metric, bars with their 95% confidence intervals."""
    table = eval_metrics(logs)
    extra_k = table["metric"].str.startswith("pass@") & (table["metric"] != "pass@1")
    table = table[table["metric"].isin(EVAL_METRICS) | extra_k]
    if table.empty:
        return None
    base = alt.Chart(table).encode(
        x=alt.X("metric:N", title=None, sort=list(EVAL_METRICS), axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("model:N"),
        color=alt.Color("model:N", legend=alt.Legend(orient="bottom")),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("value:Q", title="rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%")),
        tooltip=["model:N", "metric:N", alt.Tooltip("value:Q", format=".1%"),
                 alt.Tooltip("lo:Q", format=".1%"), alt.Tooltip("hi:Q", format=".1%")],
    )
    whiskers = base.mark_bar(width=2).encode(y="lo:Q", y2="hi:Q", color=alt.value("black"))
    return (bars + whiskers).properties(
        title="Eval: models side by side (95% CI)", width="container", height=260
    )


@app.function
def eval_error_chart(logs: EvalLogs) -> alt.Chart | None:
    """Each model's most frequent compiler error codes."""
    codes = eval_error_codes(logs)
    if codes.empty:
        return None
    return (
        alt.Chart(codes)
        .mark_bar()
        .encode(
            y=alt.Y("code:N", title="error code", sort="-x"),
            x=alt.X("count:Q", title="completions", axis=COUNT_AXIS),
            yOffset=alt.YOffset("model:N"),
            color=alt.Color("model:N", legend=alt.Legend(orient="bottom")),
            tooltip=["model:N", "code:N", "count:Q"],
        )
        .properties(title="Eval: top compiler error codes", width="container", height=220)
    )


@app.function
def eval_rounds_chart(logs: EvalLogs) -> alt.FacetChart | None:
    """Each metric per repair round, models side by side with 95% intervals (None without repair rounds)."""
    table = round_metrics(logs.summaries)
    if table.empty:
        return None
    base = alt.Chart().encode(x=alt.X("round:O", title="repair round"),
                              color=alt.Color("model:N", legend=alt.Legend(orient="bottom")))
    line = base.mark_line(point=True).encode(
        y=alt.Y("value:Q", title="rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%")),
        tooltip=["model:N", "round:O", "metric:N", alt.Tooltip("value:Q", format=".1%"),
                 alt.Tooltip("lo:Q", format=".1%"), alt.Tooltip("hi:Q", format=".1%")],
    )
    whiskers = base.mark_errorbar().encode(y="lo:Q", y2="hi:Q")
    return alt.layer(line, whiskers, data=table).properties(width=160, height=200).facet(
        column=alt.Column("metric:N", title=None, sort=list(EVAL_METRICS)),
        title="Eval: metrics per repair round (round 0 = one-shot)")


@app.function
def run_summary(run: RunLogs) -> dict[str, object]:
    """The latest numbers of a run: last step, total reward, pass rates of the last logged step."""
    summary: dict[str, object] = {"run": str(run.path), "last_step": run.last_step,
                                  "completions": len(run.completions)}
    if run.history:
        summary["starts"] = len(run.history)
    for key in ("reward", "loss"):
        if not run.metrics.empty and key in run.metrics.columns:
            summary[key] = float(run.metrics[key].iloc[-1])
    health = verify_health(run.metrics)
    if not health.empty:
        summary["internal errors"] = int(health["internal_errors"].sum())
        summary["timeouts"] = int(health["timeouts"].sum())
    rates = pass_rates(run.completions)
    if not rates.empty:
        last = rates[rates["step"] == rates["step"].max()]
        summary.update({f"{row.check} pass": float(row.rate) for row in last.itertuples()})
    codes = top_error_codes(run.completions, 5)
    if codes:
        summary["top error codes"] = ", ".join(f"{code} ({count})" for code, count in codes)
    return summary


@app.function
def chart_or_note(chart: alt.Chart | None, note: str) -> object:
    """The chart as a marimo element, or a short note where there is nothing to plot yet."""
    if chart is None:
        return mo.callout(mo.md(note), kind="neutral")
    return mo.ui.altair_chart(chart, chart_selection=False, legend_selection=True)


@app.cell(hide_code=True)
def _():
    params = VizParams.from_args(dict(mo.cli_args()))
    mode = mo.app_meta().mode
    return mode, params


@app.cell(hide_code=True)
def _(params):
    run_text = mo.ui.text(value=params.run_dir, label="Training output dir", full_width=True)
    eval_text = mo.ui.text(value=params.eval_dir, label="Eval output dir (optional)", full_width=True)
    _start = Path(params.run_dir).expanduser().parent if params.run_dir else Path.cwd()
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
    run_state = inspect_run(run_path)
    run: RunLogs | None = None
    _error = None
    if run_state.ok:
        try:
            run = load_run(run_path)
        except RunLogError as err:
            _error = str(err)
    if _error is not None:
        run = None
        _status = mo.callout(mo.md(f"**Cannot read this run.** {_error}"), kind="danger")
    elif run_state.kind == "ok":
        _summary = run_summary(run)
        _keys = ("reward", "build pass", "clippy pass", "tests pass", "hidden tests pass")
        _stats = mo.hstack(
            [mo.stat(value=str(_summary["last_step"]), label="last step", caption=str(run.path))]
            + [mo.stat(value=f"{_summary[k]:.3g}", label=k) for k in _keys if k in _summary],
            justify="start", gap=2,
        )
        _starts = start_table(run.history)
        _status = mo.vstack([item for item in (
            _stats,
            health_callout(run.metrics),
            mo.accordion({f"Starts of this run ({len(_starts)}, params_history.jsonl)":
                          mo.ui.table(_starts, selection=None)}) if len(_starts) else None,
        ) if item is not None])
    elif run_state.kind == "empty":
        _status = mo.callout(
            mo.md(f"**No logs yet.** {run_state.message} The page looks again at every auto-refresh."),
            kind="info",
        )
    elif run_state.kind == "invalid":
        _status = mo.callout(mo.md(f"**Not a training run.** {run_state.message}"), kind="warn")
    else:
        _status = mo.callout(mo.md(f"**No run to show.** {run_state.message}"), kind="warn")
    _status
    return (run,)


@app.cell(hide_code=True)
def _(mode, params, run):
    if mode == "script":
        if run is None:
            print(f"viz: nothing to show: {inspect_run(params.run_dir).message}")
        else:
            for _key, _value in run_summary(run).items():
                print(f"{_key}: {_value:.4g}" if isinstance(_value, float) else f"{_key}: {_value}")
            for _warning in health_warnings(run.metrics):
                print(f"WARNING: {_warning}")
        if params.eval_dir:
            _eval_state = inspect_eval(params.eval_dir)
            if _eval_state.ok:
                print(comparison_table(load_eval(params.eval_dir).summaries).round(4).to_string(index=False))
            else:
                print(f"viz: no eval to show: {_eval_state.message}")
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
        mo.hstack([chart_or_note(length_chart(_m, _s), _none), chart_or_note(clipped_chart(_m, _s), _none)],
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
def _(run):
    mo.stop(run is None or run.completions.empty)
    _steps = run.completions["step"]
    _rewards = pd.to_numeric(run.completions["reward"], errors="coerce").fillna(0.0)
    _lo, _hi = float(_rewards.min()), float(_rewards.max())
    _lo, _hi = math.floor(_lo * 10) / 10, math.ceil(_hi * 10) / 10
    _hi = _hi if _hi > _lo else _lo + 0.1
    reward_bounds = (_lo, _hi)
    step_filter = mo.ui.range_slider(start=int(_steps.min()), stop=int(_steps.max()), step=1,
                                     label="Steps", show_value=True, full_width=True)
    reward_filter = mo.ui.range_slider(start=_lo, stop=_hi, step=0.1, label="Reward", show_value=True,
                                       full_width=True)
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
            mo.callout(mo.md("Select a row to see the code and the compiler's diagnostics."), kind="neutral"))
    _row = run.completions.loc[int(table.value["row"].iloc[0])]
    _code = extract_rust(_row["completion"])
    _diagnostics = str(_row.get("diagnostics") or "") or "(no diagnostics)"
    mo.vstack([
        mo.md(f"### Step {_row['step']} · task `{_row.get('task_id', '?')}` · "
              f"reward {float(_row['reward']):.3f} · {_row['verdict']}"),
        mo.hstack([
            mo.vstack([mo.md("**Compiled code**"),
                       mo.ui.code_editor(value=_code or "(no ```rust block)", language="rs",
                                         disabled=True)]),
            mo.vstack([mo.md("**Diagnostics**"), mo.plain_text(_diagnostics)]),
        ], widths="equal"),
        mo.accordion({"Full completion": mo.plain_text(_row["completion"]),
                      "Prompt": mo.plain_text(str(_row.get("prompt", "")))}),
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
            *([] if _rounds is None else [_rounds]),
        ])
    mo.vstack([mo.md("## Eval comparison"), _view])
    return


if __name__ == "__main__":
    app.run()
