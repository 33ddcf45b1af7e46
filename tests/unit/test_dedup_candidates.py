"""Candidate search: batch members compared with each other, same memory type, exact hashes,
top-k, and the vector-index path never starved by other tenants' hits."""

from __future__ import annotations

import numpy as np

from mem_assets.dedup.candidates import (
    SCORE_DECIMALS,
    NodeVectors,
    find_candidates,
    index_candidates,
    largest_per_row,
)


def _nodes(ids, types, hashes, vectors) -> NodeVectors:
    return NodeVectors(list(ids), list(types), list(hashes), np.asarray(vectors, dtype=np.float32))


def test_batch_members_are_compared_with_each_other_and_only_within_a_memory_type():
    v = [[1, 0], [0.99, 0.1], [1, 0.05], [0, 1]]
    active = _nodes("abcd", ["LongTermMemory", "LongTermMemory", "UserMemory", "LongTermMemory"],
                    ["h1", "h2", "h3", "h4"], v)
    new = _nodes("ab", ["LongTermMemory"] * 2, ["h1", "h2"], v[:2])
    pairs = find_candidates(new, active, threshold=0.8, top_k=5)
    assert list(zip(pairs.left_id, pairs.right_id, strict=True)) == [("a", "b")]
    assert not pairs.exact.any()


def test_exact_payload_duplicates_are_pairs_even_below_the_threshold():
    active = _nodes(["x", "y", "z"], ["LongTermMemory"] * 3, ["same", "same", "other"],
                    [[1, 0], [0, 1], [1, 0]])
    new = _nodes(["y"], ["LongTermMemory"], ["same"], [[0, 1]])
    pairs = find_candidates(new, active, threshold=0.99, top_k=1)
    assert pairs[["left_id", "right_id", "exact"]].values.tolist() == [["x", "y", True]]


def test_top_k_limits_neighbours_per_new_node():
    rng = np.random.default_rng(0)
    base = rng.normal(size=8)
    vectors = [base + rng.normal(scale=0.01, size=8) for _ in range(10)]
    active = _nodes([f"n{i}" for i in range(10)], ["LongTermMemory"] * 10, [f"h{i}" for i in range(10)],
                    vectors)
    new = _nodes(["n0"], ["LongTermMemory"], ["h0"], vectors[:1])
    assert len(find_candidates(new, active, threshold=0.5, top_k=3)) == 3


def test_vector_index_search_asks_again_when_other_tenants_fill_the_global_top_k():
    calls: list[int] = []

    def query(rows, k):
        calls.append(k)
        mine = [{"id": "m1", "score": 0.95}] if k >= 100 else []
        return [{"id": row["id"], "returned": k, "floor": 0.9, "neighbours": mine} for row in rows]

    new = _nodes(["q"], ["LongTermMemory"], ["hq"], [[1.0, 0.0]])
    pairs = index_candidates(new, ["q", "m1"], ["hq", "hm"], query, threshold=0.8, top_k=5, max_k=1000)
    assert pairs[["left_id", "right_id"]].values.tolist() == [["m1", "q"]]
    assert calls[0] < 100 <= calls[-1]


def test_blockwise_top_k_matches_a_full_sort_of_the_rounded_scores():
    """Scores 1e-5 apart tie once rounded: the top k must be that of the rounded scores."""
    rng = np.random.default_rng(1)
    for columns in (3, 40, 2_000, 70_001):
        for scale in (1.0, 1e-4):
            scores = (rng.normal(size=(16, columns)) * scale).astype(np.float32)
            rounded = scores.round(SCORE_DECIMALS)
            k = min(6, columns)
            found, values = largest_per_row(scores, k)
            assert np.array_equal(np.sort(values, axis=1), np.sort(rounded, axis=1)[:, -k:])
            assert np.array_equal(np.take_along_axis(rounded, found, axis=1), values)
