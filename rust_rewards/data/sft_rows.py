"""The supervised warm start's data: verified reference answers in exactly the format GRPO rewards and eval reads.

Each training task with a reference solution becomes one prompt-completion row in TRL's conversational format:
the prompt is ``chat_messages(task.prompt, system_prompt(answer_format))`` (the system prompt GRPO, inference and
eval use for that answer format) and the completion is the answer it asks for: one ```rust block with the reference
solution (``solution``), plus a ``#[cfg(test)] mod tests`` holding the task's unit tests (``solution+tests``). Every
answer is verified again with the shared verifier, as a completion, against the task's hidden tests: only answers
that build, pass clippy, pass their own tests (when they have them) and the hidden tests are kept. Skipped rows are
counted by reason (``SKIP_REASONS``); an empty set is a ``ValueError``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rust_rewards.prompts import asks_for_tests, chat_messages, system_prompt
from rust_rewards.report import Report
from rust_rewards.tasks import Task
from rust_rewards.verify.verifier import Verifier, get_verifier


class NoSFTRowsError(ValueError):
    """No task of a source has a verified reference answer: nothing to train the supervised stage on."""

SKIP_REASONS = ("no_reference", "tests_not_unit", "answer_too_long", "failed_verification", "verifier_error")


def sft_answer(task: Task, answer_format: str = "solution+tests") -> str | None:
    """The answer for ``task`` in ``answer_format``: its reference solution (and, for ``solution+tests``, its unit
    tests as the model's own test module) in one ```rust block (None without a reference solution or, with tests,
    unit-shaped tests)."""
    if not task.reference_code.strip():
        return None
    if not asks_for_tests(answer_format):
        return f"```rust\n{task.reference_code.strip()}\n```"
    if task.test_shape != "unit" or not task.reference_tests.strip():
        return None
    lines = [line for line in task.reference_tests.strip("\n").splitlines() if line.strip() != "use super::*;"]
    tests = "\n".join(f"    {line}" if line.strip() else "" for line in "\n".join(lines).strip("\n").splitlines())
    return (f"```rust\n{task.reference_code.strip()}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{tests}\n}}\n"
            "```")


def accepted(report: Report, answer_format: str = "solution+tests") -> bool:
    """An answer worth imitating: builds, clippy-clean, its own tests (when the format has them) and the task's
    hidden tests pass."""
    tests = report.tests_ok or not asks_for_tests(answer_format)
    return report.build_ok and report.clippy_ok and tests and bool(report.hidden_ok)


@dataclass
class SFTSet:
    """The rows to train on and how many tasks were skipped, by reason."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        return {"rows": len(self.rows), **{reason: self.skipped[reason] for reason in SKIP_REASONS}}


def sft_rows(tasks: Sequence[Task], source: str, count_tokens: Callable[[str], int] | None = None,
             max_answer_tokens: int = 0, answer_format: str = "solution+tests",
             verifier: Verifier | None = None) -> SFTSet:
    """Verified prompt-completion rows for ``tasks`` (read from ``source``, named in errors), answers in
    ``answer_format`` under its system prompt.

    Answers longer than ``max_answer_tokens`` (as ``count_tokens`` counts; 0: no limit) are skipped: GRPO could
    never generate them within its completion budget.
    """
    out = SFTSet()
    candidates: list[tuple[Task, str]] = []
    for task in tasks:
        answer = sft_answer(task, answer_format)
        if answer is None:
            out.skipped["no_reference" if not task.reference_code.strip() else "tests_not_unit"] += 1
        elif max_answer_tokens and count_tokens is not None and count_tokens(answer) > max_answer_tokens:
            out.skipped["answer_too_long"] += 1
        else:
            candidates.append((task, answer))
    reports = (verifier or get_verifier()).verify_many([answer for _, answer in candidates],
                                         hidden=[task.hidden_tests() for task, _ in candidates])
    for (task, answer), report in zip(candidates, reports, strict=True):
        if report.internal_error:
            out.skipped["verifier_error"] += 1
            continue
        if not accepted(report, answer_format):
            out.skipped["failed_verification"] += 1
            continue
        out.rows.append({"prompt": chat_messages(task.prompt, system_prompt(answer_format)),
                         "completion": [{"role": "assistant", "content": answer}], "task_id": task.task_id})
    if not out.rows:
        raise NoSFTRowsError(f"{source}: no task has a verified reference answer to train on "
                         f"({len(tasks)} tasks; skipped: {dict(out.skipped)})")
    return out
