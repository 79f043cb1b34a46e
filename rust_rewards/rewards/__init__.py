"""Rewards from one verifier report: TRL reward functions, feedback text, the cargo tool."""

from rust_rewards.rewards.functions import (
    ASYNC_REWARD_FUNCS,
    DEFAULT_WEIGHTS,
    MAX_TOTAL,
    MAX_VALUES,
    OWN_TEST_REWARDS,
    REWARD_FUNCS,
    SCORES,
    AsyncVerifiedReward,
    VerifiedReward,
    assertion_reward,
    build_reward,
    clippy_reward,
    format_reward,
    hidden_test_reward,
    non_empty_reward,
    reports_for,
    reward_functions,
    rewards_from_report,
    test_block_reward,
    test_reward,
    truncated,
    weighted_total,
)
from rust_rewards.rewards.recipes import RECIPES, Recipe, parse_weights, resolve_weights

__all__ = [
    "ASYNC_REWARD_FUNCS", "DEFAULT_WEIGHTS", "MAX_TOTAL", "MAX_VALUES", "OWN_TEST_REWARDS", "RECIPES",
    "REWARD_FUNCS", "SCORES", "AsyncVerifiedReward", "Recipe", "VerifiedReward", "assertion_reward", "build_reward",
    "clippy_reward", "format_reward", "hidden_test_reward", "non_empty_reward", "parse_weights", "reports_for",
    "resolve_weights", "reward_functions", "rewards_from_report", "test_block_reward", "test_reward", "truncated",
    "weighted_total",
]
