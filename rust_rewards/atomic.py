"""Write files and replace folders atomically.

Files: a temporary file in the same folder, fsync, then ``os.replace``: a reader sees either the old file or
the complete new one, never a half-written file. Folders: ``replace_dir`` swaps a complete new folder with the
old one in a single ``renameat2(RENAME_EXCHANGE)`` where the kernel and filesystem allow it.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def _atomic_target(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success fsync it and move it over ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # mode follows the umask
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` to produce the file, then move it into place atomically."""
    with _atomic_target(path) as tmp:
        writer(tmp)
    return Path(path)


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically."""
    return write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(obj: Any, path: str | os.PathLike[str], *, indent: int | None = 2) -> Path:
    """Write ``obj`` as JSON (UTF-8, keys in insertion order, trailing newline) to ``path`` atomically."""
    return write_text_atomic(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n", path)


def write_parquet_atomic(df: Any, path: str | os.PathLike[str]) -> Path:
    """Write a pandas DataFrame or a pyarrow Table to ``path`` as parquet, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = df if isinstance(df, pa.Table) else pa.Table.from_pandas(df, preserve_index=False)
    return write_with(path, lambda tmp: pq.write_table(table, tmp))


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_EXCHANGE_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}
"""errno values meaning "this kernel or filesystem cannot exchange", as opposed to a real failure."""


def exchange_dirs(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> None:
    """Swap two existing paths in one atomic step (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    Raises ``NotImplementedError`` where the platform, libc, kernel or filesystem cannot do it, and
    ``OSError`` for any other failure (a missing path, different filesystems, permissions).
    """
    if not sys.platform.startswith("linux"):
        raise NotImplementedError(f"atomic exchange needs Linux, not {sys.platform}")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        renameat2 = libc.renameat2
    except AttributeError:
        raise NotImplementedError("this libc has no renameat2 (glibc >= 2.28 has it)") from None
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return
    code = ctypes.get_errno()
    if code in _EXCHANGE_UNSUPPORTED:
        raise NotImplementedError(f"renameat2(RENAME_EXCHANGE) not supported here: {os.strerror(code)}")
    raise OSError(code, os.strerror(code), os.fspath(a), None, os.fspath(b))


def replace_dir(new: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Move the complete folder ``new`` to ``target``, replacing what is there; ``new`` is consumed.

    With an atomic exchange a reader of ``target`` sees the complete old folder or the complete new one at
    every moment; the old one is then deleted. Where exchange is unsupported, the old folder is renamed
    aside, ``new`` renamed into place, and the old one deleted: between those two renames (two syscalls,
    microseconds) ``target`` does not exist, and a crash right there leaves the old folder at
    ``.<name>.old`` next to it.
    """
    new, target = Path(new), Path(target)
    if not target.exists():
        os.rename(new, target)
    else:
        try:
            exchange_dirs(new, target)
        except NotImplementedError:
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.rename(target, old)
            os.rename(new, target)
            new = old
        shutil.rmtree(new)
    _fsync_dir(target.parent)
    return target
