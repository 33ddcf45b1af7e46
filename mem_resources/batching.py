"""Fixed-size batches of a stream, for UNWIND writes that keep memory flat."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter), read lazily."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
