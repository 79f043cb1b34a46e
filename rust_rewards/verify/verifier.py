"""Score many completions at once: deduplication, a content-hash cache and async access over one executor.

Every reward function of a GRPO step asks for the same completions; the first call verifies them and the
others read the cache, so six reward functions cost one verification per distinct piece of code. Where the work
runs is the executor's business (``rust_rewards.verify.executors``): this machine's cores, or Ray actors; chosen by
``make_executor``. With ``VerifierConfig(mode="batch")`` a batch's distinct completions are verified together in
shares (``rust_rewards.verify.batch``); completions that cannot share a crate run one by one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, as_completed
from typing import Any

from rust_rewards.report import Report
from rust_rewards.rust.extract import extract_rust
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig, code_hash
from rust_rewards.verify.executors import Executor, LocalExecutor, failed_report

Progress = Callable[[int, int], None] | bool | None


class Verifier:
    """A cache of ``Report``s over an executor; identical code (with the same hidden tests) is verified once.

    ``Verifier(config, workers)`` verifies on this machine (``LocalExecutor``); pass ``executor=`` for another
    place (``make_executor``, ``rust_rewards.verify.ray.RayExecutor``): its config is the verifier's.
    """

    def __init__(self, config: VerifierConfig | None = None, workers: int | None = None, cache_size: int = 65536,
                 adaptive: bool = True, executor: Executor | None = None):
        self.executor: Executor = executor or LocalExecutor(config, workers, adaptive)
        self.config = self.executor.config
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Report] = OrderedDict()
        self._inflight: dict[str, Future[Report]] = {}
        self._counts = {"requested": 0, "verified": 0, "cache_hits": 0}

    @property
    def backend(self) -> str:
        return self.executor.backend

    @property
    def workers(self) -> int:
        return self.executor.workers

    @property
    def stats(self) -> dict[str, int]:
        """Requests, verifications and cache hits, and the executor's own counts (batch shares, Ray batches)."""
        with self._lock:
            return {**self._counts, **self.executor.stats}

    @property
    def fallback_reasons(self) -> Counter[str]:
        """Batch mode: why completions were verified one by one instead of in a shared crate."""
        return self.executor.fallback_reasons

    def submit(self, completion: Any, hidden: HiddenTests | None = None, raw_code: bool = False) -> Future[Report]:
        """Start (or join) the verification of one completion and return its future."""
        return self._submit([completion], [hidden], raw_code, together=False)[0]

    def submit_many(self, completions: Sequence[Any], hidden: Sequence[HiddenTests | None],
                    raw_code: bool = False) -> list[Future[Report]]:
        """Start (or join) the verification of a batch; one future per completion, in order.

        Cached and in-flight code is joined; the distinct rest goes to the executor in one call (in batch mode
        it verifies them together in shares).
        """
        return self._submit(completions, hidden, raw_code, together=True)

    def _submit(self, completions: Sequence[Any], hidden: Sequence[HiddenTests | None], raw_code: bool,
                together: bool) -> list[Future[Report]]:
        codes = [c if raw_code else extract_rust(c) for c in completions]
        futures: list[Future[Report]] = []
        fresh: list[tuple[str, HiddenTests | None, str, Future[Report]]] = []
        with self._lock:
            for code, h in zip(codes, hidden, strict=True):
                key = code_hash(code, h, self.config)
                self._counts["requested"] += 1
                if key in self._cache:
                    self._counts["cache_hits"] += 1
                    self._cache.move_to_end(key)
                    done: Future[Report] = Future()
                    done.set_result(self._cache[key])
                    futures.append(done)
                elif key in self._inflight:
                    self._counts["cache_hits"] += 1
                    futures.append(self._inflight[key])
                else:
                    future: Future[Report] = Future()
                    self._inflight[key] = future
                    self._counts["verified"] += 1
                    fresh.append((code, h, key, future))
                    futures.append(future)
        if fresh:
            self._start(fresh, together)
        return futures

    def _start(self, fresh: list[tuple[str, HiddenTests | None, str, Future[Report]]], together: bool) -> None:
        try:
            if any(code.strip() for code, *_ in fresh):
                self.executor.preflight()
            started = self.executor.run([(code, h) for code, h, _, _ in fresh], together)
        except BaseException:
            with self._lock:  # nothing was queued: the next request tries again
                for _, _, key, _ in fresh:
                    self._inflight.pop(key, None)
            raise
        for (code, _, key, future), source in zip(fresh, started, strict=True):
            source.add_done_callback(lambda f, c=code, k=key, out=future: self._finish(c, k, f, out))

    def _finish(self, code: str, key: str, source: Future[Report], out: Future[Report]) -> None:
        """Cache every finished report, internal errors included: all consumers of one training step
        (seven rewards, the step's logging) must see the same verdict. ``forget_failures`` drops the
        internal errors so that a later request verifies again."""
        exc = source.exception()
        report = source.result() if exc is None else failed_report(code, f"{type(exc).__name__}: {exc}",
                                                                   self.config.mode)
        with self._lock:
            self._inflight.pop(key, None)
            self._cache[key] = report
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        out.set_result(report)

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
        self.executor.close()


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


def make_executor(backend: str = "local", config: VerifierConfig | None = None, workers: int | None = None,
                  ray_address: str = "auto") -> Executor:
    """The executor ``backend`` names: ``local`` (``workers`` sandboxed slots here) or ``ray`` (the cluster at
    ``ray_address``, ``workers`` actors, by default one per 2 of its CPUs)."""
    if backend not in BACKENDS:
        raise ValueError(f"--verifier: expected one of {BACKENDS}, got {backend!r}")
    if backend == "ray":
        from rust_rewards.verify.ray import RayExecutor

        return RayExecutor(config, ray_address, workers=workers)
    return LocalExecutor(config, workers)


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
        _DEFAULT = Verifier(executor=make_executor(backend, config, workers, ray_address))
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
