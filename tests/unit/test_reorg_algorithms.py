"""Clustering and extractive summaries, without Dagster or Neo4j."""

from __future__ import annotations

import numpy as np
import pytest

from mem_assets.reorg.clustering import (
    ClusteringParams,
    plan_clusters,
    purity,
    split_to_max,
)
from mem_assets.reorg.hierarchy import parent_id
from mem_assets.reorg.summarizing import (
    TermStats,
    extractive_summary,
    terms,
)
from mem_resources.embedder import hashing_embed
from mem_resources.text import language_of
from tests.support.topic_corpus import topic_memories


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray, list[str]]:
    pairs = topic_memories(per_topic=50)
    texts = [text for _, text in pairs]
    return hashing_embed(texts, 384), np.array([topic for topic, _ in pairs]), texts


def test_every_leaf_respects_the_size_bounds_and_every_row_is_placed_once(corpus):
    vectors, _, _ = corpus
    plan = plan_clusters(vectors, ClusteringParams(max_cluster_size=20, min_cluster_size=5))
    assert all(5 <= len(leaf) <= 20 for leaf in plan.leaves)
    assert all(len(rows) < 5 for rows in plan.set_aside)
    placed = np.concatenate(plan.leaves + plan.set_aside)
    assert sorted(placed.tolist()) == list(range(len(vectors)))


def test_the_same_input_gives_the_same_plan(corpus):
    vectors, _, _ = corpus
    first = plan_clusters(vectors, ClusteringParams(seed=3))
    second = plan_clusters(vectors, ClusteringParams(seed=3))
    assert [leaf.tolist() for leaf in first.leaves] == [leaf.tolist() for leaf in second.leaves]


def test_clusters_follow_known_topics(corpus):
    vectors, topics, _ = corpus
    plan = plan_clusters(vectors, ClusteringParams())
    assert purity(plan.leaves, topics) >= 0.8
    assert purity([np.concatenate(t.leaves) for t in plan.topics], topics) >= 0.8
    assert any(len(topic.leaves) > 1 for topic in plan.topics)


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


def test_parent_ids_depend_on_the_member_set_only():
    assert parent_id("t", "LongTermMemory", ["b", "a"]) == parent_id("t", "LongTermMemory", ["a", "b"])
    assert parent_id("t", "LongTermMemory", ["a", "b"]) != parent_id("u", "LongTermMemory", ["a", "b"])
    assert parent_id("t", "LongTermMemory", ["a", "b"]) != parent_id("t", "LongTermMemory", ["a", "c"])
    assert parent_id("t", "LongTermMemory", ["a"]).startswith("mem:")


def test_extractive_summary_takes_the_typical_member_and_distinctive_terms(corpus):
    vectors, topics, texts = corpus
    stats = TermStats([terms(text) for text in texts])
    cooking_en = [i for i, (topic, text) in enumerate(zip(topics, texts, strict=True))
                  if topic == "cooking" and language_of([text]) == "en"]
    summary = extractive_summary(texts, vectors, cooking_en, stats, "en")
    assert summary.value in {texts[i] for i in cooking_en}
    assert {"kitchen", "recipe", "dinner", "cook", "cooked"} & set(summary.tags)
    assert summary.background.startswith(f"{len(cooking_en)} memories about")


def test_chinese_clusters_get_chinese_keys_and_background(corpus):
    vectors, topics, texts = corpus
    stats = TermStats([terms(text) for text in texts])
    travel_zh = [i for i, (topic, text) in enumerate(zip(topics, texts, strict=True))
                 if topic == "travel" and language_of([text]) == "zh"]
    language = language_of([texts[i] for i in travel_zh])
    summary = extractive_summary(texts, vectors, travel_zh, stats, language)
    assert language == "zh"
    assert {"旅行", "酒店", "机票", "飞机"} & set(summary.tags)
    assert summary.background.endswith("的记忆。")
    assert "、" in summary.key
