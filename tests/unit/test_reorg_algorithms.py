"""Clustering building blocks and topic ids, without Dagster or Neo4j."""

from __future__ import annotations

import numpy as np
import pytest

from mem_assets.reorg.clustering import (
    leaves_of,
    merge_groups,
    purity,
    similar_groups,
    split_to_max,
    themed_groups,
)
from mem_assets.reorg.placement import (
    PlacementParams,
    Topic,
    memories_below,
    plan_cycle,
    rebuild_lineage,
)
from mem_assets.reorg.placement_plan import topic_id
from mem_assets.reorg.topic_space import TopicSpace, language, languages
from mem_resources.embedder import WordLlamaEmbedder
from tests.support.topic_corpus import topic_memories


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The English memories of the five-topic corpus, in the topic space."""
    pairs = [(topic, text) for topic, text in topic_memories(per_topic=50) if language(text) == "en"]
    texts = [text for _, text in pairs]
    vectors = WordLlamaEmbedder().embed(texts)
    langs = languages(texts)
    projected = TopicSpace.fit([], vectors[:0], langs, vectors).project(vectors, langs)
    return projected, np.array([topic for topic, _ in pairs]), texts


def test_similar_groups_follow_the_topics_and_cover_every_row(corpus):
    vectors, truth, _ = corpus
    groups = similar_groups(vectors, min_similarity=0.15)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(vectors)))
    big = [g for g in groups if len(g) >= 3]
    assert purity(big, truth) >= 0.95
    assert sum(len(g) for g in big) >= 0.9 * len(vectors)


def test_blocked_grouping_still_covers_every_row_once(corpus):
    vectors, truth, _ = corpus
    groups = similar_groups(vectors, min_similarity=0.15, block_rows=40)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(vectors)))
    assert purity([g for g in groups if len(g) >= 3], truth) >= 0.9


def test_themed_groups_nest_the_groups_of_the_finer_cut_in_fewer_themes(corpus):
    vectors, truth, _ = corpus
    themes = themed_groups(vectors, group_similarity=0.5, theme_similarity=0.15)
    groups = [g for theme in themes for g in theme]
    as_sets = sorted(sorted(g.tolist()) for g in groups)
    assert as_sets == sorted(sorted(g.tolist()) for g in similar_groups(vectors, min_similarity=0.5))
    assert len(themes) == len(set(truth)) < len(groups)
    coarse = sorted(sorted(np.concatenate(theme).tolist()) for theme in themes)
    assert coarse == sorted(sorted(g.tolist()) for g in similar_groups(vectors, min_similarity=0.15))
    assert purity([np.concatenate(t) for t in themes if sum(map(len, t)) >= 3], truth) >= 0.9
    assert all(len(theme) == 1 for theme in themed_groups(vectors, 0.5, 1.0))


def test_merge_groups_joins_mutually_nearest_alike_groups_only():
    sums = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 0.0, 1.0]])
    assert merge_groups(sums, min_similarity=0.9) == [[0, 1], [2]]
    assert merge_groups(sums, min_similarity=0.999) == [[0], [1], [2]]


def test_leaves_respect_the_size_bounds_and_keep_every_row(corpus):
    vectors, _, _ = corpus
    rows = np.arange(47)
    leaves = leaves_of(vectors, rows, max_size=20, min_size=3, seed=0)
    assert all(3 <= len(leaf) <= 20 for leaf in leaves)
    assert sorted(np.concatenate(leaves).tolist()) == rows.tolist()


def test_identical_vectors_are_chunked_instead_of_peeled_one_by_one():
    vectors = np.tile(np.eye(1, 8, dtype=np.float32), (95, 1))
    vectors[0] = np.eye(1, 8, 3, dtype=np.float32)
    leaves = split_to_max(vectors, np.arange(95), max_size=20, seed=0)
    assert all(len(leaf) <= 20 for leaf in leaves)
    assert len(leaves) <= 7


def test_purity_is_one_only_when_no_cluster_mixes_topics():
    truth = np.array(["a", "a", "b", "b"])
    assert purity([np.array([0, 1]), np.array([2, 3])], truth) == 1.0
    assert purity([np.array([0, 2]), np.array([1, 3])], truth) == 0.5


def test_topic_ids_depend_on_tenant_type_members_and_salt_only():
    assert topic_id("t", "LongTermMemory", ["b", "a"]) == topic_id("t", "LongTermMemory", ["a", "b"])
    assert topic_id("t", "LongTermMemory", ["a", "b"]) != topic_id("u", "LongTermMemory", ["a", "b"])
    assert topic_id("t", "LongTermMemory", ["a", "b"]) != topic_id("t", "LongTermMemory", ["a", "c"])
    assert topic_id("t", "LongTermMemory", ["a"]) != topic_id("t", "LongTermMemory", ["a"], salt="rebuild:1")
    assert topic_id("t", "LongTermMemory", ["a"]).startswith("mem:")


def test_the_same_input_gives_the_same_plan(corpus):
    vectors, _, texts = corpus
    ids = [f"m{i:03d}" for i in range(len(texts))]
    lookup = dict(zip(ids, vectors, strict=True))

    def run():
        return plan_cycle({}, ids, vectors, list(languages(texts)), PlacementParams(),
                          lambda members: np.array([lookup[m] for m in members]))
    first, second = run(), run()
    assert {t: sorted(first.topics[t].children) for t in first.topics} == \
        {t: sorted(second.topics[t].children) for t in second.topics}


def test_rebuild_lineage_points_old_topics_at_where_their_memories_went():
    def leaf(tid: str, members: list[str], parent: str | None = None) -> Topic:
        return Topic(id=tid, level=1, language="en", children=members, vector_sum=np.zeros(2),
                     member_count=len(members), parent=parent)
    old = {"o1": leaf("o1", ["a", "b", "c"], "o2"), "o3": leaf("o3", ["d", "e"], "o2"),
           "o2": Topic(id="o2", level=2, language="en", children=["o1", "o3"], vector_sum=np.zeros(2),
                       member_count=5),
           "o4": leaf("o4", ["x", "y"])}
    new = {"n1": leaf("n1", ["a", "b", "d"]), "n2": leaf("n2", ["c", "e", "f", "g"])}
    assert memories_below(old, "o2") == {"a", "b", "c", "d", "e"}
    lineage = rebuild_lineage(old, new)
    assert lineage == {"o1": "n1", "o2": "n1", "o3": "n2", "o4": "n2"}
    assert rebuild_lineage(old, {}) == {}
