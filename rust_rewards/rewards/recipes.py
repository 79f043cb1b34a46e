"""Reward recipes: named sets of rewards and weights, and the one parser of ``--rewards`` / ``--reward-weights``.

``published`` is the seed's recipe: every reward at weight 1.0 on the published Rust-GRPO scales (build 1, clippy 1,
own tests 2, non-empty 1, test block 0.5, assertions up to 1, hidden tests 2), for answers with a test module.
``correctness`` pays for what the task asks: the hidden tests dominate (2.0), building is a small shaping term
(0.25) and the format 0.1 (open-r1's code recipes weight format 0.1 against 1.0 for passing tests), for answers
that hold the solution alone. A wrong answer that builds earns 0.35 of 2.35; a correct one 2.35.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rust_rewards.prompts import asks_for_tests
from rust_rewards.rewards.functions import DEFAULT_WEIGHTS, MAX_VALUES, OWN_TEST_REWARDS, SCORES


@dataclass(frozen=True)
class Recipe:
    """A named reward set: each reward's weight, the answer format it is meant for, and why."""

    name: str
    weights: dict[str, float] = field(default_factory=dict)
    answer_format: str = "solution+tests"
    about: str = ""

    def max_total(self, hidden_tests: bool = True) -> float:
        """The highest weighted total an answer can earn (``hidden_tests``: the task has reference tests)."""
        return max_total(self.weights, hidden_tests)


def max_total(weights: dict[str, float], hidden_tests: bool = True) -> float:
    """The highest weighted total of ``weights`` (``hidden_tests``: the task has reference tests)."""
    return sum(w * MAX_VALUES[n] for n, w in weights.items() if hidden_tests or n != "hidden_test_reward")


RECIPES: dict[str, Recipe] = {
    "correctness": Recipe(
        "correctness", {"hidden_test_reward": 1.0, "build_reward": 0.25, "format_reward": 0.1}, "solution",
        "hidden tests dominant (up to 2 x1), build as shaping (up to 1 x0.25), format (up to 1 x0.1); the solution "
        "alone"),
    "published": Recipe(
        "published", dict(DEFAULT_WEIGHTS), "solution+tests",
        "the seed's: build, clippy, own tests, non-empty, test block, assertions, hidden tests, all 1.0 on the "
        "published scales (max 8.5); a solution and its own tests"),
}
"""The recipes by name; ``--rewards NAME`` or ``--reward-weights NAME`` picks one."""


def parse_weights(text: str, names: Sequence[str], flag: str = "--reward-weights") -> dict[str, float]:
    """``name=weight,...`` as a mapping, each name one of ``names`` and each weight a finite number >= 0
    (``ValueError`` naming ``flag`` otherwise).

    >>> parse_weights("build_reward=0.5, hidden_test_reward=2", ["build_reward", "hidden_test_reward"])
    {'build_reward': 0.5, 'hidden_test_reward': 2.0}
    """
    weights: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in str(text).split(","))):
        name, sep, value = (part.strip() for part in item.partition("="))
        if not sep or name not in names:
            raise ValueError(f"{flag}: expected name=weight with name in {', '.join(names)}, got {item!r}")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"{flag}: {item!r} has a weight that is not a number") from None
        if not 0.0 <= weight < float("inf"):
            raise ValueError(f"{flag}: {item!r} needs a weight >= 0")
        weights[name] = weight
    return weights


def resolve_weights(rewards: Sequence[str], reward_weights: str = "") -> dict[str, float]:
    """The rewards to train with and their weights, in order, from ``--rewards`` (reward names, or one recipe
    name) and ``--reward-weights`` (a recipe name, or ``name=weight,...`` over the defaults: the recipe's weights,
    else 1.0). ``ValueError`` naming the flag for anything else.

    >>> resolve_weights(["correctness"])
    {'hidden_test_reward': 1.0, 'build_reward': 0.25, 'format_reward': 0.1}
    >>> resolve_weights(["build_reward", "hidden_test_reward"], "build_reward=0.5")
    {'build_reward': 0.5, 'hidden_test_reward': 1.0}
    """
    rewards = [str(r).strip() for r in rewards if str(r).strip()]
    if len(rewards) == 1 and rewards[0] in RECIPES:
        weights = dict(RECIPES[rewards[0]].weights)
    else:
        unknown = [r for r in rewards if r not in SCORES]
        if unknown or not rewards:
            raise ValueError(f"--rewards: expected one recipe ({', '.join(RECIPES)}) or reward names "
                             f"({', '.join(SCORES)}); got {', '.join(rewards) or 'nothing'}")
        weights = {name: 1.0 for name in dict.fromkeys(rewards)}
    text = str(reward_weights).strip()
    if text in RECIPES:
        recipe = RECIPES[text].weights
        if extra := [n for n in weights if n not in recipe]:
            raise ValueError(f"--reward-weights {text}: the recipe has no weight for {', '.join(extra)} "
                             f"(it weighs {', '.join(recipe)})")
        return {name: recipe[name] for name in weights}
    weights.update(parse_weights(text, list(weights)))
    return weights


def check_answer_format(weights: dict[str, float], answer_format: str) -> None:
    """Refuse own-test rewards for answers that hold no test module (``ValueError`` naming the flags)."""
    own = [n for n in weights if n in OWN_TEST_REWARDS and weights[n]]
    if own and not asks_for_tests(answer_format):
        raise ValueError(f"--rewards {', '.join(own)}: pays for the model's own tests, which --answer-format "
                         "solution does not ask for (use --answer-format solution+tests, or --rewards correctness)")


def weights_table(weights: dict[str, float]) -> str:
    """A markdown table of rewards, weights and the most each can add to the total (the form shows it)."""
    rows = [f"| `{n}` | {w:g} | {w * MAX_VALUES[n]:g} |" for n, w in weights.items()]
    return "\n".join(["| reward | weight | at most |", "|---|---|---|", *rows, f"| total | | {max_total(weights):g} |"])
