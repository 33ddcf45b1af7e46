"""Plain helpers of the lifecycle operations."""

import time

import pytest

from mem_assets.lifecycle.operations import chunks, prefetched


def test_prefetched_keeps_order_and_reads_at_most_one_item_ahead():
    produced: list[int] = []

    def source():
        for i in range(5):
            produced.append(i)
            yield i

    stream = prefetched(source())
    assert next(stream) == 0
    time.sleep(0.05)  # give the worker time to run ahead, if it would
    assert len(produced) <= 2
    assert list(stream) == [1, 2, 3, 4]


def test_prefetched_passes_producer_errors_to_the_consumer():
    def source():
        yield 1
        raise RuntimeError("page failed")

    stream = prefetched(source())
    assert next(stream) == 1
    with pytest.raises(RuntimeError, match="page failed"):
        next(stream)


def test_chunks_split_lazily():
    assert list(chunks(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(chunks([], 3)) == []
