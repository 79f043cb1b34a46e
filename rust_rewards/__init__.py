"""Cargo-judged rewards for Rust code: extract, build a crate, run the toolchain in a sandbox, report."""

from rust_rewards.report import Report, SourceFacts, TestCounts
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import HiddenTests, Task
from rust_rewards.verify.single import VerifierConfig, verify_code
from rust_rewards.verify.toolchain import ToolchainError
from rust_rewards.verify.verifier import Verifier, configure_verifier, get_verifier

__all__ = [
    "HiddenTests", "Report", "SourceFacts", "Task", "TestCounts", "ToolchainError", "Verifier",
    "VerifierConfig", "configure_verifier", "extract_rust", "get_verifier", "verify_code",
]
