"""Upload a finished run (params, metrics, completions, adapter) to an Oxen.ai repository."""

from __future__ import annotations

import warnings
from pathlib import Path, PurePosixPath

from rust_rewards.layout import ADAPTER_DIR, COMPLETIONS_DIR, METRICS_FILE, PARAMS_FILE, PARAMS_HISTORY_FILE


def upload_to_oxen(out_dir: str | Path, repo_id: str, dest: str) -> str | None:
    """Upload params, metrics, per-step completions and the adapter to an Oxen repo.

    Returns None on success, else the error text (also raised as a warning): an upload is never
    required for a run to count as finished.
    """
    out = Path(out_dir)
    files = [out / PARAMS_FILE, out / PARAMS_HISTORY_FILE, out / METRICS_FILE,
             *sorted((out / COMPLETIONS_DIR).glob("*.parquet")),
             *sorted(p for p in (out / ADAPTER_DIR).rglob("*") if p.is_file())]
    try:
        from oxen import RemoteRepo

        repo = RemoteRepo(repo_id)
        for file in files:
            if file.is_file():
                repo.add(str(file), dst=str(PurePosixPath(dest) / file.parent.relative_to(out).as_posix()))
        repo.commit(f"train.py: {dest}")
    except Exception as exc:  # noqa: BLE001 - any failure (offline, auth, quota) only warns
        message = f"Oxen upload to {repo_id}:{dest} failed: {type(exc).__name__}: {exc}"
        warnings.warn(message, stacklevel=2)
        return message
    return None
