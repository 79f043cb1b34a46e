"""Show ``progress(done, total)`` callbacks (the verifier's and generation's) as a marimo progress bar."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def marimo_progress(title: str, *, remove_on_exit: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A callback that drives a marimo progress bar; the total may change (it is known late)."""
    import marimo as mo

    with mo.status.progress_bar(total=1, title=title, remove_on_exit=remove_on_exit) as bar:
        shown = [0]

        def update(done: int, total: int) -> None:
            bar.total = max(total, 1)
            bar.update(increment=done - shown[0])
            shown[0] = done

        yield update
