"""The workspace: the folder whose relative paths a notebook offers and defaults to (``outputs/``,
``qwen3-rust-finetune/``, ``train.py`` for background jobs).

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
