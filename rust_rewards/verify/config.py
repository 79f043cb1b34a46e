"""How code is verified (mode, limits, workdir), and the cache key of one verification."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from rust_rewards.tasks import HiddenTests
from rust_rewards.verify import sandbox
from rust_rewards.verify.sandbox import COMPILE_LIMITS, RUN_LIMITS, Limits

MODES = ("direct", "cargo", "batch")
"""``batch`` verifies ``Verifier.verify_many`` batches together (``rust_rewards.verify.batch``); a single completion,
and every completion that cannot share a crate, takes the ``direct`` path."""


@dataclass(frozen=True)
class VerifierConfig:
    """How code is verified. Part of the cache key: change it and results are recomputed."""

    mode: str = "direct"
    compile_limits: Limits = COMPILE_LIMITS
    run_limits: Limits = RUN_LIMITS
    workdir: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")

    def fingerprint(self) -> str:
        return f"{self.mode}|{self.compile_limits}|{self.run_limits}"


def code_hash(code: str, hidden: HiddenTests | None, config: VerifierConfig) -> str:
    """The cache key of one verification."""
    h = hashlib.sha256()
    for part in (code, repr(hidden), config.fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@functools.cache
def check_workdir(path: str) -> None:
    """The sandbox user must be able to reach the job folders; fail loudly instead of failing every build."""
    if not sandbox.detect_isolation().drop_uid:
        return
    for part in [Path(path), *Path(path).parents]:
        if not part.stat().st_mode & 0o001:
            raise PermissionError(
                f"verifier workdir {path}: {part} is not searchable by other users, so the sandbox user cannot "
                "reach the crates; choose a workdir under a world-searchable folder (e.g. /var/tmp)"
            )
