"""Feedback turns in GRPO rollouts: the ``cargo_check`` tool and what a step's tool use achieved.

With ``train.py --feedback-turns K`` TRL's ``GRPOTrainer`` gets ``tools=[cargo_check]`` and
``max_tool_calling_iterations=K``: a rollout may call the tool up to K times before its final answer, and the
rewards score that final answer only (``extract.completion_text`` reads the last assistant turn). The tool verifies
the code with the shared ``Verifier`` (pool, cache, sandbox; no hidden tests) and answers with
``feedback.feedback_message``: the model sees what a repair round shows, never the hidden tests.

``tool_use(completions, reports)`` counts, for one step, the tool calls and whether each final answer improved on
its first draft (``visible_level``: no code < code < builds < clippy clean < own tests pass).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rust_rewards.report import Report
from rust_rewards.rewards.feedback import approx_tokens, feedback_message
from rust_rewards.rust.extract import extract_rust
from rust_rewards.verify.verifier import Verifier, get_verifier

TOOL_NAME = "cargo_check"
TOOL_FEEDBACK_TOKENS = 256
"""Cap of one tool answer (it counts against the rollout's ``max_completion_length``)."""
NO_CODE = (f"{TOOL_NAME} needs your complete Rust code (solution and tests) in its `code` argument, e.g. "
           f'{{"name": "{TOOL_NAME}", "arguments": {{"code": "pub fn add(a: i32, b: i32) -> i32 {{ a + b }}"}}}}.')
PASSED = ("All checks passed: the code builds, clippy is clean and your {tests} pass. Answer now with the final "
          "code in one ```rust block.")
INTERNAL = "The checker failed for a reason unrelated to your code. Answer with your best solution."


def cargo_check(code: str = "") -> str:
    """Compile your Rust code, run clippy and your own tests, and report what failed.

    Args:
        code: The complete Rust solution with its #[cfg(test)] tests, as plain Rust source.

    Returns:
        The compiler errors, clippy lints and failing tests of the code, or a line saying every check passed.
    """
    return check_with(get_verifier(), code)


def check_with(verifier: Verifier, code: str) -> str:
    """``cargo_check``'s answer for ``code``, verified by ``verifier``."""
    source = draft_source(code)
    if not source:
        return NO_CODE
    return tool_answer(verifier.verify(source, raw_code=True))


def cargo_check_tool(verifier: Verifier) -> Callable[[str], str]:
    """``cargo_check`` (same name, docstring and signature, which TRL turns into the tool's schema) verifying with a
    run's own ``verifier``."""

    def tool(code: str = "") -> str:
        return check_with(verifier, code)

    return functools.update_wrapper(tool, cargo_check)


def draft_source(code: Any) -> str:
    """The Rust source of a ``code`` argument (a ```rust block or plain source; anything else as JSON): what the
    tool verifies, and so the cache key ``tool_use`` finds the draft's report under."""
    text = code if isinstance(code, str) else json.dumps(code)
    return extract_rust(text) or text.strip()


def tool_answer(report: Report) -> str:
    """What ``cargo_check`` answers for a report."""
    if report.internal_error:
        return INTERNAL
    message = feedback_message(report, TOOL_FEEDBACK_TOKENS, approx_tokens)
    if message is None:
        n = report.own_tests.passed
        return PASSED.format(tests=f"{n} test{'s' if n != 1 else ''}")
    return message


def visible_level(report: Report) -> int:
    """How far a report gets on what the model may see: 0 no code, 1 code, 2 builds, 3 clippy clean, 4 own tests
    pass (never the hidden tests)."""
    if not report.has_code:
        return 0
    if not report.build_ok:
        return 1
    if not report.clippy_ok:
        return 2
    return 4 if report.own_tests.ok else 3


def tool_calls(completion: Any) -> list[dict[str, Any]]:
    """The ``cargo_check`` calls of one TRL completion (a message list), in order."""
    if not isinstance(completion, (list, tuple)):
        return []
    calls = [call.get("function", {}) for m in completion if isinstance(m, dict) and m.get("role") == "assistant"
             for call in (m.get("tool_calls") or []) if isinstance(call, dict)]
    return [c for c in calls if c.get("name") == TOOL_NAME]


def first_draft(completion: Any) -> str | None:
    """The code of the first ``cargo_check`` call (None without one)."""
    calls = tool_calls(completion)
    if not calls:
        return None
    arguments = calls[0].get("arguments")
    return draft_source(arguments.get("code", "") if isinstance(arguments, dict) else "")


@dataclass(frozen=True)
class ToolUse:
    """One step's tool use: calls, rollouts that called, and final answers better / not better than the draft."""

    completions: int = 0
    calls: int = 0
    rollouts_with_calls: int = 0
    improved: int = 0

    def __add__(self, other: ToolUse) -> ToolUse:
        return ToolUse(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, int, int, int]:
        return self.completions, self.calls, self.rollouts_with_calls, self.improved

    def metrics(self) -> dict[str, float]:
        """``feedback/*`` keys of ``metrics.jsonl``."""
        return {"feedback/tool_calls": self.calls, "feedback/rollouts_with_calls": self.rollouts_with_calls,
                "feedback/improved_share": self.improved / self.rollouts_with_calls
                if self.rollouts_with_calls else 0.0}


def tool_use(completions: Sequence[Any], reports: Sequence[Report], verifier: Verifier) -> ToolUse:
    """Count one batch's tool use; ``reports`` are the final answers' (as the rewards saw them). A draft's report
    comes from ``verifier``'s cache (the tool verified exactly that code with it)."""
    calls = rollouts = improved = 0
    for completion, report in zip(completions, reports, strict=True):
        draft = first_draft(completion)
        n = len(tool_calls(completion))
        calls += n
        if n:
            rollouts += 1
            before = verifier.verify(draft, raw_code=True) if draft else Report(has_code=False)
            improved += visible_level(report) > visible_level(before)
    return ToolUse(len(completions), calls, rollouts, improved)
