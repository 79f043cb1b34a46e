"""Reference hints for GRPO past the model's frontier: a task whose every answer fails gives GRPO nothing to learn
from, so its prompt may carry the beginning of its reference solution as the beginning of the answer, and the
hint shrinks as the task's groups start to pass (per task, ``adaptive``) or over the run's steps (``anneal``,
QuestA-style), down to none: the condition evaluation always uses.

A hinted prompt is rendered text (TRL cannot prefill an assistant turn of a conversational prompt): the chat
template with its generation prompt, the answer's opening (```` ```rust ````), then the hint, the reference's first
lines cut at a line boundary. The hint is prompt, so the loss covers only the generated tokens; the rewards judge
hint + completion as one answer (the ``hint`` column, ``rewards.functions.with_hints``). Without a hint the
prompt is the same chat template text with nothing after it, token for token what a conversational prompt gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rust_rewards.atomic import write_json_atomic
from rust_rewards.layout import RunFolder

OPENING = "```rust\n"
"""What a hinted answer starts with before the hint: the code block every answer format asks for."""

MODES = ("off", "adaptive", "anneal")


def hint_text(reference: str, fraction: float) -> str:
    """The first ``fraction`` of ``reference``'s lines (whole lines, rounded down; ``""`` for 0).

    >>> hint_text("fn a() {\\n    1\\n}\\n", 0.7)
    'fn a() {\\n    1\\n'
    >>> hint_text("fn a() {}\\n", 0.5)
    ''
    """
    lines = reference.strip("\n").splitlines(keepends=True)
    return "".join(lines[: int(len(lines) * fraction + 1e-9)])


def parse_levels(text: str) -> tuple[float, ...]:
    """``--hint-levels``: comma-separated fractions of the reference, from the most hint to none (the last one 0).

    >>> parse_levels("0.9, 0.75,0.5,0")
    (0.9, 0.75, 0.5, 0.0)
    """
    try:
        levels = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--hint-levels {text!r}: not a comma-separated list of fractions") from None
    if not levels or levels[-1] != 0.0 or any(not 0.0 <= x < 1.0 for x in levels) or list(levels) != sorted(
            levels, reverse=True):
        raise ValueError(f"--hint-levels {text!r}: fractions in [0, 1), decreasing, ending with 0 (no hint)")
    return levels


@dataclass
class HintCurriculum:
    """Each task's hint level: an index into ``levels`` (fractions of the reference, from the most hint to none).

    ``adaptive``: a task starts at ``start``; a step whose group for it passes (every hidden test) at least
    ``lower_at`` of the time moves it one level down (less hint), a group that passes never moves it one level up;
    ``anneal``: every task's level goes from ``start`` down to none in equal shares of ``max_steps`` (the last share
    trains without hints).

    >>> c = HintCurriculum((0.75, 0.5, 0.0), mode="adaptive")
    >>> c.fraction("t", 1), c.observe(1, [("t", True), ("t", False)]), c.fraction("t", 2)
    (0.75, {'t': 0.75}, 0.5)
    >>> [HintCurriculum((0.75, 0.5, 0.0), mode="anneal", max_steps=10).fraction("t", s) for s in (1, 5, 10)]
    [0.75, 0.5, 0.0]
    """

    levels: tuple[float, ...]
    mode: str = "adaptive"
    start: int = 0
    lower_at: float = 0.5
    max_steps: int = 0
    index: dict[str, int] = field(default_factory=dict)

    def level(self, task_id: str, step: int) -> int:
        if self.mode == "anneal":
            last = len(self.levels) - 1
            span = max(1, self.max_steps - 1)  # equal shares of the run per level, the last share without hints
            return min(last, self.start + (last - self.start + 1) * max(0, step - 1) // span)
        return self.index.get(task_id, self.start)

    def fraction(self, task_id: str, step: int) -> float:
        """The hint fraction of ``task_id``'s prompt at ``step`` (1-based, the step being generated)."""
        return self.levels[self.level(task_id, step)]

    def observe(self, step: int, results: Iterable[tuple[str, bool]]) -> dict[str, float]:
        """Move each task by its group's pass share at ``step`` (``adaptive``); the fractions its groups had."""
        outcomes: dict[str, list[bool]] = {}
        for task_id, passed in results:
            outcomes.setdefault(task_id, []).append(passed)
        seen = {task: self.fraction(task, step) for task in outcomes}
        if self.mode == "adaptive":
            for task, passes in outcomes.items():
                share = sum(passes) / len(passes)
                here = self.index.get(task, self.start)
                if share >= self.lower_at:
                    self.index[task] = min(len(self.levels) - 1, here + 1)
                elif share == 0.0:
                    self.index[task] = max(0, here - 1)
        return seen

    def save(self, path: Path) -> None:
        write_json_atomic({"levels": list(self.levels), "mode": self.mode, "index": self.index}, path)

    def load(self, path: Path) -> None:
        """Per-task levels saved by a run this one resumes (levels and mode must be the same)."""
        if path.exists():
            saved = json.loads(path.read_text())
            if tuple(saved.get("levels", ())) == self.levels and saved.get("mode") == self.mode:
                self.index = {str(k): int(v) for k, v in saved.get("index", {}).items()}


def hinted_rows(curriculum: HintCurriculum, render: Callable[[list[dict[str, str]]], str],
                step: Callable[[], int]) -> Callable[[dict[str, list[Any]]], dict[str, list[Any]]]:
    """A ``datasets`` transform: each row's chat ``prompt`` rendered as text (``render``: the chat template with its
    generation prompt), with the answer's opening and the task's hint at the current ``step()`` when it has one,
    and the ``hint`` column the rewards prepend to the completion."""

    def transform(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        now = step()
        prompts, hints = [], []
        for messages, task_id, reference in zip(batch["prompt"], batch["task_id"], batch["reference_code"],
                                                strict=True):
            text = hint_text(reference, curriculum.fraction(task_id, now))
            hint = OPENING + text if text else ""
            prompts.append(render(messages) + hint)
            hints.append(hint)
        return {**batch, "prompt": prompts, "hint": hints}

    return transform


def hinted_sft_rows(rows: Sequence[dict[str, Any]], references: Mapping[str, str], levels: Sequence[float],
                    render: Callable[[list[dict[str, str]]], str]) -> list[dict[str, str]]:
    """Supervised rows as text: each verified row (chat ``prompt``, assistant ``completion``) as hinted GRPO would
    prompt it at no hint, then once per nonzero level of ``levels``: the prompt with the answer's opening and the
    hint, the completion the rest of the answer. A warm start that teaches finishing a cut reference (a model that
    only saw whole answers closes the block right after a hint).

    >>> rows = [{"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant",
    ...          "content": "```rust\\nfn a() {\\n    1\\n}\\n```"}], "task_id": "t"}]
    >>> for r in hinted_sft_rows(rows, {"t": "fn a() {\\n    1\\n}\\n"}, (0.7, 0.0), lambda m: "Q:"):
    ...     print(repr(r["prompt"]), repr(r["completion"]))
    'Q:' '```rust\\nfn a() {\\n    1\\n}\\n```'
    'Q:```rust\\nfn a() {\\n    1\\n' '}\\n```'
    """
    out = []
    for row in rows:
        prompt, answer = render(row["prompt"]), row["completion"][-1]["content"]
        out.append({"prompt": prompt, "completion": answer})
        seen = {""}
        for fraction in levels:
            hint = hint_text(references[row["task_id"]], fraction)
            if hint in seen or not answer.startswith(OPENING + hint):
                continue  # the same cut twice, or an answer that does not open with its reference
            seen.add(hint)
            out.append({"prompt": prompt + OPENING + hint, "completion": answer[len(OPENING + hint):]})
    return out


@dataclass
class HintSteps:
    """The curriculum as training sees it: the step whose prompts are being fetched (``step``), and what each step
    did, appended to the run folder's ``hints.jsonl`` (``layout.HINTS_FILE``) by ``observe``."""

    curriculum: HintCurriculum
    folder: Path
    step: int = 1

    def observe(self, step: int, results: Sequence[tuple[str, bool, float]], write: bool = True) -> dict[str, float]:
        """Move the curriculum by one step's completions (every process's): (task, passed every hidden test,
        weighted reward). Returns the step's metrics: the mean hint fraction of its groups and the share of groups
        whose rewards differ (the groups GRPO learns from)."""
        rewards: dict[str, list[float]] = {}
        passes: dict[str, list[bool]] = {}
        for task, passed, reward in results:
            rewards.setdefault(task, []).append(reward)
            passes.setdefault(task, []).append(passed)
        spread = {task: max(r) - min(r) > 1e-9 for task, r in rewards.items()}
        seen = self.curriculum.observe(step, [(task, passed) for task, passed, _ in results])
        self.step = step + 1
        if write and rewards:
            run = RunFolder(self.folder)
            line = {"step": step, "hints": seen, "groups": len(rewards), "groups_with_spread": sum(spread.values()),
                    "passed": {task: sum(p) / len(p) for task, p in passes.items()}, "spread": spread,
                    "next": {task: self.curriculum.fraction(task, step + 1) for task in seen}}
            with run.hints.open("a") as handle:
                handle.write(json.dumps(line) + "\n")
            self.curriculum.save(run.hint_levels)
        if not rewards:
            return {}
        return {"hint_fraction": sum(seen.values()) / len(seen),
                "groups_with_spread": sum(spread.values()) / len(rewards)}


def hint_summary(lines: Sequence[dict[str, Any]]) -> list[str]:
    """What a run's ``hints.jsonl`` says: per hint fraction, the groups and how many had reward spread (the signal
    hints were to create) and passed; and the tasks that reached no hint and passed there.

    >>> print("\\n".join(hint_summary([{"hints": {"a": 0.5}, "spread": {"a": True}, "passed": {"a": 0.25}},
    ...                                  {"hints": {"a": 0.0}, "spread": {"a": False}, "passed": {"a": 1.0}}])))
    hints: 2 steps, 1 tasks
      hint 0.5: 1 groups, 1 with reward spread (100%), 1 with a pass
      hint 0.0: 1 groups, 0 with reward spread (0%), 1 with a pass
      tasks that trained without a hint and passed there: 1 of 1 (a)
    """
    by_level: dict[float, list[tuple[bool, bool]]] = {}
    tasks, free = set(), set()
    for line in lines:
        for task, fraction in line.get("hints", {}).items():
            passed = line.get("passed", {}).get(task, 0.0) > 0
            by_level.setdefault(fraction, []).append((bool(line.get("spread", {}).get(task)), passed))
            tasks.add(task)
            if fraction == 0.0 and passed:
                free.add(task)
    out = [f"hints: {len(lines)} steps, {len(tasks)} tasks"]
    for fraction in sorted(by_level, reverse=True):
        groups = by_level[fraction]
        spread = sum(s for s, _ in groups)
        out.append(f"  hint {fraction}: {len(groups)} groups, {spread} with reward spread "
                   f"({spread / len(groups):.0%}), {sum(p for _, p in groups)} with a pass")
    out.append(f"  tasks that trained without a hint and passed there: {len(free)} of {len(tasks)}"
               + (f" ({', '.join(sorted(free))})" if free else ""))
    return out
