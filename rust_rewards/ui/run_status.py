"""The dashboard's head: a run folder read once, with the status shown above its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import marimo as mo

from rust_rewards.layout import PARAMS_HISTORY_FILE
from rust_rewards.runs.headlines import headlines
from rust_rewards.runs.records import RunLogError, RunLogs, inspect_run, load_run, start_table
from rust_rewards.ui.charts import health_callout


def run_status(run_path: str | Path) -> tuple[RunLogs | None, Any]:
    """``(run, status)``: the run's logs (``None`` when there are none to show) and what the page shows about it: its
    last step and headline cards (``headlines``: each labelled with its step), the verifier's health and the run's
    starts, or a callout saying why there is nothing to show (no logs yet, not a run, unreadable)."""
    state = inspect_run(run_path)
    if not state.ok:
        if state.kind == "empty":
            return None, mo.callout(mo.md(f"**No logs yet.** {state.message} The page looks again at every "
                                          "auto-refresh."), kind="info")
        title = "Not a training run." if state.kind == "invalid" else "No run to show."
        return None, mo.callout(mo.md(f"**{title}** {state.message}"), kind="warn")
    try:
        run = load_run(run_path)
    except RunLogError as err:
        return None, mo.callout(mo.md(f"**Cannot read this run.** {err}"), kind="danger")
    stats = mo.hstack(
        [mo.stat(value=str(run.last_step), label="last step", caption=str(run.path))]
        + [mo.stat(value=f"{h.value:.3g}", label=h.label, caption=h.caption) for h in headlines(run)],
        justify="start", gap=2, wrap=True,
    )
    starts = start_table(run.history)
    history = mo.accordion({f"Starts of this run ({len(starts)}, {PARAMS_HISTORY_FILE})":
                            mo.ui.table(starts, selection=None)}) if len(starts) else None
    return run, mo.vstack([item for item in (stats, health_callout(run.metrics), history) if item is not None])
