"""Write files atomically: a temporary file in the same folder, fsync, then ``os.replace``.

A reader sees either the old file or the complete new one, never a half-written file.
"""

from __future__ import annotations

import json
import os
import secrets
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
