"""Partition embeddings into a two-level plan: topics, each made of leaf clusters of bounded size.

Leaves follow seed 000 §6.2: recursive MiniBatchKMeans with k = ceil(n / max_cluster_size) until
every cluster holds at most ``max_cluster_size`` rows. Above them, topics: the number of topics is
the one with the best silhouette (on a seeded sample) when there are few enough rows to choose,
otherwise enough topics to keep each under ``max_cluster_size²`` rows. A topic with two or more
kept leaves becomes topic → sub-topics → facts; a topic with one leaf is a topic over its facts.
Everything is seeded and works on rows sorted by the caller, so the same input gives the same plan.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.cluster import MiniBatchKMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

#: Below this many rows a fit is cheaper on one thread than the cost of waking a thread pool.
_SINGLE_THREAD_ROWS = 20_000


@dataclass(frozen=True)
class ClusteringParams:
    max_cluster_size: int = 20
    min_cluster_size: int = 5
    max_topics: int = 12
    seed: int = 0
    silhouette_sample: int = 2000


@dataclass
class TopicPlan:
    """Kept leaf clusters of one topic, as row-index arrays."""

    leaves: list[np.ndarray] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(leaf) for leaf in self.leaves)


@dataclass
class ClusterPlan:
    topics: list[TopicPlan]
    set_aside: list[np.ndarray]

    @property
    def leaves(self) -> list[np.ndarray]:
        return [leaf for topic in self.topics for leaf in topic.leaves]


def _kmeans_labels(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    model = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=3,
                            batch_size=min(1024, len(vectors)))
    threads = 1 if len(vectors) < _SINGLE_THREAD_ROWS else None
    with warnings.catch_warnings(), threadpool_limits(limits=threads):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit_predict(vectors)


def split_to_max(vectors: np.ndarray, rows: np.ndarray, max_size: int, seed: int) -> list[np.ndarray]:
    """Recursive MiniBatchKMeans over ``rows`` until every cluster has at most ``max_size`` rows.

    Rows KMeans cannot separate (identical vectors) are cut into consecutive chunks instead.
    """
    if len(rows) <= max_size:
        return [rows]
    k = math.ceil(len(rows) / max_size)
    labels = _kmeans_labels(vectors[rows], k, seed)
    groups = [rows[labels == label] for label in np.unique(labels)]
    if len(groups) == 1:
        return [rows[i:i + max_size] for i in range(0, len(rows), max_size)]
    return [leaf for group in groups for leaf in split_to_max(vectors, group, max_size, seed)]


def topic_count(vectors: np.ndarray, params: ClusteringParams) -> int:
    """Enough topics to bound their size; among small candidates, the best-silhouette count."""
    n = len(vectors)
    k_min = max(2, math.ceil(n / params.max_cluster_size ** 2))
    k_max = min(params.max_topics, n // max(params.min_cluster_size, 1))
    if k_max <= k_min:
        return k_min
    rng = np.random.default_rng(params.seed)
    sample = np.sort(rng.choice(n, size=min(n, params.silhouette_sample), replace=False))
    best_k, best_score = k_min, -2.0
    for k in range(k_min, k_max + 1):
        labels = _kmeans_labels(vectors[sample], k, params.seed)
        if len(np.unique(labels)) < 2:
            continue
        score = silhouette_score(vectors[sample], labels, metric="cosine")
        if score > best_score:
            best_k, best_score = k, score
    return best_k


def plan_clusters(vectors: np.ndarray, params: ClusteringParams) -> ClusterPlan:
    """Topics of kept leaves, plus the leaves under ``min_cluster_size`` that are set aside."""
    rows = np.arange(len(vectors))
    if len(rows) <= params.max_cluster_size:
        top_groups = [rows]
    else:
        labels = _kmeans_labels(vectors, topic_count(vectors, params), params.seed)
        top_groups = [
            group
            for label in np.unique(labels)
            for group in split_to_max(vectors, rows[labels == label],
                                      params.max_cluster_size ** 2, params.seed)
        ]
    topics: list[TopicPlan] = []
    set_aside: list[np.ndarray] = []
    for group in top_groups:
        topic = TopicPlan()
        for leaf in split_to_max(vectors, group, params.max_cluster_size, params.seed):
            (topic.leaves if len(leaf) >= params.min_cluster_size else set_aside).append(leaf)
        if topic.leaves:
            topics.append(topic)
    return ClusterPlan(topics=topics, set_aside=set_aside)


def purity(assigned: list[np.ndarray], truth: np.ndarray) -> float:
    """Share of rows whose cluster's majority label is their own label (1.0 = clusters never mix)."""
    total = sum(len(rows) for rows in assigned)
    if total == 0:
        return 1.0
    majority = sum(np.unique(truth[rows], return_counts=True)[1].max() for rows in assigned if len(rows))
    return float(majority / total)
