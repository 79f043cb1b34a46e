"""Where verification runs: an executor takes distinct completions and returns one future ``Report`` each.

The ``Verifier`` (cache, deduplication, async) hands its fresh work to one executor: ``LocalExecutor`` runs it on
this machine's cores, in sandboxed worker slots; ``rust_rewards.verify.ray.RayExecutor`` on Ray actors. An
executor's futures always resolve to a report: a failure becomes ``Report.internal_error`` (reward None), never an
exception and never a 0.
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from rust_rewards.cpus import usable_cpus
from rust_rewards.report import Report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.batch import PendingRun, blocker, verify_batch
from rust_rewards.verify.config import VerifierConfig, check_workdir
from rust_rewards.verify.sandbox import RunResult
from rust_rewards.verify.single import verify_code
from rust_rewards.verify.toolchain import find_toolchain

Item = tuple[str, HiddenTests | None]
"""One piece of Rust source and the hidden tests it is judged by."""

_UNBUILT = ("syntax error", "compile error", "most of its share failed to compile")
OWN_FIRST_ABOVE = 0.3
"""Batch mode: at or above this recent share of completions that do not build, each completion gets its own first
pass and only the ones that build share a crate (``verify_batch(own_first=True)``); the policy moves only speed."""


class Executor(Protocol):
    """What a ``Verifier`` needs from the place its work runs."""

    backend: str
    config: VerifierConfig
    workers: int
    stats: dict[str, int]
    fallback_reasons: Counter[str]

    def preflight(self) -> None:
        """Raise at once when nothing could be verified (no toolchain, bad workdir)."""

    def run(self, items: Sequence[Item], together: bool = True) -> list[Future[Report]]:
        """Start verifying distinct items; one future per item, in order (``together``: batch mode may combine
        them; a single ``Verifier.submit`` takes the direct path)."""

    def close(self) -> None:
        """Finish running work and release workers."""


def failed_report(code: str, message: str, mode: str) -> Report:
    """The report of a completion the infrastructure could not verify (every reward scores it None)."""
    return Report(has_code=bool(code.strip()), internal_error=message, mode=mode)


class LocalExecutor:
    """Sandboxed verification on this machine: ``workers`` slots (each its own uid block and scratch space).

    In batch mode the items that may share a crate are split round-robin into one share per worker, each compiled
    together (``verify_batch``); the others run one by one (``stats["fallback"]``, ``fallback_reasons``). A share's
    test runs, one sandbox call per completion, and its completions left to the direct path go back to the pool as
    tasks of their own, so that a worker whose share is done takes them (one honest slow test no longer holds a
    share's other runs behind it while the other worker idles).
    """

    backend = "local"

    def __init__(self, config: VerifierConfig | None = None, workers: int | None = None, adaptive: bool = True):
        self.config = config or VerifierConfig()
        self.workers = workers or usable_cpus()
        self.adaptive = adaptive
        """Batch mode: give each completion its own first pass while recent batches mostly did not build
        (``OWN_FIRST_ABOVE``); otherwise one shared clippy pass per share."""
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rust-verify")
        self._slots: list[int] = list(range(self.workers))
        self._slot_free = threading.Condition(threading.Lock())
        self._lock = threading.Lock()
        self.stats = {"combined": 0, "fallback": 0, "settled": 0, "own_first_shares": 0}
        self.fallback_reasons: Counter[str] = Counter()
        """Batch mode: why completions were verified one by one instead of in a shared crate."""
        self._unbuilt_rate = 0.0  # batch mode: moving average of the share of a batch's code that did not build

    def preflight(self) -> None:
        find_toolchain()
        check_workdir(self.config.workdir or tempfile.gettempdir())

    def run(self, items: Sequence[Item], together: bool = True) -> list[Future[Report]]:
        if self.config.mode != "batch" or not together:
            return [self._pool.submit(self._with_slot, code, hidden) for code, hidden in items]
        futures: list[Future[Report]] = []
        share: list[tuple[str, HiddenTests | None, Future[Report]]] = []
        for code, hidden in items:
            reason = blocker(code, hidden)
            if reason is None:
                future: Future[Report] = Future()
                share.append((code, hidden, future))
            else:
                if reason != "no code":
                    with self._lock:
                        self.stats["fallback"] += 1
                        self.fallback_reasons[reason] += 1
                future = self._pool.submit(self._with_slot, code, hidden)
            futures.append(future)
        for i in range(min(self.workers, len(share))):
            self._pool.submit(self._share_with_slot, share[i :: self.workers])
        return futures

    def _take_slot(self) -> int:
        with self._slot_free:
            while not self._slots:
                self._slot_free.wait()
            return self._slots.pop()

    def _give_slot(self, slot: int) -> None:
        with self._slot_free:
            self._slots.append(slot)
            self._slot_free.notify()

    def _with_slot(self, code: str, hidden: HiddenTests | None, first: RunResult | None = None) -> Report:
        return self._in_slot(code, lambda slot: verify_code(code, hidden, self.config, slot=slot, first=first))

    def _in_slot(self, code: str, work: Callable[[int], Report]) -> Report:
        """``work`` in a free worker slot: its report, or ``code``'s failed report when it raises."""
        slot = self._take_slot()
        try:
            return work(slot)
        except Exception as exc:  # noqa: BLE001 - a crash must become a failed report, never reach the trainer
            return failed_report(code, f"{type(exc).__name__}: {exc}", self.config.mode)
        finally:
            self._give_slot(slot)

    def _share_with_slot(self, share: list[tuple[str, HiddenTests | None, Future[Report]]]) -> None:
        """Verify one worker's share of a batch together and resolve its futures."""
        slot = self._take_slot()
        try:
            with self._lock:
                own_first = self.adaptive and self._unbuilt_rate >= OWN_FIRST_ABOVE
                self.stats["own_first_shares"] += own_first
            result = verify_batch([(code, hidden) for code, hidden, _ in share], self.config, slot=slot,
                                  own_first=own_first, defer=True)
            unbuilt = (result.settled + sum(result.fallbacks[r] for r in _UNBUILT)) / len(share)
            with self._lock:
                self._unbuilt_rate = (self._unbuilt_rate + unbuilt) / 2
                self.stats["combined"] += result.combined
                self.stats["settled"] += result.settled
                self.stats["fallback"] += sum(result.fallbacks.values())
                self.fallback_reasons.update(result.fallbacks)
            for (_, _, future), report in zip(share, result.reports, strict=True):
                if report is not None:
                    future.set_result(report)
        except Exception as exc:  # noqa: BLE001 - a crash must become failed reports, never reach the trainer
            for code, _, future in share:
                if not future.done():
                    future.set_result(failed_report(code, f"{type(exc).__name__}: {exc}", self.config.mode))
            return
        finally:
            self._give_slot(slot)
        # The test runs and the rest (the direct path) as tasks of the pool, so that idle workers share them out.
        for index, run in result.runs.items():
            self._submit(self._run_pending, share[index], run)
        for index, first in result.deferred.items():
            self._submit(self._resolve, share[index], first)

    def _submit(self, task: Callable[..., None], member: tuple[str, HiddenTests | None, Future[Report]],
                arg: object) -> None:
        try:
            self._pool.submit(task, member, arg)
        except RuntimeError:  # the pool is shutting down: finish here
            task(member, arg)

    def _resolve(self, member: tuple[str, HiddenTests | None, Future[Report]], first: RunResult | None) -> None:
        code, hidden, future = member
        future.set_result(self._with_slot(code, hidden, first))

    def _run_pending(self, member: tuple[str, HiddenTests | None, Future[Report]], run: PendingRun) -> None:
        code, _, future = member
        future.set_result(self._in_slot(code, run))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
