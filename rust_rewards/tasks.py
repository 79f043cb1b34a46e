"""The canonical task row every notebook reads, and the hidden-test spec the verifier takes."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from rust_rewards.rust.lexer import tokenize

TEST_SHAPES = ("unit", "integration", "main", "none")
"""How a task's reference tests are shaped.

- ``unit``: items for a ``#[cfg(test)]``-style module body or a whole ``mod tests { ... }``; they see the
  solution through ``use super::*``.
- ``integration``: a file under ``tests/`` that uses the crate by name (``use <crate_name>::*;``); only
  ``pub`` items are reachable.
- ``main``: a ``fn main()`` full of ``assert!``s (MultiPL-E style); passing means it returns normally.
- ``none``: the task has no reference tests.
"""

TASK_COLUMNS = (
    "task_id", "prompt", "reference_code", "reference_tests", "test_shape",
    "crate_name", "edition", "extra_files", "test_release", "source", "difficulty",
)

REWARD_COLUMNS = ("task_id", "reference_tests", "test_shape", "crate_name", "edition", "extra_files", "test_release",
                  "reference_code", "task_prompt")
"""The task columns a training row carries beside its chat prompt: TRL passes them to the reward functions as
keyword arguments (``task_prompt`` is the task's own prompt; TRL's ``prompt`` column is the chat)."""


@dataclass(frozen=True)
class HiddenTests:
    """Reference tests to compile next to a completion (hashable: it is part of the cache key).

    ``reference``: the task's reference solution, if any (its public items are the ones a completion must define,
    with the same signatures; the model's own tests also run against it); ``prompt``: the task prompt, where the
    required signatures are read when there is no reference.
    """

    text: str
    shape: str = "unit"
    crate_name: str = "solution"
    edition: str = "2021"
    extra_files: tuple[tuple[str, str], ...] = ()
    release: bool = False
    reference: str = ""
    prompt: str = ""

    def __post_init__(self) -> None:
        if self.shape not in TEST_SHAPES or self.shape == "none":
            raise ValueError(f"hidden test shape must be one of unit/integration/main, got {self.shape!r}")

    @property
    def allows_unsafe(self) -> bool:
        """The reference solution uses ``unsafe`` itself: completions of this task may too (else they may not)."""
        return _uses_unsafe(self.reference)


@dataclass(frozen=True)
class Task:
    """One Rust programming task in the project's canonical schema (one row of a task file).

    ``extra_files`` maps crate-relative paths (``src/helper.rs``, ``tests/more.rs``) to file text;
    in parquet and jsonl it is stored as a JSON object string.
    """

    task_id: str
    prompt: str
    reference_code: str = ""
    reference_tests: str = ""
    test_shape: str = "none"
    crate_name: str = "solution"
    edition: str = "2021"
    extra_files: dict[str, str] = field(default_factory=dict)
    test_release: bool = False
    source: str = ""
    difficulty: str = ""

    def hidden_tests(self) -> HiddenTests | None:
        """The verifier's view of this task's reference tests, or None when it has none."""
        return hidden_tests_from_row(self.to_row())

    def to_row(self) -> dict[str, Any]:
        """A flat row for parquet/jsonl (``extra_files`` as a JSON string)."""
        row = asdict(self)
        row["extra_files"] = json.dumps(self.extra_files, sort_keys=True)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Task:
        extra = row.get("extra_files") or {}
        if isinstance(extra, str):
            extra = json.loads(extra) if extra.strip() else {}
        return cls(
            task_id=str(row["task_id"]),
            prompt=str(row["prompt"]),
            reference_code=str(row.get("reference_code") or ""),
            reference_tests=str(row.get("reference_tests") or ""),
            test_shape=str(row.get("test_shape") or "none"),
            crate_name=str(row.get("crate_name") or "solution"),
            edition=str(row.get("edition") or "2021"),
            extra_files=dict(extra),
            test_release=bool(row.get("test_release") or False),
            source=str(row.get("source") or ""),
            difficulty=str(row.get("difficulty") or ""),
        )


def hidden_tests_from_row(row: dict[str, Any]) -> HiddenTests | None:
    """Build the hidden-test spec from a task row (a dict of the canonical columns).

    Reward functions call this with the dataset columns TRL passes as keyword arguments (where the task's own
    prompt is ``task_prompt``: TRL's ``prompt`` column is the chat).
    """
    text = row.get("reference_tests") or ""
    shape = row.get("test_shape") or ("unit" if text else "none")
    if not str(text).strip() or shape == "none":
        return None
    extra = row.get("extra_files") or {}
    if isinstance(extra, str):
        extra = json.loads(extra) if extra.strip() else {}
    return HiddenTests(
        text=str(text),
        shape=str(shape),
        crate_name=str(row.get("crate_name") or "solution"),
        edition=str(row.get("edition") or "2021"),
        extra_files=tuple(sorted(dict(extra).items())),
        release=bool(row.get("test_release") or False),
        reference=str(row.get("reference_code") or ""),
        prompt=str(row.get("task_prompt") or (row["prompt"] if isinstance(row.get("prompt"), str) else "")),
    )


@functools.lru_cache(maxsize=4096)
def _uses_unsafe(code: str) -> bool:
    return any(t.kind == "ident" and t.text == "unsafe" for t in tokenize(code))
