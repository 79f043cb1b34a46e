"""The altair charts of the notebooks, built from what ``rust_rewards.runs.records`` and ``rust_rewards.eval.metrics``
compute: a training run's curves and verdicts and an eval folder's comparison (viz.py), an eval's rates, pass@k and
repair rounds (eval.py), and what processing dropped (process_data.py). Each builder returns None where there is
nothing to plot; ``chart_or_note`` shows that as a note, and ``health_callout`` sums up verifier trouble.
"""

from __future__ import annotations

from collections import Counter

import altair as alt
import marimo as mo
import pandas as pd

from rust_rewards.data.pipeline import Dropped
from rust_rewards.eval.metrics import METRIC_LABELS, ROUND_METRICS, ModelSummary, long_metrics, round_metrics
from rust_rewards.runs.records import (
    PASS_CHECKS,
    EvalLogs,
    error_code_counts,
    eval_error_codes,
    eval_metrics,
    health_warnings,
    metric_series,
    pass_rates,
    reward_series,
    top_error_codes,
    verify_health,
)

STEP_AXIS = alt.Axis(format="d", tickMinStep=1)
LINE_LEGEND = alt.Legend(orient="bottom", symbolOpacity=1)
"""A line chart's legend: its symbols drawn at full opacity, not at the faint raw line's."""
COUNT_AXIS = alt.Axis(format="d", tickMinStep=1)
EVAL_METRICS = [METRIC_LABELS[metric] for metric in ROUND_METRICS]
"""The eval metrics the charts compare, in their order and worded as the tables word them (besides pass@k)."""
PASS_LEGEND = alt.Legend(orient="bottom", columns=4, symbolOpacity=1)
"""The pass-rate chart's legend: seven checks in two rows (in one row the last ones ran off a half-width chart)."""


def table_wording(data: pd.DataFrame) -> pd.DataFrame:
    """Tidy metric rows with each ``metric`` named as the tables name it (``METRIC_LABELS``; pass@k stays)."""
    return data.assign(metric=data["metric"].map(lambda metric: METRIC_LABELS.get(metric, metric)))


def chart_or_note(chart: alt.Chart | None, note: str) -> object:
    """The chart as a marimo element, or a short note where there is nothing to plot yet. Drawn as SVG: its titles,
    axes and legends are text of the page (the browser's search finds them, the browser tests read them)."""
    if chart is None:
        return mo.callout(mo.md(note), kind="neutral")
    with alt.renderers.set_embed_options(renderer="svg"):
        return mo.ui.altair_chart(chart, chart_selection=False, legend_selection=True)


# A training run (viz.py)


def line_chart(data: pd.DataFrame, title: str, y_title: str, percent: bool = False) -> alt.Chart | None:
    """Raw values as faint lines and their smoothed values as solid lines, one colour per series (``LINE_LEGEND``)."""
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
        color=alt.Color("series:N", title=None, legend=LINE_LEGEND),
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


def loss_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Training loss per step: the supervised stage's cross-entropy on answer tokens, or GRPO's policy loss."""
    return line_chart(metric_series(metrics, {"loss": "loss"}, smoothing), "Training loss", "loss")


def token_accuracy_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """The supervised stage's share of answer tokens predicted correctly (``--stage sft`` only)."""
    series = metric_series(metrics, {"token accuracy": "mean_token_accuracy"}, smoothing)
    return line_chart(series, "Token accuracy (supervised stage)", "share", percent=True)


def reward_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Total (weighted) reward per step."""
    return line_chart(metric_series(metrics, {"total reward": "reward"}, smoothing), "Total reward", "reward")


def held_out_chart(metrics: pd.DataFrame) -> alt.Chart | None:
    """``train.py --eval-tasks``: the policy's hidden pass@1 and build rate on held-out tasks, at the steps it was
    evaluated (unsmoothed: a few points); None when the run logged no ``eval/*``."""
    series = metric_series(metrics, {"held-out hidden pass@1": "eval/hidden_pass_at_1",
                                     "held-out build rate": "eval/build_rate"})
    return line_chart(series, "Held-out tasks (current policy)", "rate", percent=True)


def components_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Each reward function's mean per step (unweighted)."""
    return line_chart(reward_series(metrics, smoothing), "Reward functions (mean, unweighted)", "reward")


def length_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Mean completion length in tokens."""
    series = metric_series(metrics, {"mean length": "completions/mean_length"}, smoothing)
    return line_chart(series, "Completion length", "tokens")


def signal_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Where GRPO's signal goes: the share of completions cut at max_completion_length (no reward, masked from the
    loss with ``--mask-truncated-completions``) and of groups whose rewards were all equal (zero advantage)."""
    series = metric_series(metrics, {"cut at the length limit": "completions/clipped_ratio",
                                     "groups all tied (no signal)": "frac_reward_zero_std"}, smoothing)
    return line_chart(series, "Cut-off answers and tied groups", "share", percent=True)


def policy_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Entropy and KL to the reference model, where logged."""
    series = metric_series(metrics, {"entropy": "entropy", "kl": "kl"}, smoothing)
    return line_chart(series, "Entropy / KL", "nats")


def time_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Seconds per optimizer step and the parts of it spent sampling completions and computing rewards (cargo)."""
    series = metric_series(metrics, {"step time": "step_time", "generation time": "generation_time",
                                     "reward time": "reward_time"}, smoothing)
    return line_chart(series, "Time per step", "seconds")


def share_chart(metrics: pd.DataFrame, smoothing: float) -> alt.Chart | None:
    """Fraction of the step spent sampling completions and in reward functions."""
    series = metric_series(metrics, {"generation share": "generation_share", "reward share": "reward_share"},
                           smoothing)
    return line_chart(series, "Generation and reward share of step time", "share", percent=True)


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


def health_callout(metrics: pd.DataFrame) -> object | None:
    """A red (internal errors) or orange (timeouts only) callout summing up verifier trouble, else None."""
    warnings = health_warnings(metrics)
    if not warnings:
        return None
    kind = "danger" if verify_health(metrics)["internal_errors"].any() else "warn"
    return mo.callout(mo.md("**Verifier trouble.** " + " ".join(warnings)), kind=kind)


def pass_rate_chart(completions: pd.DataFrame) -> alt.Chart | None:
    """Per step, the fraction of sampled completions that build, pass clippy, pass their own tests
    (and the hidden tests, where the task has them)."""
    rates = pass_rates(completions)
    if rates.empty:
        return None
    order = [check for check in PASS_CHECKS if check in set(rates["check"])]
    return (
        alt.Chart(rates)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="step", axis=STEP_AXIS),
            y=alt.Y("rate:Q", title="pass rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%")),
            color=alt.Color("check:N", title=None, sort=order, legend=PASS_LEGEND),
            # lines with equal rates (build and clippy, often) lie on each other: dashes and point shapes tell them
            strokeDash=alt.StrokeDash("check:N", title=None, sort=order, legend=None),
            shape=alt.Shape("check:N", title=None, sort=order, legend=None),
            tooltip=["check:N", "step:Q", alt.Tooltip("rate:Q", format=".1%"), "passed:Q", "n:Q"],
        )
        .properties(title="Pass rates of sampled completions", width="container", height=220)
    )


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


# An eval folder (viz.py)


def eval_chart(logs: EvalLogs) -> alt.Chart | None:
    """Models side by side per metric, bars with their 95% confidence intervals."""
    table = table_wording(eval_metrics(logs))
    extra_k = table["metric"].str.startswith("pass@") & (table["metric"] != "pass@1")
    table = table[table["metric"].isin(EVAL_METRICS) | extra_k]
    if table.empty:
        return None
    base = alt.Chart(table).encode(
        x=alt.X("metric:N", title=None, sort=EVAL_METRICS, axis=alt.Axis(labelAngle=-30)),
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


def eval_rounds_chart(logs: EvalLogs) -> alt.FacetChart | None:
    """Each metric per repair round, models side by side with 95% intervals (None without repair rounds)."""
    table = table_wording(round_metrics(logs.summaries))
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
        column=alt.Column("metric:N", title=None, sort=EVAL_METRICS),
        title="Eval: metrics per repair round (round 0 = one-shot)")


# An eval (eval.py)


def rates_chart(summaries: dict[str, ModelSummary]) -> alt.LayerChart:
    """Build/clippy/test rates, hidden pass@1, hack flags, off-task answers and signature mismatches per model, with
    95% intervals."""
    data = long_metrics(summaries)
    data = table_wording(data[~data["metric"].str.startswith("pass@")])
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


def rounds_chart(summaries: dict[str, ModelSummary]) -> alt.FacetChart | None:
    """Each metric per repair round, models side by side, with 95% intervals (None without repair rounds)."""
    data = table_wording(round_metrics(summaries))
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


# Processing (process_data.py)


def dropped_chart(dropped: list[Dropped]) -> alt.Chart | None:
    """Dropped tasks counted by stage and reason, one bar per reason (None when nothing was dropped)."""
    counts = Counter((d.stage, d.reason) for d in dropped)
    if not counts:
        return None
    rows = [{"stage": stage, "reason": reason, "tasks": n} for (stage, reason), n in counts.items()]
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("tasks:Q", title="dropped tasks", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("reason:N", title=None, sort="-x"),
        color=alt.Color("stage:N", sort=list(dict.fromkeys(s for s, _ in counts))),
        tooltip=["stage:N", "reason:N", "tasks:Q"],
    ).properties(width=420, height=alt.Step(22))
