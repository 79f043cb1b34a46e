"""Locate the Rust toolchain once, with one clear error naming the fix when something is missing."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class ToolchainError(RuntimeError):
    """The Rust toolchain (cargo, rustc or clippy) is missing or unusable."""


@dataclass(frozen=True)
class Toolchain:
    """Absolute paths of the real toolchain binaries (not rustup proxies) and their sysroot."""

    sysroot: Path
    host: str
    version: str

    @property
    def bin_dir(self) -> Path:
        return self.sysroot / "bin"

    @property
    def rustc(self) -> Path:
        return self.bin_dir / "rustc"

    @property
    def clippy_driver(self) -> Path:
        return self.bin_dir / "clippy-driver"

    @property
    def cargo(self) -> Path:
        return self.bin_dir / "cargo"

    @property
    def std_lib_dir(self) -> Path:
        """Where ``libstd-*.so`` lives (test binaries link std dynamically)."""
        return self.sysroot / "lib" / "rustlib" / self.host / "lib"


@functools.cache
def find_toolchain() -> Toolchain:
    """The active toolchain, checked once per process.

    Raises ``ToolchainError`` with the command that fixes the problem.
    """
    rustc = shutil.which("rustc")
    if rustc is None:
        raise ToolchainError(
            "rustc was not found on PATH. Install Rust with rustup (https://rustup.rs) and run "
            "`rustup component add clippy`, or add ~/.cargo/bin to PATH."
        )
    try:
        sysroot = subprocess.run(
            [rustc, "--print", "sysroot"], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
        info = subprocess.run([rustc, "-vV"], capture_output=True, text=True, check=True, timeout=60).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        raise ToolchainError(f"`rustc --print sysroot` failed ({exc}); check your Rust installation") from exc
    host = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("host:")), "")
    version = info.splitlines()[0] if info else "unknown"
    tc = Toolchain(Path(sysroot), host, version)
    if not tc.cargo.exists():
        raise ToolchainError(f"cargo is missing from {tc.bin_dir}; run `rustup component add cargo`")
    if not tc.clippy_driver.exists():
        raise ToolchainError(
            f"clippy is missing from {tc.bin_dir}; run `rustup component add clippy` "
            "(clippy verdicts need it)"
        )
    return tc


def _world_accessible(path: Path) -> bool:
    """Whether every directory on the way to ``path`` lets other users through."""
    for part in [path, *path.parents]:
        try:
            if not part.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def shared_toolchain(tc: Toolchain) -> Toolchain:
    """A copy of the toolchain that an unprivileged sandbox user can execute.

    rustup keeps toolchains under the installing user's home (``/root`` is 0700), so when the verifier runs as
    root and drops privileges, it mirrors ``bin/`` and ``lib/`` into a world-readable folder, with hard links
    when the file system allows (instant, no space) and a copy otherwise. Made once, reused across processes.
    """
    if _world_accessible(tc.rustc):
        return tc
    key = hashlib.sha256(f"{tc.sysroot}|{tc.version}".encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"rust-rewards-toolchain-{key}"
    done = root / ".complete"
    if not done.exists():
        lock_path = Path(tempfile.gettempdir()) / f"rust-rewards-toolchain-{key}.lock"
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                shutil.rmtree(root, ignore_errors=True)
                root.mkdir(mode=0o755)
                for sub in ("bin", "lib"):
                    _mirror(tc.sysroot / sub, root / sub)
                root.chmod(0o755)
                done.touch()
    return Toolchain(root, tc.host, tc.version)


def _mirror(src: Path, dst: Path) -> None:
    try:
        shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    except OSError:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
    for dirpath, _dirs, _files in os.walk(dst):
        os.chmod(dirpath, 0o755)
