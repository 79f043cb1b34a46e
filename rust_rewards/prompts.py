"""The system prompts, answer formats and prompt layouts used by training, inference and eval: the chat layout
(``chat_messages``) and, for a model without a chat template (a base checkpoint), the same conversation as one
plain completion prompt (``plain_prompt``). ``render_prompt`` is the one place a conversation becomes the text a
model sees; ``trl_example`` is what a TRL dataset row holds for that model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


PLAIN_ANSWER = "### Answer\n"
"""Where a plain completion prompt ends: the model writes its answer from here."""
_PLAIN_HEADINGS = {"user": "### Task\n", "assistant": PLAIN_ANSWER}
_noted: set[str] = set()


def plain_prompt(messages: Sequence[Mapping[str, str]]) -> str:
    """A conversation as one plain completion prompt, for a model without a chat template: the system prompt, the
    task under ``### Task``, each earlier answer under ``### Answer`` and each later user turn under ``### Feedback``,
    ending in an open ``### Answer``.

    >>> print(plain_prompt(chat_messages("Write add.", "Be brief.", repairs=[("fn add() {}", "It fails.")])), end="")
    Be brief.
    <BLANKLINE>
    ### Task
    Write add.
    <BLANKLINE>
    ### Answer
    fn add() {}
    <BLANKLINE>
    ### Feedback
    It fails.
    <BLANKLINE>
    ### Answer
    """
    parts, users = [], 0
    for message in messages:
        role, content = message["role"], str(message["content"]).strip()
        if role == "system":
            parts.append(content)
            continue
        heading = "### Feedback\n" if role == "user" and users else _PLAIN_HEADINGS.get(role, f"### {role.title()}\n")
        users += role == "user"
        parts.append(heading + content)
    return "\n\n".join(parts) + "\n\n" + PLAIN_ANSWER


def has_chat_template(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` has a chat template; a model without one (a base checkpoint) is prompted with
    ``plain_prompt``, which is said once per model on the console."""
    if getattr(tokenizer, "chat_template", None):
        return True
    name = str(getattr(tokenizer, "name_or_path", "") or "the model")
    if name not in _noted:
        _noted.add(name)
        print(f"{name}: no chat template; prompting it with a plain completion prompt (system prompt, "
              f"### Task, {PLAIN_ANSWER.strip()})", flush=True)
    return False


def render_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]], *, bos: bool = True) -> str:
    """The text the model sees for ``messages``: its chat template with the generation prompt, or ``plain_prompt``
    for a model without one (after the BOS token its tokenizer adds, as a chat template writes it). ``bos=False``
    leaves a leading BOS to the tokenizer (TRL tokenizes text prompts with their special tokens)."""
    first = tokenizer("", add_special_tokens=True).input_ids[:1]
    lead = tokenizer.bos_token if tokenizer.bos_token and first == [tokenizer.bos_token_id] else ""
    if has_chat_template(tokenizer):
        text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    else:
        text = lead + plain_prompt(messages)
    return text[len(lead):] if not bos and lead and text.startswith(lead) else text


def trl_example(example: Mapping[str, Any], tokenizer: Any) -> dict[str, Any]:
    """A TRL dataset row for ``tokenizer``'s model: unchanged for a model with a chat template (TRL applies it to
    the conversation); else the conversational ``prompt`` as ``render_prompt`` text (no BOS) and each answer
    (``completion``, ``chosen``, ``rejected``) as the text of its last turn, which TRL ends with the EOS token."""
    out = dict(example)
    if isinstance(out.get("prompt"), str) or has_chat_template(tokenizer):
        return out
    out["prompt"] = render_prompt(tokenizer, out["prompt"], bos=False)
    for key in ("completion", "chosen", "rejected"):
        if isinstance(out.get(key), list):
            out[key] = str(out[key][-1]["content"])
    return out
