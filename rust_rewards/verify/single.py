"""Verify one piece of code: the task's side (``reference``), then its crate through the sandboxed toolchain
(``passes``), then the task's checks -> one ``Report``. The modes (``cargo``, ``direct``) and how test verdicts
are sealed are in ``passes``; batch mode (``batch``) falls back to ``verify_code`` for what it cannot combine."""

from __future__ import annotations

from dataclasses import replace

from rust_rewards.report import Report, TestCounts
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.config import VerifierConfig, code_hash
from rust_rewards.verify.crate import hidden_expected
from rust_rewards.verify.passes import in_crate
from rust_rewards.verify.reference import notes_to_match, task_checked, task_facts, task_variants


def verify_code(
    code: str, hidden: HiddenTests | None = None, config: VerifierConfig | None = None, slot: int = 0,
    first: sandbox.RunResult | None = None,
) -> Report:
    """Verify Rust source ``code`` (already extracted) against optional hidden tests.

    ``first``: the direct path's first pass (clippy), already run on exactly this code as ``src/lib.rs`` (batch
    mode runs it for many completions in one sandbox call): it is not run again."""
    config = config or VerifierConfig()
    facts = task_facts(code, hidden)
    key = code_hash(code, hidden, config)
    if not code.strip():
        hidden_counts = None if hidden is None else TestCounts(expected=hidden_expected(hidden))
        return task_checked(Report(has_code=False, code_hash=key, source=facts, hidden_tests=hidden_counts,
                                   mode=config.mode), code, hidden)
    variants = task_variants(code, hidden, facts, config, slot, verify_code)
    verdict, _ = in_crate(code, hidden, config, slot, facts, variants, first,
                          expected_notes=notes_to_match(code, hidden, config, slot))
    return task_checked(replace(verdict, code_hash=key), code, hidden)
