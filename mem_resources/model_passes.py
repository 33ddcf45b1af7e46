"""How many texts (or pairs, or feature rows) each model ran on in this process, and the seconds
spent in it: the cost side of every model, counted where the model runs (one line at each: a
decorator on the function that calls it, or ``CountedSession`` around its onnxruntime session).

An asset takes a ``snapshot()`` when it starts and reports ``metadata(snapshot)`` — its step's
passes per model — so runs in other processes (worker pools, launched runs) are summed from their
materializations, and a benchmark prints passes per memory and the model floor from them.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Passes:
    """One model's count: items it ran on (texts, pairs or feature rows) and seconds inside it."""

    items: int = 0
    seconds: float = 0.0

    def __add__(self, other: Passes) -> Passes:
        return Passes(self.items + other.items, self.seconds + other.seconds)

    def __sub__(self, other: Passes) -> Passes:
        return Passes(self.items - other.items, self.seconds - other.seconds)


_lock = threading.Lock()
_counts: dict[str, Passes] = {}


def add(model: str, items: int, seconds: float) -> None:
    with _lock:
        _counts[model] = _counts.get(model, Passes()) + Passes(items, seconds)


def snapshot() -> dict[str, Passes]:
    """Every model's count so far in this process."""
    with _lock:
        return dict(_counts)


def since(start: Mapping[str, Passes]) -> dict[str, Passes]:
    """Each model's passes after ``start`` (models that did not run are left out)."""
    now = snapshot()
    moved = {model: count - start.get(model, Passes()) for model, count in now.items()}
    return {model: count for model, count in sorted(moved.items()) if count.items}


def counted(model: str | Callable[..., str], items: int = 0) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: each call counts ``len`` of its positional argument number ``items`` (the texts,
    pairs or feature rows) for ``model`` — a name, or a function of the call's arguments."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                name = model(*args, **kwargs) if callable(model) else model
                add(name, len(args[items]), time.perf_counter() - start)  # type: ignore[arg-type]

        return run

    return wrap


class CountedSession:
    """An onnxruntime session whose ``run`` counts the rows of its first input for ``model``."""

    def __init__(self, session: Any, model: str) -> None:
        self._session, self.model = session, model

    def run(self, outputs: Any, feed: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self._session.run(outputs, feed, *args, **kwargs)
        finally:
            add(self.model, len(next(iter(feed.values()))), time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def metadata(start: Mapping[str, Passes]) -> dict[str, Any]:
    """Asset metadata of the passes since ``start``: ``model_passes`` {model: items} and
    ``model_seconds`` {model: seconds}, read back by ``from_metadata``."""
    import dagster as dg

    moved = since(start)
    return {"model_passes": dg.MetadataValue.json({m: c.items for m, c in moved.items()}),
            "model_seconds": dg.MetadataValue.json({m: round(c.seconds, 4) for m, c in moved.items()})}


def from_metadata(values: Mapping[str, Any]) -> dict[str, Passes]:
    """The passes an asset's metadata recorded (none when it has no ``model_passes``)."""
    def plain(key: str) -> dict[str, Any]:
        value = values.get(key)
        return dict(getattr(value, "data", value) or {})

    seconds = plain("model_seconds")
    return {model: Passes(int(items), float(seconds.get(model, 0.0))) for model, items in plain("model_passes").items()}


def total(counts: Mapping[str, Passes], more: Mapping[str, Passes]) -> dict[str, Passes]:
    """Two counts summed per model."""
    return {model: counts.get(model, Passes()) + more.get(model, Passes()) for model in {*counts, *more}}
