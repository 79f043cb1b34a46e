"""Whether the Hugging Face Hub can be reached, asked once, fast: offline, ``from_pretrained`` with a hub name spends
about 50 s on retries before it fails."""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path
from urllib.parse import urlparse


def looks_local(name: str) -> bool:
    """Whether a ``--model``/``--tokenizer`` value names something on disk rather than a hub id: a path (``.``, ``/``,
    ``~``) or anything existing here."""
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


@functools.cache
def hub_reachable(timeout: float = 3.0) -> bool:
    """``False`` when ``HF_HUB_OFFLINE`` is set or a TCP connection to the hub (``HF_ENDPOINT``) fails in
    ``timeout`` seconds."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False
