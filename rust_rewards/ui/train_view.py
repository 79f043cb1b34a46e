"""The train notebook's form and live view, as marimo elements: the parameter controls and reward weights from
``TrainParams`` (``rust_rewards.ui.forms``), form values -> validated params with errors placed at their field, and a
started job's progress, reward chart, stop button and log."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import marimo as mo

from rust_rewards.layout import METRICS_FILE
from rust_rewards.params import info_of
from rust_rewards.rewards import SCORES
from rust_rewards.rewards.recipes import RECIPES, parse_weights, resolve_weights, weights_table
from rust_rewards.train.config import TrainParams, params_from_mapping, preset_params
from rust_rewards.train.jobs import TrainJob, cli_flags
from rust_rewards.train.resolve import validate_params
from rust_rewards.ui.forms import control, param_controls, problem_field
from rust_rewards.workspace import workspace

OWN_CONTROLS = ("preset", "rewards", "reward_weights")
"""Fields with controls of their own (the preset dropdown, the reward pick, one weight per picked reward)."""


def form_start(cli_values: Mapping[str, Any], preset: str) -> tuple[TrainParams, str | None]:
    """The form's starting params: the command line's values on ``preset``, or the preset alone and the command
    line's problem when they are refused."""
    try:
        return params_from_mapping({**cli_values, "preset": preset}), None
    except ValueError as err:
        return preset_params(preset), str(err)


def form_controls(defaults: TrainParams) -> tuple[Any, Any]:
    """The form's controls for every field but ``OWN_CONTROLS``, and the reward pick, filled from ``defaults``."""
    controls = param_controls(TrainParams, defaults, workspace(), skip=OWN_CONTROLS)
    reward_pick = control("rewards", list[str], defaults.rewards, info_of(TrainParams)["rewards"], workspace())
    return controls, reward_pick


def form_params(preset: str, values: Mapping[str, Any], weights: Mapping[str, float]) -> TrainParams:
    """Validated params from the form: its controls' values and a weight per selected reward (``ValueError``
    naming the flag, as on the command line). Only weights that differ from the pick's defaults (a recipe's, else
    1.0) are written to ``reward_weights``."""
    try:
        defaults = resolve_weights(values.get("rewards", []))
    except ValueError:
        defaults = {}  # the pick itself is refused below, naming --rewards
    changed = ",".join(f"{name}={float(w):g}" for name, w in weights.items() if defaults.get(name) != w)
    return validate_params(params_from_mapping({"preset": preset, **values, "reward_weights": changed}))


def start_weights(selected: Sequence[str], defaults: TrainParams) -> dict[str, float]:
    """The rewards a pick stands for (a recipe: its rewards) and their starting weights: the pick's (a recipe's,
    else 1.0) with ``defaults``' own weights over them where they name the same rewards; none for a pick that is
    refused."""
    try:
        weights = resolve_weights(selected)
    except ValueError:
        return {}
    own = defaults.reward_weights.strip()
    mine = RECIPES[own].weights if own in RECIPES else parse_weights(own, list(SCORES))
    return {name: mine.get(name, weight) for name, weight in weights.items()}


def reward_weight_controls(selected: Sequence[str], defaults: TrainParams) -> Any:
    """One weight control per reward of the pick (a recipe: each of its rewards), from ``start_weights``."""
    return mo.ui.dictionary({name: mo.ui.number(start=0.0, stop=100.0, step=0.05, value=weight,
                                                label=f"weight of {name}")
                             for name, weight in start_weights(selected, defaults).items()})


def weights_view(p: TrainParams) -> Any:
    """The rewards ``p`` trains with: each weight and the most it adds to the total (markdown table)."""
    table = weights_table(resolve_weights(p.rewards, p.reward_weights))
    return mo.md(f"**Rewards** (`{', '.join(p.rewards)}`, answer format `{p.answer_format}`): the total is the "
                 f"weighted sum; a cut-off answer earns nothing\n\n{table}")


def field_problem(message: str) -> Any:
    """A form error shown under the form, naming the group and field of the first ``--flag`` in ``message``."""
    name = problem_field(TrainParams, message)
    where = f"**{info_of(TrainParams)[name].group} › {name.replace('_', ' ')}:** " if name else ""
    return mo.callout(mo.md(where + message), kind="danger")


def run_summary(p: TrainParams) -> str:
    """One line on what ``p`` trains per step and for how long, with the command line that runs it."""
    return (f"{p.per_device_train_batch_size * p.gradient_accumulation_steps} completions per step "
            f"({p.prompts_per_step():g} prompts x {p.num_generations}), "
            f"{'max steps ' + str(p.max_steps) if p.max_steps > 0 else 'epochs'}; "
            f"`python train.py {shlex.join(cli_flags(p))}`")


def live_chart(metrics: Any) -> Any:
    """Reward per step (mean and each reward function; loss for the supervised stage) as steps finish."""
    import altair as alt
    import pandas as pd

    from rust_rewards.runs.records import metric_series, reward_series

    series = metric_series(metrics, {"reward (weighted total)": "reward", "loss": "loss"})
    rewards = reward_series(metrics)
    data = pd.concat([series, rewards], ignore_index=True) if len(rewards) else series
    chart = alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("step:Q", title="step", axis=alt.Axis(tickMinStep=1)),
        y=alt.Y("value:Q", title="value"),
        color=alt.Color("series:N", title=None),
        tooltip=["step", "series", alt.Tooltip("value:Q", format=".3f")],
    ).properties(height=260, width="container")
    return mo.ui.altair_chart(chart, chart_selection=False, legend_selection=True)


def job_view(job: TrainJob, stop_button: Any) -> Any:
    """Progress, the live reward chart, the stop button and the end of the run's log."""
    import pandas as pd

    from rust_rewards.runs.records import load_metrics

    metrics_file = job.output_dir / METRICS_FILE
    metrics = load_metrics(job.output_dir) if metrics_file.is_file() else pd.DataFrame()
    step = int(metrics["step"].max()) if len(metrics) else 0
    code = job.returncode()
    total = f" of {job.max_steps}" if job.max_steps > 0 else ""
    if code is None:
        state = "stopping after this step (a checkpoint is kept)" if job.stopping() else "training"
        head = mo.md(f"**{state}**: step {step}{total} logged · `{job.output_dir}`")
        parts = [mo.hstack([head, stop_button], justify="space-between")]
        if job.max_steps > 0:
            parts.append(mo.md(f"<progress value='{step}' max='{job.max_steps}' style='width:100%'></progress>"))
    elif code == 0:
        parts = [mo.callout(mo.md(f"**Finished**: step {step}{total} logged; adapter in "
                                  f"`{job.output_dir / 'adapter'}`. Dashboard: "
                                  f"`marimo run viz.py -- --run {job.output_dir}`"), kind="success")]
    else:
        parts = [mo.callout(mo.md(f"**The run failed** (exit {code}); the end of `{job.log}`:"), kind="danger")]
    if len(metrics):
        parts.append(live_chart(metrics))
    parts.append(mo.accordion({"Log": mo.plain_text(job.log_tail())}, lazy=False) if code in (None, 0)
                 else mo.plain_text(job.log_tail(40)))
    return mo.vstack(parts)
