"""The dashboard's headline cards: the reward and the pass rates of sampled completions, each labelled with the step
it is from and captioned with its mean over the last logged steps, so a card never passes one step off as the run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rust_rewards.runs.records import CHECK_COLUMNS, RunLogs, pass_rates

WINDOW = 5
"""How many of the last logged steps a card's caption averages."""


@dataclass(frozen=True)
class Headline:
    """One card: what it shows and from which step (``label``), the value, and the recent mean (``caption``)."""

    label: str
    value: float
    caption: str


def _headline(name: str, values: pd.Series, window: int) -> Headline:
    """The card of one series indexed by step (sorted, no nulls): its last value and the mean of the last ``window``."""
    step, recent = int(values.index[-1]), values.iloc[-window:]
    caption = (f"mean over the last {len(recent)} logged steps ({int(recent.index[0])}-{step}): {recent.mean():.3g}"
               if len(recent) > 1 else "the only logged step")
    return Headline(f"{name}, last step (step {step})", float(values.iloc[-1]), caption)


def headlines(run: RunLogs, window: int = WINDOW) -> list[Headline]:
    """The total reward (``metrics.jsonl``) and the build / clippy / own-test / hidden-test pass rates of the sampled
    completions (``pass_rates``), where the run logged them."""
    series: dict[str, pd.Series] = {}
    if "reward" in run.metrics.columns:
        series["reward"] = pd.to_numeric(run.metrics.set_index("step")["reward"], errors="coerce").dropna()
    rates = pass_rates(run.completions)
    for check in CHECK_COLUMNS:
        series[f"{check} pass rate"] = rates[rates["check"] == check].set_index("step")["rate"]
    return [_headline(name, values, window) for name, values in series.items() if not values.empty]
