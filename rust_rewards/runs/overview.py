"""A training run and an eval folder at a glance (viz.py): the dashboard's parameters, a run's latest numbers, and
the lines viz.py prints when it runs as a script."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rust_rewards.eval.metrics import comparison_table
from rust_rewards.layout import COMPLETIONS_DIR, METRICS_FILE, RESULTS_FILE, SUMMARY_FILE
from rust_rewards.params import exit_with_usage_if_asked, fill_params, param
from rust_rewards.runs.records import (
    RunLogs,
    health_warnings,
    inspect_eval,
    inspect_run,
    load_eval,
    pass_rates,
    top_error_codes,
    verify_health,
)


@dataclass(frozen=True)
class VizParams:
    """What the dashboard shows: a training output dir, an optional eval dir, and display settings.

    Filled from the command line (``marimo run viz.py -- --run DIR --eval DIR``, ``python viz.py --run DIR``); in
    the page the same values are the defaults of the controls at the top.
    """

    run: str = param("", help=f"a train.py output folder ({METRICS_FILE}, {COMPLETIONS_DIR}/)", group="Data")
    eval: str = param("", help=f"an eval.py output folder ({SUMMARY_FILE}, {RESULTS_FILE})", group="Data")
    smoothing: float = param(0.6, help="exponential smoothing of the curves", group="Display", bounds=(0.0, 0.99))
    refresh: str = param("10s", help="how often a live run is re-read, e.g. 10s, 1m, off", group="Display")

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> VizParams:
        """The parameters of ``mo.cli_args()``; ``--help`` prints the usage and exits 0; an unknown flag or a bad
        value raises ``ValueError`` naming it."""
        exit_with_usage_if_asked(cls, args, "viz.py")
        return fill_params(cls, args)


def run_overview(run: RunLogs) -> dict[str, object]:
    """The latest numbers of a run: last step, total reward, loss, verifier trouble, top error codes (the pass rates:
    ``pass_rate_lines``)."""
    summary: dict[str, object] = {"run": str(run.path), "last_step": run.last_step,
                                  "completions": len(run.completions)}
    if run.history:
        summary["starts"] = len(run.history)
    for key, label in (("reward", "reward"), ("loss", "loss"), ("completions/clipped_ratio", "cut at the length limit"),
                       ("frac_reward_zero_std", "groups all tied")):
        if not run.metrics.empty and key in run.metrics.columns and run.metrics[key].notna().any():
            summary[label] = float(run.metrics[key].dropna().iloc[-1])
    health = verify_health(run.metrics)
    if not health.empty:
        summary["internal errors"] = int(health["internal_errors"].sum())
        summary["timeouts"] = int(health["timeouts"].sum())
    codes = top_error_codes(run.completions, 5)
    if codes:
        summary["top error codes"] = ", ".join(f"{code} ({count})" for code, count in codes)
    return summary


def pass_rate_lines(run: RunLogs) -> list[str]:
    """The last logged step's pass rates (``pass_rates``), each with the count it is a share of, under a line that
    says what they count; none without completions."""
    rates = pass_rates(run.completions)
    if rates.empty:
        return []
    step = int(rates["step"].max())
    head = (f"pass rates of step {step}'s sampled completions (build, clippy and the tests count on-task answers "
            "only):")
    return [head, *(f"  {row.check}: {row.rate:.4g} ({row.passed} of {row.n})"
                    for row in rates[rates["step"] == step].itertuples())]


def overview_lines(run: RunLogs | None, params: VizParams) -> Iterator[str]:
    """What viz.py prints as a script: the run's latest numbers and verifier warnings, then the eval comparison."""
    if run is None:
        yield f"viz: nothing to show: {inspect_run(params.run).message}"
    else:
        for key, value in run_overview(run).items():
            yield f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}"
        yield from pass_rate_lines(run)
        for warning in health_warnings(run.metrics):
            yield f"WARNING: {warning}"
    if params.eval:
        state = inspect_eval(params.eval)
        if state.ok:
            yield comparison_table(load_eval(params.eval).summaries).round(4).to_string(index=False)
        else:
            yield f"viz: no eval to show: {state.message}"
