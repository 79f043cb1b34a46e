"""Progress lines for a run's long phases: the pass-rate filter, the tiny model's build, held-out evaluation and the
training steps (``rust_rewards.ui.progress`` draws marimo bars instead).

``ProgressLine`` says ``LABEL: DONE/TOTAL UNIT (NOTE), RATE, ELAPSED so far, about LEFT left`` when asked, on its
own when ``every`` seconds passed since its last line, and, while started (``with``), from a heartbeat thread
whenever nothing was said for ``every`` seconds: one unit of work (a batch of samples, a GRPO step) may take longer
than that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType

EVERY = 30.0
"""The longest a long phase stays silent, in seconds."""


def duration(seconds: float) -> str:
    """``42 s``, ``16 min 44 s``, ``2 h 5 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def rate_text(per_second: float, unit: str) -> str:
    """``4.2 samples/s``, or per minute below one a second."""
    return f"{per_second:.3g} {unit}/s" if per_second >= 1 else f"{per_second * 60:.3g} {unit}/min"


def _print(line: str) -> None:
    print(line, flush=True)


class ProgressLine:
    """``done`` of ``total`` ``unit`` of one phase; the rate and time left count the units done since it was made
    (a resumed phase starts at its ``done``). ``clock`` and ``say`` are for tests."""

    def __init__(self, label: str, total: int, unit: str, *, done: int = 0, note: str = "", every: float = EVERY,
                 clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] = _print) -> None:
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.done = self.first = done
        self.note = note
        self.clock, self.say = clock, say
        self.began = self.said = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        """The line as of now."""
        elapsed = self.clock() - self.began
        moved = self.done - self.first
        rate = moved / elapsed if moved > 0 and elapsed > 0 else None
        parts = [f"{self.label}: {self.done}/{self.total} {self.unit}" + (f" ({self.note})" if self.note else "")]
        if rate is not None:
            parts.append(rate_text(rate, self.unit))
        if self.done >= self.total:
            return ", ".join([*parts, f"took {duration(elapsed)}"])
        parts.append(f"{duration(elapsed)} so far")
        if rate is not None:
            parts.append(f"about {duration((self.total - self.done) / rate)} left")
        return ", ".join(parts)

    def update(self, done: int | None = None, note: str | None = None, *, say: bool | None = None) -> None:
        """Record ``done`` and the ``note``; say the line when ``say``, or (``None``) when ``every`` seconds passed
        since the last one. ``say=False``: the caller has just printed a line of its own (the silence restarts)."""
        with self._lock:
            self.done = self.done if done is None else done
            self.note = self.note if note is None else note
            now = self.clock()
            if say is False:
                self.said = now
            elif say or now - self.said >= self.every:
                self.said = now
                self.say(self.line())

    def start(self) -> ProgressLine:
        """Start the heartbeat (a daemon thread); ``stop`` ends it."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"progress: {self.label}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            self.update()

    def __enter__(self) -> ProgressLine:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()
