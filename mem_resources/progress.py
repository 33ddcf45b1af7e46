"""Progress lines for long work (rows done, rate, ETA) so a run's event log is never silent.

The loop advances a ``Progress``; a heartbeat thread emits a line every ``interval_s`` while the
work runs, even when one step of the loop (an LLM batch, a large write) takes longer than that.
Short work (done within one interval) emits nothing. ``sink`` is where lines go: an asset passes
``context.log.info``, so they land in the Dagster event log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Sink = Callable[[str], None]
DEFAULT_INTERVAL_S = 10.0
_listeners: list[Sink] = []


@contextmanager
def listening(listener: Sink) -> Iterator[None]:
    """Every progress line emitted in this process while the block runs also goes to
    ``listener``: how ``memtend tend`` shows a run's progress next to its bar (its runs execute
    in the CLI's own process)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def format_duration(seconds: float) -> str:
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass
class Progress:
    """Counts done units of ``total`` (None: unknown) and renders one status line."""

    label: str
    total: int | None = None
    unit: str = "rows"
    clock: Callable[[], float] = time.monotonic
    done: int = 0
    started: float = field(default=0.0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def advance(self, units: int = 1) -> None:
        with self._lock:
            self.done += units

    def line(self) -> str:
        with self._lock:
            done = self.done
        elapsed = self.clock() - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        head = f"{self.label}: {done:,}"
        if self.total:
            head += f"/{self.total:,} {self.unit} ({100 * done / self.total:.0f}%)"
        else:
            head += f" {self.unit}"
        parts = [head, f"{rate:,.1f} {self.unit}/s", f"{format_duration(elapsed)} elapsed"]
        if self.total and rate > 0 and done < self.total:
            parts.append(f"ETA {format_duration((self.total - done) / rate)}")
        return ", ".join(parts)


@contextmanager
def tracked(label: str, sink: Sink | None, total: int | None = None, unit: str = "rows",
            interval_s: float | None = None) -> Iterator[Progress]:
    """A ``Progress`` whose line goes to ``sink`` every ``interval_s`` (default
    ``DEFAULT_INTERVAL_S``) until the block ends, and once more at the end if any line was
    emitted, so long work also reports its total. Without a sink it only counts."""
    progress = Progress(label, total, unit)
    if sink is None:
        yield progress
        return
    interval_s = interval_s or DEFAULT_INTERVAL_S
    stop = threading.Event()
    emitted = threading.Event()

    def emit(line: str) -> None:
        sink(line)
        for listener in _listeners.copy():
            listener(line)

    def heartbeat() -> None:
        while not stop.wait(interval_s):
            emit(progress.line())
            emitted.set()

    thread = threading.Thread(target=heartbeat, name=f"progress-{label}", daemon=True)
    thread.start()
    try:
        yield progress
    finally:
        stop.set()
        thread.join()
        if emitted.is_set():
            emit(progress.line() + " (done)")
