"""Score many completions at once: a worker pool, deduplication, a content-hash cache and async access.

Every reward function of a GRPO step asks for the same completions; the first call verifies them and the
others read the cache, so six reward functions cost one verification per distinct piece of code. With
``VerifierConfig(mode="batch")`` a batch's distinct completions are split into one share per worker and each
share is verified together (``rust_rewards.verify.batch``); completions that cannot share a crate run one by one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from rust_rewards.cpus import usable_cpus
from rust_rewards.report import Report
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.batch import blocker, verify_batch
from rust_rewards.verify.sandbox import RunResult
from rust_rewards.verify.single import VerifierConfig, check_workdir, code_hash, verify_code
from rust_rewards.verify.toolchain import find_toolchain

Progress = Callable[[int, int], None] | bool | None
_UNBUILT = ("syntax error", "compile error", "most of its share failed to compile")
OWN_FIRST_ABOVE = 0.3
"""Batch mode: at or above this recent share of completions that do not build, each completion gets its own first
pass and only the ones that build share a crate (``verify_batch(own_first=True)``); the policy moves only speed."""


class Verifier:
    """A pool of sandboxed verification workers with a shared cache of ``Report``s."""

    backend = "local"

    def __init__(self, config: VerifierConfig | None = None, workers: int | None = None, cache_size: int = 65536,
                 adaptive: bool = True):
        self.config = config or VerifierConfig()
        self.adaptive = adaptive
        """Batch mode: give each completion its own first pass while recent batches mostly did not build
        (``OWN_FIRST_ABOVE``); otherwise one shared clippy pass per share."""
        self.workers = workers or usable_cpus()
        self.cache_size = cache_size
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rust-verify")
        self._slots: list[int] = list(range(self.workers))
        self._slot_lock = threading.Lock()
        self._slot_free = threading.Condition(self._slot_lock)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Report] = OrderedDict()
        self._inflight: dict[str, Future[Report]] = {}
        self.stats = {"requested": 0, "verified": 0, "cache_hits": 0, "combined": 0, "fallback": 0, "settled": 0,
                      "own_first_shares": 0}
        self.fallback_reasons: Counter[str] = Counter()
        """Batch mode: why completions were verified one by one instead of in a shared crate."""
        self._unbuilt_rate = 0.0  # batch mode: moving average of the share of a batch's code that did not build

    def _take_slot(self) -> int:
        with self._slot_free:
            while not self._slots:
                self._slot_free.wait()
            return self._slots.pop()

    def _give_slot(self, slot: int) -> None:
        with self._slot_free:
            self._slots.append(slot)
            self._slot_free.notify()

    def _failed(self, code: str, exc: Exception) -> Report:
        return Report(has_code=bool(code.strip()), internal_error=f"{type(exc).__name__}: {exc}",
                      mode=self.config.mode)

    def _with_slot(self, code: str, hidden: HiddenTests | None, first: RunResult | None = None) -> Report:
        slot = self._take_slot()
        try:
            return verify_code(code, hidden, self.config, slot=slot, first=first)
        except Exception as exc:  # noqa: BLE001 - a crash must become a failed report, never reach the trainer
            return self._failed(code, exc)
        finally:
            self._give_slot(slot)

    def _batch_with_slot(self, share: list[tuple[str, HiddenTests | None, Future[Report]]]) -> None:
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
                    future.set_result(self._failed(code, exc))
            return
        finally:
            self._give_slot(slot)
        # The rest take the direct path as tasks of the pool, so that idle workers share them out.
        for index, first in result.deferred.items():
            code, hidden, future = share[index]
            try:
                self._pool.submit(self._resolve, future, code, hidden, first)
            except RuntimeError:  # the pool is shutting down: finish here
                self._resolve(future, code, hidden, first)

    def _resolve(self, future: Future[Report], code: str, hidden: HiddenTests | None, first: RunResult | None) -> None:
        future.set_result(self._with_slot(code, hidden, first))

    def submit(self, completion: Any, hidden: HiddenTests | None = None, raw_code: bool = False) -> Future[Report]:
        """Start (or join) the verification of one completion and return its future."""
        code = completion if raw_code else extract_rust(completion)
        key = code_hash(code, hidden, self.config)
        with self._lock:
            self.stats["requested"] += 1
            if key in self._cache:
                self.stats["cache_hits"] += 1
                self._cache.move_to_end(key)
                done: Future[Report] = Future()
                done.set_result(self._cache[key])
                return done
            if key in self._inflight:
                self.stats["cache_hits"] += 1
                return self._inflight[key]
            if code.strip():
                self._preflight()
            future = self._pool.submit(self._with_slot, code, hidden)
            self._inflight[key] = future
            self.stats["verified"] += 1
        future.add_done_callback(lambda f, k=key: self._store(k, f))
        return future

    def _preflight(self) -> None:
        """Fail fast, before anything is queued, when this machine cannot verify (no toolchain, bad workdir)."""
        find_toolchain()
        check_workdir(self.config.workdir or tempfile.gettempdir())

    def _store(self, key: str, future: Future[Report]) -> None:
        """Cache every finished report, internal errors included: all consumers of one training step
        (seven rewards, the step's logging) must see the same verdict. ``forget_failures`` drops the
        internal errors so that a later request verifies again."""
        with self._lock:
            self._inflight.pop(key, None)
            self._cache[key] = future.result()
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def forget_failures(self) -> int:
        """Drop the cached reports that failed for infrastructure reasons (``internal_error``); returns
        how many. Training calls it after each step's logging, so the next step retries them."""
        with self._lock:
            failed = [key for key, report in self._cache.items() if report.internal_error]
            for key in failed:
                del self._cache[key]
        return len(failed)

    def verify(self, completion: Any, hidden: HiddenTests | None = None, raw_code: bool = False) -> Report:
        """Verify one completion (model output text or TRL message list; Rust source if ``raw_code``)."""
        return self.submit(completion, hidden, raw_code).result()

    def verify_many(
        self,
        completions: Sequence[Any],
        hidden: Sequence[HiddenTests | None] | None = None,
        raw_code: bool = False,
        progress: Progress = None,
    ) -> list[Report]:
        """Verify a batch in parallel; identical code is verified once. Order is preserved."""
        hidden = list(hidden) if hidden is not None else [None] * len(completions)
        if len(hidden) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(hidden)} hidden-test entries")
        futures = self.submit_many(completions, hidden, raw_code)
        _follow(futures, progress)
        return [f.result() for f in futures]

    def submit_many(self, completions: Sequence[Any], hidden: Sequence[HiddenTests | None],
                    raw_code: bool = False) -> list[Future[Report]]:
        """Start (or join) the verification of a batch; one future per completion, in order.

        In batch mode the distinct, uncached completions that may share a crate are split round-robin into one
        share per worker, each verified together; the others are submitted one by one. Other backends pass
        their batches on whole (a Ray actor's local ``Verifier`` does the combining).
        """
        if self.config.mode != "batch" or self.backend != "local":
            return [self.submit(c, h, raw_code) for c, h in zip(completions, hidden, strict=True)]
        codes = [c if raw_code else extract_rust(c) for c in completions]
        if any(code.strip() for code in codes):
            self._preflight()
        futures: list[Future[Report] | None] = []
        share: list[tuple[str, HiddenTests | None, Future[Report]]] = []
        seen: set[str] = set()
        for code, h in zip(codes, hidden, strict=True):
            key = code_hash(code, h, self.config)
            reason = blocker(code, h)
            with self._lock:
                known = key in self._cache or key in self._inflight or key in seen
                seen.add(key)
                fresh = reason is None and not known
                if reason not in (None, "no code") and not known:
                    self.stats["fallback"] += 1
                    self.fallback_reasons[reason] += 1
                if fresh:
                    future: Future[Report] = Future()
                    self._inflight[key] = future
                    self.stats["requested"] += 1
                    self.stats["verified"] += 1
            if fresh:
                future.add_done_callback(lambda f, k=key: self._store(k, f))
                share.append((code, h, future))
            futures.append(future if fresh else None)
        for i in range(min(self.workers, len(share))):
            self._pool.submit(self._batch_with_slot, share[i :: self.workers])
        return [self.submit(code, h, raw_code=True) if f is None else f
                for f, code, h in zip(futures, codes, hidden, strict=True)]

    async def averify_many(
        self,
        completions: Sequence[Any],
        hidden: Sequence[HiddenTests | None] | None = None,
        raw_code: bool = False,
    ) -> list[Report]:
        """The async twin of ``verify_many`` (for TRL's concurrent ``async def`` reward functions)."""
        hidden = list(hidden) if hidden is not None else [None] * len(completions)
        futures = [asyncio.wrap_future(f) for f in self.submit_many(completions, hidden, raw_code)]
        return list(await asyncio.gather(*futures))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _follow(futures: list[Future[Report]], progress: Progress) -> None:
    """Report progress as futures finish (a repeated completion counts each time it appears)."""
    if not progress:
        return
    total = len(futures)
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="cargo verify", unit="completion")
    multiplicity: dict[Future[Report], int] = {}
    for future in futures:
        multiplicity[future] = multiplicity.get(future, 0) + 1
    done = 0
    for future in as_completed(multiplicity):
        done += multiplicity[future]
        if bar is not None:
            bar.update(multiplicity[future])
        else:
            progress(done, total)
    if bar is not None:
        bar.close()


_DEFAULT: Verifier | None = None
_DEFAULT_LOCK = threading.Lock()


def get_verifier() -> Verifier:
    """The process-wide verifier the reward functions share (configured by ``configure_verifier``)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Verifier()
        return _DEFAULT


BACKENDS = ("local", "ray")
"""Where verification runs: this machine's cores, or Ray actors on a cluster (``rust_rewards.verify.ray``)."""


def configure_verifier(config: VerifierConfig | None = None, workers: int | None = None, backend: str = "local",
                       ray_address: str = "auto") -> Verifier:
    """Replace the process-wide verifier (e.g. other limits, ``mode="cargo"``, or ``backend="ray"``: verification
    on the Ray cluster at ``ray_address``, ``workers`` actors, by default one per 2 of its CPUs)."""
    global _DEFAULT
    if backend not in BACKENDS:
        raise ValueError(f"--verifier: expected one of {BACKENDS}, got {backend!r}")
    with _DEFAULT_LOCK:
        if _DEFAULT is not None:
            _DEFAULT.close()
            _DEFAULT = None
        if backend == "ray":
            from rust_rewards.verify.ray import RayVerifier

            _DEFAULT = RayVerifier(config, ray_address, workers=workers)
        else:
            _DEFAULT = Verifier(config, workers)
        return _DEFAULT


def verifier_for(workers: int = 0, backend: str = "local", ray_address: str = "auto",
                 mode: str | None = None) -> Verifier:
    """The process-wide verifier a run's flags ask for: the current one when it matches (``workers`` 0 = any
    count, ``mode`` None = any), else a new one (``configure_verifier``) with the current one's config and
    ``mode``."""
    current = get_verifier() if backend == "local" else _DEFAULT
    if (current is not None and current.backend == backend and workers in (0, current.workers)
            and mode in (None, current.config.mode)):
        return current
    config = current.config if current else VerifierConfig()
    return configure_verifier(dataclasses.replace(config, mode=mode or config.mode), workers or None, backend,
                              ray_address)
