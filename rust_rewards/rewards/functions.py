"""TRL reward functions: small pure projections of the verifier's ``Report``.

Scales follow the published Rust-GRPO runs (build 1.0, clippy 1.0, test 2.0, non-empty 1.0, test block 0.5,
assertions up to 1.0; the scale lives in the returned values, weights default to 1.0), with their holes fixed:
every ``#[test]`` counts and is judged by its seal (not by what the code prints), clippy means no clippy lint at
all, a crate with zero tests earns no test reward, and the model's own tests pay only when they also pass on the
task's reference and fail on a wrong variant of it. ``hidden_test_reward`` adds the fraction of the task's
reference tests passed (scaled to 2.0), or ``None`` (ignored by TRL) for rows without reference tests.

Every reward pays only for an answer to the task asked: code that does not define the task's required public
items (``Report.off_task``) earns 0 everywhere, and code whose required items have other signatures than the
task's (``Report.mismatched``, a hack reason) earns no test, assertion or hidden-test reward. In training, an
answer cut at the length limit earns 0 from every reward (``VerifiedReward.end_ids``). ``format_reward`` is the
correctness recipe's format term; which rewards a run uses, and their weights, is a recipe
(``rust_rewards.rewards.recipes``).

Each reward function takes TRL's ``(completions, **kwargs)``; dataset columns such as ``reference_tests``
and ``test_shape`` arrive in ``kwargs``. All of them read one cached verification per completion. The functions
below use the process-wide verifier; ``reward_functions(verifier)`` binds the same rewards to a given one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rust_rewards.report import Report
from rust_rewards.rust.extract import completion_text
from rust_rewards.tasks import REWARD_COLUMNS, HiddenTests, hidden_tests_from_row
from rust_rewards.verify.verifier import Verifier, get_verifier


def _hidden(kwargs: dict[str, Any], n: int) -> list[HiddenTests | None]:
    if not kwargs.get("reference_tests"):
        return [None] * n
    columns = {c: kwargs[c] for c in REWARD_COLUMNS if isinstance(kwargs.get(c), (list, tuple))}
    return [hidden_tests_from_row({c: v[i] for c, v in columns.items()}) for i in range(n)]


def with_hints(completions: Sequence[Any], hints: Sequence[Any] | None) -> list[Any]:
    """Each completion with its row's ``hint`` in front (``train.hints``: the start of the reference the prompt
    already held), as one answer; unchanged without hints.

    >>> with_hints(["x\\n```"], ["```rust\\nfn f() {\\n"])
    ['```rust\\nfn f() {\\nx\\n```']
    """
    if not hints:
        return list(completions)
    return [f"{hint}{completion_text(c)}" if hint else c for c, hint in zip(completions, hints, strict=True)]


def reports_for(completions: list[Any], verifier: Verifier | None = None, **kwargs: Any) -> list[Report]:
    """The (cached) reports of a batch, with hidden tests taken from the dataset columns in ``kwargs`` (and each
    completion judged with its ``hint`` column in front, when the prompt held one)."""
    return (verifier or get_verifier()).verify_many(with_hints(completions, kwargs.get("hint")),
                                                    _hidden(kwargs, len(completions)))


def build_score(r: Report) -> float:
    return float(r.build_ok)


def clippy_score(r: Report) -> float:
    return float(r.clippy_ok)


def test_score(r: Report) -> float:
    return float(r.tests_checked)


def non_empty_score(r: Report) -> float:
    return float(r.has_code and r.source.code_lines >= 3 and r.source.has_test_block)


def test_block_score(r: Report) -> float:
    return float(r.source.has_test_block)


def format_score(r: Report) -> float:
    return float(r.has_code and r.source.code_lines >= 1)


def assertion_score(r: Report) -> float:
    if not r.build_ok or r.hack_reasons or r.source.test_doubts or not r.solution_not_wrong:
        return 0.0
    return min(1.0, r.own_checks.discriminating / 4)


def hidden_test_score(r: Report) -> float | None:
    return None if r.hidden_tests is None else r.hidden_fraction


@dataclass(frozen=True)
class Reward:
    """One reward, once: its ``name`` (what TRL logs and ``--rewards`` takes), its ``score`` (a pure projection of a
    report onto [0, 1], ``None`` where it does not apply), the most it pays (``top``: the score's scale, unweighted),
    whether it pays for the model's own test module (``own_tests``), whether the published recipe weighs it
    (``published``), and ``doc``, the reward function's docstring with an example."""

    name: str
    score: Callable[[Report], float | None]
    top: float
    doc: str
    own_tests: bool = False
    published: bool = True

    def value(self, report: Report) -> float | None:
        """What this reward pays for ``report``, unweighted: ``None`` after an infrastructure failure (ignored by
        TRL, never 0) or where it does not apply; 0 for an answer to another task; else ``top`` x the score."""
        if report.internal_error:
            return None
        score = self.score(report)
        if score is None:
            return None
        return self.top * score if report.on_task else 0.0


REWARDS: tuple[Reward, ...] = (
    Reward("build_reward", build_score, 1.0, """1.0 when the extracted code compiles as a library crate, else 0.0.

    Example:
    >>> build_reward(["```rust\\npub fn one() -> i32 { 1 }\\n```", "```rust\\npub fn one() -> i32 { \\"1\\" }\\n```"])
    [1.0, 0.0]
    """),
    Reward("clippy_reward", clippy_score, 1.0, """1.0 when the code compiles and clippy reports no lint at all (warnings
    included), else 0.0.

    Example:
    >>> clippy_reward(["```rust\\npub fn n(v: &[i32]) -> usize { v.len() }\\n```",
    ...                "```rust\\npub fn n(v: &Vec<i32>) -> usize { return v.len(); }\\n```"])
    [1.0, 0.0]
    """),
    Reward("test_reward", test_score, 2.0, """2.0 when the model's own tests all pass (at least one; each judged by its
    seal), all of them also pass on the task's reference, at least one fails on a wrong variant of the solution, and
    the solution passes the task's hidden tests (when it has some); else 0.0.

    Example:
    >>> code = "pub fn sq(x: i32) -> i32 { x * x }\\n#[cfg(test)]\\nmod tests {\\n    use super::*;\\n"
    >>> test_reward(["```rust\\n" + code + "    #[test]\\n    fn t() { assert_eq!(sq(3), 9); }\\n}\\n```",
    ...              "```rust\\n" + code + "    #[test]\\n    fn t() { assert!(true); }\\n}\\n```"])
    [2.0, 0.0]
    """, own_tests=True),
    Reward("non_empty_reward", non_empty_score, 1.0, """1.0 when there is a Rust block with at least 3 non-comment
    lines and a test function, else 0.0.

    Example:
    >>> non_empty_reward(["no code here", "```rust\\npub fn a() {}\\n#[test]\\nfn t() { a(); }\\n```"])
    [0.0, 1.0]
    """, own_tests=True),
    Reward("test_block_reward", test_block_score, 0.5, """0.5 when the code has at least one ``#[test]`` function,
    else 0.0.

    Example:
    >>> test_block_reward(["```rust\\npub fn a() {}\\n```", "```rust\\n#[test]\\nfn t() {}\\n```"])
    [0.0, 0.5]
    """, own_tests=True),
    Reward("format_reward", format_score, 1.0, """1.0 when the answer holds a ```rust block of code that defines the
    task's required items, else 0.0 (the correctness recipe's format term: no test module asked).

    Example:
    >>> format_reward(["no code here", "```rust\\npub fn a() {}\\n```"])
    [0.0, 1.0]
    """, published=False),
    Reward("assertion_reward", assertion_score, 1.0, """0.25 per own test that passes, passes on the reference too,
    and fails on a wrong variant of the solution (a mutant: an assertion a wrong solution could not pass), capped at
    1.0; 0.0 when a hidden test fails.

    Tests that hold for any implementation (``assert!(true)``, the solution compared with itself, a bound of
    its type) pass on the mutant too and earn nothing.

    Example:
    >>> code = "pub fn sq(x: i32) -> i32 { x * x }\\n#[test]\\nfn t() { assert_eq!(sq(3), 9); }\\n"
    >>> code += "#[test]\\nfn u() { assert_eq!(sq(2), sq(2)); }"
    >>> assertion_reward(["```rust\\n" + code + "\\n```"])
    [0.25]
    """, own_tests=True),
    Reward("hidden_test_reward", hidden_test_score, 2.0, """2.0 x the fraction of the task's reference tests that
    pass; ``None`` for rows without reference tests.

    Example:
    >>> hidden_test_reward(["```rust\\npub fn sq(x: i32) -> i32 { x * x }\\n```"],
    ...                    reference_tests=["#[test]\\nfn h() { assert_eq!(sq(4), 16); }"], test_shape=["unit"])
    [2.0]
    """),
)
"""Every reward, one row each; every table below is derived from these rows. Adding a reward is a row here and its
score function above."""

BY_NAME: dict[str, Reward] = {row.name: row for row in REWARDS}
"""Reward name -> its row."""

SCORES: dict[str, Callable[[Report], float | None]] = {row.name: row.value for row in REWARDS}
"""Reward name -> pure projection of a report (unweighted)."""

MAX_VALUES: dict[str, float] = {row.name: row.top for row in REWARDS}
"""The most each reward pays, unweighted."""

DEFAULT_WEIGHTS: dict[str, float] = {row.name: 1.0 for row in REWARDS if row.published}
"""The published recipe's weights per reward name (the scale lives in the values, as in the published runs);
``format_reward`` belongs to the correctness recipe (``rust_rewards.rewards.recipes``)."""

OWN_TEST_REWARDS: tuple[str, ...] = tuple(row.name for row in REWARDS if row.own_tests)
"""Rewards that pay for the model's own test module: only the ``solution+tests`` answer format asks for one."""

MAX_TOTAL = sum(MAX_VALUES[name] * weight for name, weight in DEFAULT_WEIGHTS.items())
"""The highest weighted total of the published recipe: 8.5 (6.5 without hidden tests)."""

__test__ = {row.name: row.doc for row in REWARDS}
"""Every row's docstring example runs under doctest."""


def truncated(completion_ids: Sequence[Sequence[int]] | None, end_ids: Sequence[int], n: int) -> list[bool]:
    """Which of ``n`` completions were cut at the length limit: their last token is not an end (``end_ids``: the
    trainer's end-of-sequence and padding ids, TRL's own test). Unknown (no ids, or no end ids) means not cut.

    >>> truncated([[5, 2], [5, 6]], end_ids=[2], n=2)
    [False, True]
    """
    if not completion_ids or not end_ids:
        return [False] * n
    ends = set(end_ids)
    return [bool(ids) and int(ids[-1]) not in ends for ids in completion_ids]


def _unless_cut(values: list[float | None], cut: list[bool]) -> list[float | None]:
    """No reward for a cut-off answer: 0.0 for truncated completions (``None``, a row without hidden tests,
    stays ``None``)."""
    return [None if v is None else 0.0 if c else v for v, c in zip(values, cut, strict=True)]


@dataclass
class VerifiedReward:
    """One reward (``name`` in ``SCORES``) in TRL's shape, computed from ``verifier``'s reports (``None``: the
    process-wide one). It pickles without its verifier: a copy in another process uses that process's verifier.

    ``end_ids`` (the trainer's end-of-sequence and padding token ids, set by ``build_grpo_trainer``): a completion whose
    ``completion_ids`` (passed by TRL) do not end with one was cut at the length limit and earns 0.0.

    Example:
    >>> reward = VerifiedReward("build_reward")
    >>> reward.__name__, reward(["```rust\\npub fn one() -> i32 { 1 }\\n```"])
    ('build_reward', [1.0])
    """

    name: str
    verifier: Verifier | None = None
    end_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.name not in BY_NAME:
            raise ValueError(f"unknown reward {self.name!r}; choose from {', '.join(BY_NAME)}")
        self.__name__ = self.name  # TRL logs rewards under their callable's name
        self.__doc__ = BY_NAME[self.name].doc

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        values = [SCORES[self.name](r) for r in reports_for(completions, self.verifier, **kwargs)]
        return _unless_cut(values, truncated(kwargs.get("completion_ids"), self.end_ids, len(completions)))

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "verifier": None, "end_ids": self.end_ids, "__name__": self.name,
                "__doc__": self.__doc__}


class AsyncVerifiedReward(VerifiedReward):
    """The same reward as an ``async`` callable: TRL 1.x awaits async rewards concurrently."""

    async def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:  # type: ignore[override]
        verifier = self.verifier or get_verifier()
        reports = await verifier.averify_many(with_hints(completions, kwargs.get("hint")),
                                              _hidden(kwargs, len(completions)))
        values = [SCORES[self.name](r) for r in reports]
        return _unless_cut(values, truncated(kwargs.get("completion_ids"), self.end_ids, len(completions)))


def reward_functions(verifier: Verifier | None = None, names: Sequence[str] = tuple(SCORES), *,
                     asynchronous: bool = False) -> list[VerifiedReward]:
    """The rewards ``names`` bound to ``verifier``, for ``GRPOTrainer(reward_funcs=...)``."""
    kind = AsyncVerifiedReward if asynchronous else VerifiedReward
    return [kind(name, verifier) for name in names]


REWARD_FUNCS: list[VerifiedReward] = reward_functions()
"""Every reward in TRL's shape (``build_reward``...), in ``REWARDS``' order, on the process-wide verifier."""

(build_reward, clippy_reward, test_reward, non_empty_reward, test_block_reward, format_reward, assertion_reward,
 hidden_test_reward) = REWARD_FUNCS[:8]
"""The seed's rewards by their public names (each one's docstring is its row's ``doc``)."""

ASYNC_REWARD_FUNCS = reward_functions(asynchronous=True)
"""The rewards as ``async`` callables on the process-wide verifier: TRL 1.x runs them concurrently."""


def rewards_from_report(report: Report) -> dict[str, float | None]:
    """Every reward for one report, unweighted (what the CLI prints and training logs)."""
    return {name: score(report) for name, score in SCORES.items()}


def weighted_total(rewards: dict[str, float | None], weights: dict[str, float] | None = None) -> float:
    """Weighted sum of the rewards that apply (``None`` ones skipped, as TRL does)."""
    weights = weights or DEFAULT_WEIGHTS
    return sum(weights.get(k, 0.0) * v for k, v in rewards.items() if v is not None)
