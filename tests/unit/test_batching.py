"""Batches for UNWIND writes."""

from itertools import count

from mem_resources.batching import chunks


def test_chunks_split_lazily():
    assert list(chunks(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(chunks([], 3)) == []
    assert next(chunks(count(), 2)) == [0, 1]
