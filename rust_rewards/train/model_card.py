"""A run folder's ``README.md``: a model card of this run (base model, adapter, stage, data, rewards, steps, final
reward; how to look at it and generate from it) written over TRL's stock card, which names no base model for a
local folder and shows a generic ``pipeline(...)`` example."""

from __future__ import annotations

import datetime as dt
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rust_rewards.atomic import write_text_atomic
from rust_rewards.hub import looks_local
from rust_rewards.layout import ADAPTER_DIR, METRICS_FILE, PARAMS_FILE
from rust_rewards.rewards.functions import MAX_VALUES
from rust_rewards.train.config import TrainParams

CARD_FILE = "README.md"

STAGE_WORDS = {"grpo": "GRPO: reinforcement learning with cargo as the judge",
               "sft": "supervised training on the verified reference answers",
               "dpo": "DPO on cargo-ranked preference pairs"}


@dataclass(frozen=True)
class RunDescription:
    """What a run is, in the words of its start summary and its model card."""

    output_dir: Path
    run_name: str
    model: str
    init_adapter: str
    stage: str
    preset: str
    data: str
    data_split: str
    n_tasks: int
    weights: dict[str, float]
    max_reward: float
    answer_format: str

    @classmethod
    def of(cls, p: TrainParams, weights: dict[str, float], n_tasks: int, max_reward: float) -> RunDescription:
        """The description of resolved params ``p`` training on ``n_tasks`` tasks."""
        return cls(Path(p.output_dir), p.run_name, p.model, p.init_adapter, p.stage, p.preset, p.data, p.data_split,
                   n_tasks, dict(weights), max_reward, p.answer_format)

    def model_text(self) -> str:
        """The base model, and the adapter training continued, if any."""
        return self.model + (f" + adapter {self.init_adapter}" if self.init_adapter else "")

    def data_text(self, quote: str = "") -> str:
        """The task file (in ``quote`` marks) and split with its task count."""
        split = f" (split {self.data_split})" if self.data_split else ""
        return f"{quote}{self.data}{quote}{split}, {self.n_tasks} tasks"

    def rewards_text(self) -> str:
        """Each reward with the most it pays and its weight: ``hidden_test_reward (up to 2) x1, build_reward (up to 1)
        x0.25``."""
        return ", ".join(f"{name} (up to {MAX_VALUES[name]:g}) x{weight:g}" for name, weight in self.weights.items())


def last_value(log_history: list[dict[str, Any]], key: str) -> tuple[int, float] | None:
    """``(step, value)`` of the last logged ``key``, or None."""
    for logs in reversed(log_history):
        if isinstance(logs.get(key), int | float):
            return int(logs.get("step", 0)), float(logs[key])
    return None


def final_line(run: RunDescription, log_history: list[dict[str, Any]]) -> str:
    """The last mean reward (GRPO) or loss (the other stages), with its step."""
    if run.stage == "grpo":
        last = last_value(log_history, "reward")
        return "not logged yet" if last is None else (
            f"{last[1]:.3f} at step {last[0]} (the rewards add up to {run.max_reward:g} at most)")
    last = last_value(log_history, "loss")
    return "not logged yet" if last is None else f"loss {last[1]:.4f} at step {last[0]}"


def model_card(run: RunDescription, adapter: Path, step: int, max_steps: int, log_history: list[dict[str, Any]]) -> str:
    """The card's markdown: ``adapter`` is the folder to load (the latest checkpoint until the run's ``adapter/``
    is written), after ``step`` of ``max_steps`` steps."""
    out = run.output_dir
    hub = not looks_local(run.model)
    base = f"[{run.model}](https://huggingface.co/{run.model})" if hub else f"`{run.model}`"
    final_adapter = out / ADAPTER_DIR
    adapter_note = "" if adapter == final_adapter else f" (the latest checkpoint; `{final_adapter}` when the run ends)"
    facts = [
        ("base model", base),
        ("adapter", f"`{adapter}`{adapter_note}"),
        *([("started from adapter", f"`{run.init_adapter}`")] if run.init_adapter else []),
        ("stage", f"{run.stage} ({STAGE_WORDS.get(run.stage, run.stage)}), preset {run.preset}"),
        ("data", run.data_text("`")),
        *([("rewards and weights", run.rewards_text())] if run.stage == "grpo" else []),
        ("answer format", f"`{run.answer_format}`"),
        ("steps done", f"{step} of {max_steps}"),
        ("final mean reward" if run.stage == "grpo" else "final loss", final_line(run, log_history)),
        ("written", dt.datetime.now(dt.UTC).date().isoformat()),
    ]
    inference = ["python", "inference.py", "--model", run.model, "--adapter", str(adapter),
                 "--answer-format", run.answer_format, "--tasks", run.data]
    front = "\n".join(["---", *([f"base_model: {run.model}"] if hub else []), "library_name: peft",
                       "tags:", "- rust", "- lora", f"- {run.stage}", "- rust_rewards", "---"])
    return f"""{front}

# {run.run_name}

A LoRA adapter trained by rust_rewards' `train.py`: a fine-tuned version of {base} for writing Rust.

{chr(10).join(f"- **{name}:** {value}" for name, value in facts)}

Full settings: `{out / PARAMS_FILE}`; the numbers of every step: `{out / METRICS_FILE}`.

## Look at it

```bash
marimo run viz.py -- --run {shlex.quote(str(out))}
```

## Generate from it

```bash
{shlex.join(inference)}
```

`--tasks` is the training data here; pass a held-out split (process_data.py's `eval.parquet`) for a fair score, then
score the predictions with `python eval.py --predictions FILE`.
"""


def write_model_card(run: RunDescription, adapter: Path, state: Any) -> Path:
    """Write the card of ``run`` at its trainer ``state`` (``global_step``, ``max_steps``, ``log_history``) to
    ``OUT/README.md``, atomically."""
    text = model_card(run, adapter, state.global_step, state.max_steps, state.log_history)
    return write_text_atomic(text, run.output_dir / CARD_FILE)
