"""The system prompts, answer formats and chat layout used by training, inference and eval."""

from __future__ import annotations

from collections.abc import Sequence

ANSWER_FORMATS = ("solution", "solution+tests")
"""What an answer holds: ``solution``, the requested items alone (fits a small completion budget: the easy tier's
reference answers are 27-97 SmolLM2 tokens); ``solution+tests``, the items and a test module of the model's own
(147-331 tokens; the own-test rewards need it)."""

_RULES = """You are an expert Rust programmer. Solve the task with safe, idiomatic Rust 2021 that uses \
only the standard library (no external crates).

"""

_TESTED = """Answer with exactly one ```rust code block that contains:
1. the solution: the requested items, declared `pub`, with the exact names and signatures the task gives;
2. a `#[cfg(test)] mod tests` module with `use super::*;` and several `#[test]` functions whose \
assertions call your solution and check its results, including edge cases.

Do not write a `fn main`. The code is compiled with `cargo build`, checked with `cargo clippy` and run \
with `cargo test`; it must build without warnings."""

_SOLUTION = """Answer with exactly one short ```rust code block that contains only the solution: the requested \
items, declared `pub`, with the exact names and signatures the task gives. Do not write tests, a `fn main` or \
explanations. The code is compiled with `cargo build`, checked with `cargo clippy` and run against hidden \
tests; it must build without warnings."""

SYSTEM_PROMPTS = {"solution+tests": _RULES + _TESTED, "solution": _RULES + _SOLUTION}
"""The system prompt of each answer format."""

SYSTEM_PROMPT = SYSTEM_PROMPTS["solution+tests"]
"""The seed's system prompt (a solution and its own test module)."""

FEEDBACK_INSTRUCTIONS = """

Before answering you may call the `cargo_check` tool with your complete code: it compiles the code, runs clippy \
and your own tests, and tells you what failed. Then answer with the final code in one ```rust block."""
"""Appended to the system prompt of rollouts with feedback turns (``train.py --feedback-turns K``)."""


def asks_for_tests(answer_format: str) -> bool:
    """Whether ``answer_format`` asks for a test module of the model's own (what own-test checks, rewards and
    metrics apply to).

    >>> asks_for_tests("solution"), asks_for_tests("solution+tests")
    (False, True)
    """
    return answer_format == "solution+tests"


def system_prompt(answer_format: str = "solution+tests", feedback: bool = False) -> str:
    """The system prompt asking for ``answer_format`` (one of ``ANSWER_FORMATS``); with ``feedback`` it also offers
    the ``cargo_check`` tool.

    >>> "mod tests" in system_prompt("solution"), "mod tests" in system_prompt("solution+tests")
    (False, True)
    """
    if answer_format not in SYSTEM_PROMPTS:
        raise ValueError(f"--answer-format: expected one of {', '.join(ANSWER_FORMATS)}; got {answer_format!r}")
    return SYSTEM_PROMPTS[answer_format] + (FEEDBACK_INSTRUCTIONS if feedback else "")


def chat_messages(
    task_prompt: str, system_prompt: str = SYSTEM_PROMPT, repairs: Sequence[tuple[str, str]] = ()
) -> list[dict[str, str]]:
    """The conversational prompt for one task, as TRL and chat templates expect it.

    ``repairs``: (previous answer, feedback) pairs of repair rounds, appended as assistant and user turns.

    >>> chat_messages("Write `pub fn add(a: i32, b: i32) -> i32`.")[1]["role"]
    'user'
    >>> [m["role"] for m in chat_messages("Write add.", repairs=[("fn add() {}", "It does not compile.")])]
    ['system', 'user', 'assistant', 'user']
    """
    messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": task_prompt},
    ]
    for answer, feedback in repairs:
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": feedback}]
    return messages
