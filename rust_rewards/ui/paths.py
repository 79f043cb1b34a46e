"""Input paths a notebook receives from its command line or its form.

The command line gives paths relative to the current directory; a form offers existing files relative to the
workspace (the ``files`` patterns of ``rust_rewards.params.ParamInfo``). ``repo_path`` applies the one rule of
``rust_rewards.workspace.find_path``, so both work from any directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from rust_rewards.params import info_of
from rust_rewards.workspace import find_path

P = TypeVar("P")


def repo_path(value: str, root: Path) -> str:
    """``find_path(value, root)``, else ``value`` unchanged (empty, a hub name, or a file the run will report
    missing)."""
    return find_path(value, root) or value


def resolve_files(params: P, root: Path, skip: Sequence[str] = ()) -> P:
    """``params`` with every field declared with ``files`` patterns (but ``skip``) passed through ``repo_path``."""
    changes: dict[str, str | list[str]] = {}
    for name, info in info_of(type(params)).items():
        if not info.files or name in skip:
            continue
        value = getattr(params, name)
        changes[name] = [repo_path(v, root) for v in value] if isinstance(value, list) else repo_path(value, root)
    return dataclasses.replace(params, **changes)


def require_file(flag: str, value: str, suffixes: Sequence[str] = ()) -> None:
    """Raise ``ValueError`` naming ``--flag`` when ``value`` is not an existing file. With ``suffixes``, only a value
    ending with one of them must be (anything else may name a dataset on a hub)."""
    if suffixes and not value.lower().endswith(tuple(suffixes)):
        return
    if not Path(value).expanduser().is_file():
        raise ValueError(f"--{flag}: no such file: {value}")
