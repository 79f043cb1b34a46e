"""Cargo-judged rewards for Rust code: extract, build a crate, run the toolchain in a sandbox, report.

The stable public API; everything else lives in the rooms (``rust/``, ``verify/``, ``rewards/``, ``data/``,
``eval/``, ``runs/``, ``train/``, ``ui/``: see docs/architecture.md).
"""

from rust_rewards.report import Report, SourceFacts, TestCounts
from rust_rewards.rewards import (
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
    reward_functions,
    rewards_from_report,
    test_block_reward,
    test_reward,
    weighted_total,
)
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import HiddenTests, Task
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.single import verify_code
from rust_rewards.verify.toolchain import ToolchainError
from rust_rewards.verify.verifier import Verifier, configure_verifier, get_verifier, make_executor

__all__ = [
    "ASYNC_REWARD_FUNCS", "DEFAULT_WEIGHTS", "MAX_TOTAL", "REWARD_FUNCS", "SCORES", "AsyncVerifiedReward",
    "HiddenTests", "Report", "SourceFacts", "Task", "TestCounts", "ToolchainError", "VerifiedReward", "Verifier",
    "VerifierConfig", "assertion_reward", "build_reward", "clippy_reward", "configure_verifier", "extract_rust",
    "get_verifier", "hidden_test_reward", "make_executor", "non_empty_reward", "reward_functions",
    "rewards_from_report", "test_block_reward", "test_reward", "verify_code", "weighted_total",
]
