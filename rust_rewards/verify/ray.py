"""Verification on a Ray cluster: CPU-only nodes do the cargo work of a GPU trainer.

``RayExecutor`` is the executor of a ``Verifier`` whose distinct completions run on Ray actors (``VerifyWorker``), each
holding a ``LocalExecutor`` with its own sandbox and worker slots on its node. The content-hash cache, deduplication and
input order are the verifier's, so a completion is verified at most once however many rewards ask for it.

Requests are gathered into batches (at most ``batch_size`` completions per actor call) by one dispatcher thread,
which keeps every actor at most ``queue_depth`` calls busy. An actor that dies mid-batch is restarted by Ray
(``max_restarts=-1``) and its batch is sent again once that actor answers, up to ``retries`` times; a batch that
still cannot be verified becomes failed reports (``internal_error``, scored None by every reward), never an
exception in the trainer and never a lost completion. A cluster that cannot be reached is one ``RayUnreachable`` at
start.

Ray is an optional extra: ``pip install -e ".[ray]"``.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rust_rewards.report import Report
from rust_rewards.tasks import HiddenTests
from rust_rewards.verify.config import VerifierConfig
from rust_rewards.verify.executors import Item, LocalExecutor, failed_report

AUTH_HINT = ("a cluster started with RAY_AUTH_MODE=token needs the same mode and its token here: "
             "export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or copy ~/.ray/auth_token) before starting")
HINT = ("start one with `RAY_AUTH_MODE=disabled ray start --head` on the head node and "
        "`ray start --address HEAD:6379` on the others, then pass --ray-address auto (on a cluster node) or "
        "--ray-address HEAD:6379")
LOCAL = "local"
"""``--ray-address local``: start a Ray instance on this machine (to try the backend, and for benchmarks)."""
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def set_auth_mode() -> None:
    """Say which authentication this process means, so that nothing under ``~/.ray`` decides it.

    Left to itself, Ray 2.60 writes ``~/.ray/auth_token`` when it starts a local instance and from then on switches
    every connection (and every ``ray start``) to token auth because that file exists: a cluster started as README
    says could no longer be joined. Unless ``RAY_AUTH_MODE`` is set, this process runs without auth: ``local``
    starts an instance without auth (no file written; it lives as long as this process) and a cluster is joined
    without auth, as README's ``RAY_AUTH_MODE=disabled ray start --head`` starts it. A token-auth cluster needs
    ``RAY_AUTH_MODE=token`` and its token (``AUTH_HINT``).
    """
    os.environ.setdefault(AUTH_MODE, "disabled")


def auth_setting() -> str:
    """This process's authentication, as an error message names it: its mode and where a token comes from."""
    mode = os.environ.get(AUTH_MODE, "").lower() or "unset"
    if mode != "token":
        return f"this process connects with {AUTH_MODE}={mode}, no token"
    if os.environ.get(AUTH_TOKEN):
        source = f"the {AUTH_TOKEN} variable"
    elif os.environ.get(AUTH_TOKEN_PATH):
        source = os.environ[AUTH_TOKEN_PATH]
    else:
        source = "~/.ray/auth_token"
    return f"this process connects with {AUTH_MODE}=token, its token from {source}"


class RayUnreachable(ConnectionError):
    """The Ray cluster named by ``--ray-address`` cannot be reached (or Ray is not installed)."""


def connect(address: str, timeout: float = 5.0, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at ``address`` (``auto``, ``HOST:PORT`` or ``local``) unless already joined.

    ``HOST:PORT`` is probed with a plain TCP connection first (also when already joined): ``ray.init`` itself
    retries for minutes.
    ``num_cpus`` only applies to ``local``.
    """
    try:
        import ray
    except ImportError as err:
        raise RayUnreachable(f"--verifier ray needs Ray: pip install -e \".[ray]\" ({err})") from None
    if address not in ("auto", LOCAL):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"--ray-address: expected auto, local or HOST:PORT, got {address!r}")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except OSError as err:
            raise RayUnreachable(f"--ray-address {address}: no Ray cluster answers there ({err}); {HINT}") from None
    if ray.is_initialized():
        return
    set_auth_mode()
    try:
        if address == LOCAL:
            # address="local": a new instance, never one that `ray start` left running on this machine
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    except (ConnectionError, ray.exceptions.AuthenticationError) as err:
        refusal = auth_refusal(err)
        if refusal:
            raise RayUnreachable(f"--ray-address {address}: {refusal}; {AUTH_HINT}") from None
        raise RayUnreachable(f"--ray-address {address}: {err}; {HINT}; {AUTH_HINT}") from None


def auth_refusal(err: BaseException) -> str:
    """One clause when ``err`` (or what caused it: Ray wraps the refusal twice) is the cluster refusing this
    process's authentication: the mode the cluster must then have and this process's setting; else ""."""
    seen: BaseException | None = err
    while seen is not None and "InvalidAuthToken" not in str(seen) and not _is_auth_error(seen):
        seen = seen.__cause__ or seen.__context__
    if seen is None:
        return ""
    sent_token = os.environ.get(AUTH_MODE, "").lower() == "token"
    cluster = ("the cluster has token auth with another token" if sent_token
               else "the cluster has token auth (RAY_AUTH_MODE=token)")
    return f"authentication refused (InvalidAuthToken): {cluster}; {auth_setting()}"


def _is_auth_error(err: BaseException) -> bool:
    import ray

    return isinstance(err, ray.exceptions.AuthenticationError)


_WORKER_CLASS: Any = None


def _worker_class() -> Any:
    """The ``VerifyWorker`` actor class (built on first use: Ray is imported only when used)."""
    global _WORKER_CLASS
    if _WORKER_CLASS is None:
        import ray

        @ray.remote(max_restarts=-1, max_task_retries=0)
        class VerifyWorker:
            """One node-local ``LocalExecutor`` (sandbox, uid blocks, ``workers`` parallel verifications)."""

            def __init__(self, config: VerifierConfig, workers: int) -> None:
                self.executor = LocalExecutor(config, workers)

            def verify(self, codes: list[str], hidden: list[HiddenTests | None]) -> list[Report]:
                return [f.result() for f in self.executor.run(list(zip(codes, hidden, strict=True)))]

            def pid(self) -> int:
                return os.getpid()

        _WORKER_CLASS = VerifyWorker
    return _WORKER_CLASS


@dataclass
class _Request:
    code: str
    hidden: HiddenTests | None
    future: Future[Report] = field(default_factory=Future)
    attempts: int = 0


RESTART_WAIT = 120.0
"""Seconds a retry waits at most for the actor that failed its batch to answer again (Ray restarts it)."""


class RayExecutor:
    """Verification on Ray actors of ``cpus_per_worker`` CPUs each.

    ``workers``: actors to start (default: the cluster's CPUs // ``cpus_per_worker``, divided among the
    ``WORLD_SIZE`` processes of a multi-process training job). ``stats``: ``batches`` (actor calls) and
    ``retried`` (batches sent again after their actor died).
    """

    backend = "ray"

    def __init__(self, config: VerifierConfig | None = None, address: str = "auto", *, workers: int | None = None,
                 cpus_per_worker: int = 2, batch_size: int = 8, queue_depth: int = 2, retries: int = 2,
                 local_cpus: int | None = None) -> None:
        import ray

        connect(address, num_cpus=local_cpus)
        cluster_cpus = int(ray.cluster_resources().get("CPU", 0))
        if cluster_cpus < cpus_per_worker:
            raise RayUnreachable(f"the Ray cluster has {cluster_cpus} CPUs, fewer than --ray-cpus-per-worker "
                                 f"{cpus_per_worker}; {HINT}")
        # The processes of one training job (WORLD_SIZE, set by torchrun / accelerate launch) share the cluster.
        count = workers or max(1, cluster_cpus // cpus_per_worker // max(1, int(os.environ.get("WORLD_SIZE", "1"))))
        self.config = config or VerifierConfig()
        self.workers = count
        self.batch_size, self.queue_depth, self.retries = batch_size, queue_depth, retries
        self.stats = {"batches": 0, "retried": 0}
        self.fallback_reasons: Counter[str] = Counter()  # batch mode combines on the actors; not seen here
        worker = _worker_class()
        self.actors = [worker.options(num_cpus=cpus_per_worker).remote(self.config, cpus_per_worker)
                       for _ in range(count)]
        self._busy = [0] * count
        self._queue: list[_Request] = []
        self._ready = threading.Condition()
        self._closed = False
        self._collectors = ThreadPoolExecutor(max_workers=count * queue_depth, thread_name_prefix="ray-collect")
        self._dispatcher = threading.Thread(target=self._dispatch, name="ray-dispatch", daemon=True)
        self._dispatcher.start()

    def preflight(self) -> None:
        """Nothing to check here: the workers verify on their own nodes (this one may have no Rust)."""

    def run(self, items: Sequence[Item], together: bool = True) -> list[Future[Report]]:
        """Batches go to the actors as they come (an actor's ``LocalExecutor`` combines them in batch mode)."""
        requests = [_Request(code, hidden) for code, hidden in items]
        self._enqueue(requests)
        return [r.future for r in requests]

    def _enqueue(self, requests: list[_Request], front: bool = False) -> None:
        with self._ready:
            self._queue = [*requests, *self._queue] if front else [*self._queue, *requests]
            self._ready.notify_all()

    def _dispatch(self) -> None:
        """Send queued requests in batches to the least busy actor with room."""
        while True:
            with self._ready:
                while not self._closed and (not self._queue or min(self._busy) >= self.queue_depth):
                    self._ready.wait()
                if self._closed:
                    return
            time.sleep(0.005)  # let a burst of submissions (one verify_many) arrive before cutting batches
            with self._ready:
                room = sum(self.queue_depth - b for b in self._busy)
                size = max(1, min(self.batch_size, math.ceil(len(self._queue) / max(room, 1))))
                while self._queue and min(self._busy) < self.queue_depth:
                    index = self._busy.index(min(self._busy))
                    batch, self._queue = self._queue[:size], self._queue[size:]
                    self._busy[index] += 1
                    self.stats["batches"] += 1
                    ref = self.actors[index].verify.remote([r.code for r in batch], [r.hidden for r in batch])
                    self._collectors.submit(self._collect, index, ref, batch)

    def _collect(self, index: int, ref: Any, batch: list[_Request]) -> None:
        """Resolve one batch's futures: its reports, a retry after an actor death, or failed reports."""
        import ray
        from ray.exceptions import RayActorError

        try:
            reports = ray.get(ref)
        except RayActorError as err:
            retry = [r for r in batch if r.attempts < self.retries]
            for request in retry:
                request.attempts += 1
            self._fail([r for r in batch if r not in retry], err)
            if retry:
                self.stats["retried"] += 1
                self._await_actor(index)
                self._enqueue(retry, front=True)
        except Exception as err:  # noqa: BLE001 - a failed batch scores None, it never reaches the trainer
            self._fail(batch, err)
        else:
            for request, report in zip(batch, reports, strict=True):
                request.future.set_result(report)
        finally:
            with self._ready:
                self._busy[index] -= 1
                self._ready.notify_all()

    def _await_actor(self, index: int) -> None:
        """Until actor ``index`` answers again, at most ``RESTART_WAIT`` seconds: a retry sent at once would meet
        it (or another killed one) still restarting and spend its attempts on nothing."""
        import ray

        deadline = time.monotonic() + RESTART_WAIT
        while time.monotonic() < deadline:
            try:
                ray.get(self.actors[index].pid.remote(), timeout=5)
                return
            except Exception:  # noqa: BLE001 - still restarting
                time.sleep(0.2)

    def _fail(self, batch: list[_Request], err: BaseException) -> None:
        message = f"RayError: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        for request in batch:
            request.future.set_result(failed_report(request.code, message, self.config.mode))

    def worker_pids(self) -> list[int]:
        """The process ids of the actors (tests kill them)."""
        import ray

        return ray.get([actor.pid.remote() for actor in self.actors])

    def close(self) -> None:
        import ray

        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._collectors.shutdown(wait=True)
        for actor in self.actors:
            ray.kill(actor)
