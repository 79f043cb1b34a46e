"""The workspace: the folder whose relative paths a notebook offers and defaults to (``outputs/``,
``qwen3-rust-finetune/``, ``train.py`` for background jobs).

**The one rule for relative paths** a command line or a form gives (``find_path``): a path that exists where it
was given (relative to the current directory) is that one; else the same path under the workspace, when it exists
there (the form offers files relative to the workspace); else it is not found, and the caller keeps it as given (a
hub name, or a file the run reports missing) or, for an output of ours, puts it under the workspace when it is our
default and relative to the current directory otherwise (``train.resolve.local_path``).

A notebook names its own folder when it starts (``use_workspace(Path(__file__).parent)`` in its setup cell); the
choice travels to the processes it starts through ``RUST_REWARDS_WORKSPACE``. Library use without a notebook works
in the current directory. The package never reads its own location for this: installed or not, it is the same.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "RUST_REWARDS_WORKSPACE"


def workspace() -> Path:
    """``$RUST_REWARDS_WORKSPACE`` when set, else the current directory."""
    return Path(os.environ.get(ENV) or os.getcwd()).resolve()


def use_workspace(folder: str | os.PathLike[str]) -> None:
    """Make ``folder`` the workspace of this process and of the processes it starts. Returns nothing: it ends a
    notebook's setup cell, where marimo would show a returned path as the page's first output."""
    os.environ[ENV] = str(Path(folder).resolve())


def find_path(value: str, root: Path | None = None) -> str | None:
    """``value`` when it exists as given, else ``root / value`` (``root``: the workspace) when that exists, else
    ``None`` (see the module's rule)."""
    if not value:
        return None
    if Path(value).expanduser().exists():
        return value
    under = (root or workspace()) / value
    return str(under) if under.exists() else None
