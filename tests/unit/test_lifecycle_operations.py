"""Plain helpers of the lifecycle operations."""

from mem_assets.lifecycle.operations import chunks


def test_chunks_split_lazily():
    assert list(chunks(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(chunks([], 3)) == []
