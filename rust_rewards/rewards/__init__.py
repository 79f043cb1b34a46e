"""Rewards from one verifier report: TRL reward functions, feedback text, the cargo tool."""

from rust_rewards.rewards.functions import (
    ASYNC_REWARD_FUNCS,
    DEFAULT_WEIGHTS,
    MAX_TOTAL,
    REWARD_FUNCS,
    SCORES,
    AsyncVerifiedReward,
    VerifiedReward,
    assertion_reward,
    build_reward,
    clippy_reward,
    hidden_test_reward,
    non_empty_reward,
    reports_for,
    reward_functions,
    rewards_from_report,
    test_block_reward,
    test_reward,
    weighted_total,
)

__all__ = [
    "ASYNC_REWARD_FUNCS", "DEFAULT_WEIGHTS", "MAX_TOTAL", "REWARD_FUNCS", "SCORES", "AsyncVerifiedReward",
    "VerifiedReward", "assertion_reward", "build_reward", "clippy_reward", "hidden_test_reward", "non_empty_reward",
    "reports_for", "reward_functions", "rewards_from_report", "test_block_reward", "test_reward", "weighted_total",
]
