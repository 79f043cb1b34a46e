"""The one system prompt and chat layout used by training, inference and eval."""

from __future__ import annotations

from collections.abc import Sequence

SYSTEM_PROMPT = """You are an expert Rust programmer. Solve the task with safe, idiomatic Rust 2021 that uses \
only the standard library (no external crates).

Answer with exactly one ```rust code block that contains:
1. the solution: the requested items, declared `pub`, with the exact names and signatures the task gives;
2. a `#[cfg(test)] mod tests` module with `use super::*;` and several `#[test]` functions whose \
assertions call your solution and check its results, including edge cases.

Do not write a `fn main`. The code is compiled with `cargo build`, checked with `cargo clippy` and run \
with `cargo test`; it must build without warnings."""


FEEDBACK_INSTRUCTIONS = """

Before answering you may call the `cargo_check` tool with your complete code: it compiles the code, runs clippy \
and your own tests, and tells you what failed. Then answer with the final code in one ```rust block."""
"""Appended to the system prompt of rollouts with feedback turns (``train.py --feedback-turns K``)."""


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
