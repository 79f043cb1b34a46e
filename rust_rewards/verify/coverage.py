"""How many of a task set's hidden tests are judged by std values (``observe``): each task's reference run through
its hidden tests (``reference.reference_observations``, the runs every verification of the task uses), counted."""

from __future__ import annotations

import queue
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.observe import ReferenceNotes
from rust_rewards.verify.reference import reference_observations
from rust_rewards.verify.sandbox import SandboxError


@dataclass(frozen=True)
class NoteCoverage:
    """One task's hidden tests by how they are judged; ``error``: why its reference could not be run through them."""

    tests: int = 0
    judged: int = 0
    opaque: int = 0
    silent: int = 0
    unstable: int = 0
    error: str = ""
    lints: tuple[str, ...] = ()
    """Clippy's findings on the reference in its own run."""

    @classmethod
    def of(cls, notes: ReferenceNotes) -> NoteCoverage:
        return cls(notes.tests, notes.judged, notes.opaque, notes.silent, notes.unstable,
                   f"the task's reference fails its own run: {notes.broken}" if notes.broken else "", notes.lints)


def note_coverage(hidden: Sequence[HiddenTests | None], config: VerifierConfig | None = None,
                  workers: int = 2) -> list[NoteCoverage]:
    """Per task (in order): its hidden tests judged by std notes, by a note that is no std value (``opaque``), by no
    note at all (``silent``), and left to their seal because the reference's own runs noted them differently
    (``unstable``). A task without hidden
    tests or reference counts nothing."""
    config = config or VerifierConfig()
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(workers):
        slots.put(slot)

    def one(tests: HiddenTests | None) -> NoteCoverage:
        if tests is None:
            return NoteCoverage()
        slot = slots.get()
        try:
            notes = reference_observations(tests, config, slot)
        except SandboxError as exc:
            return NoteCoverage(error=str(exc))
        finally:
            slots.put(slot)
        return NoteCoverage() if notes is None else NoteCoverage.of(notes)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, hidden))
