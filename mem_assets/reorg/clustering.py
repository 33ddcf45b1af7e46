"""Partition embeddings into a two-level plan: topics, each made of leaf clusters of bounded size.

Leaves follow seed 000 §6.2: recursive MiniBatchKMeans with k = ceil(n / max_cluster_size) until
every cluster holds at most ``max_cluster_size`` rows (plain KMeans once a set fits in one batch).
Above them, topics: the number of topics is the one with the best silhouette (on a seeded sample)
when there are few enough rows to choose, otherwise enough topics to keep each under
``max_cluster_size²`` rows. A topic with two or more
kept leaves becomes topic → sub-topics → facts; a topic with one leaf is a topic over its facts.
Everything is seeded and works on rows sorted by the caller, so the same input gives the same plan.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

#: A split whose largest part keeps this share of the rows made no progress worth another fit.
_STUCK_SHARE = 0.8
#: Up to this many rows one mini-batch would hold the whole set: plain KMeans does that work faster.
_MINI_BATCH_ROWS = 4096


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
    model: KMeans | MiniBatchKMeans
    if len(vectors) <= _MINI_BATCH_ROWS:
        model = KMeans(n_clusters=k, random_state=seed, n_init=1)
    else:
        model = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=1, batch_size=_MINI_BATCH_ROWS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit_predict(vectors)


def split_to_max(vectors: np.ndarray, rows: np.ndarray, max_size: int, seed: int) -> list[np.ndarray]:
    """Recursive KMeans over ``rows`` until every cluster has at most ``max_size`` rows.

    A cluster KMeans barely shrinks (near-identical vectors, where it would peel off one outlier
    per fit) is cut into consecutive chunks instead: its rows are alike anyway.
    """
    if len(rows) <= max_size:
        return [rows]
    k = math.ceil(len(rows) / max_size)
    labels = _kmeans_labels(vectors[rows], k, seed)
    leaves: list[np.ndarray] = []
    for label in np.unique(labels):
        group = rows[labels == label]
        if len(group) > max_size and len(group) > _STUCK_SHARE * len(rows):
            leaves.extend(_chunks(group, max_size))
        else:
            leaves.extend(split_to_max(vectors, group, max_size, seed))
    return leaves


def _chunks(rows: np.ndarray, max_size: int) -> list[np.ndarray]:
    """Near-equal consecutive chunks of at most ``max_size`` rows."""
    return list(np.array_split(rows, math.ceil(len(rows) / max_size)))


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
    """Topics of kept leaves, plus the leaves under ``min_cluster_size`` that are set aside.

    Fits run on one thread: most are small, where waking a thread pool costs more than the fit,
    and on a shared machine a second thread mostly waits.
    """
    with threadpool_limits(limits=1):
        return _plan(vectors, params)


def _plan(vectors: np.ndarray, params: ClusteringParams) -> ClusterPlan:
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


CLUSTER_COLUMNS = ["memory_type", "topic", "cluster", "status", "size", "node_ids"]


def cluster_table(candidates: pd.DataFrame, params: ClusteringParams) -> pd.DataFrame:
    """One row per leaf cluster (kept or set aside) of each memory type's candidates."""
    rows: list[dict[str, object]] = []
    for memory_type, of_type in candidates.groupby("memory_type", sort=True):
        ids = of_type["id"].to_numpy()
        plan = plan_clusters(np.vstack(of_type["embedding"].to_numpy()), params)
        for t, topic in enumerate(plan.topics):
            rows.extend({"memory_type": memory_type, "topic": f"{memory_type}/t{t}",
                         "cluster": f"{memory_type}/t{t}/c{c}", "status": "kept",
                         "size": len(leaf), "node_ids": ids[leaf].tolist()}
                        for c, leaf in enumerate(topic.leaves))
        rows.extend({"memory_type": memory_type, "topic": f"{memory_type}/set_aside",
                     "cluster": f"{memory_type}/set_aside/c{c}", "status": "set_aside",
                     "size": len(leaf), "node_ids": ids[leaf].tolist()}
                    for c, leaf in enumerate(plan.set_aside))
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)


def similar_groups(vectors: np.ndarray, min_similarity: float, block_rows: int = 2000,
                   seed: int = 0) -> list[np.ndarray]:
    """Groups in which members are, on average, at least ``min_similarity`` alike (cosine).

    Average-linkage agglomerative clustering cut at ``1 - min_similarity``: the number of groups
    follows the data instead of being chosen up front, and a memory like no other stays alone.
    Above ``block_rows`` rows, KMeans first cuts the rows into blocks of about that size (the
    linkage needs memory quadratic in its input); groups of one theme split across blocks are
    joined again by ``merge_groups``. ``vectors`` are unit rows.
    """
    rows = np.arange(len(vectors))
    if len(rows) < 2:
        return [rows] if len(rows) else []
    blocks = [rows]
    if len(rows) > block_rows:
        with threadpool_limits(limits=1):
            labels = _kmeans_labels(vectors, math.ceil(len(rows) / block_rows), seed)
        blocks = [rows[labels == label] for label in np.unique(labels)]
    groups: list[np.ndarray] = []
    for block in blocks:
        if len(block) < 2:
            groups.append(block)
            continue
        tree = linkage(vectors[block].astype(np.float64), method="average", metric="cosine")
        labels = fcluster(tree, t=1.0 - min_similarity, criterion="distance")
        groups.extend(block[labels == label] for label in np.unique(labels))
    return groups


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


def merge_groups(sums: np.ndarray, min_similarity: float, chunk: int = 2048) -> list[list[int]]:
    """Indices of groups to join: rounds of mutual best pairs whose mean vectors (``sums`` rows,
    each a group's vector sum) have cosine >= ``min_similarity``, until no pair is left.

    Mutual best pairs only, so one round never chains A-B-C into a topic A and C would not join.
    """
    members: list[list[int]] = [[i] for i in range(len(sums))]
    current = np.asarray(sums, dtype=np.float64)
    while len(current) > 1:
        unit = _unit(current)
        best = np.empty(len(unit), dtype=np.int64)
        score = np.empty(len(unit))
        for start in range(0, len(unit), chunk):
            sims = unit[start:start + chunk] @ unit.T
            np.fill_diagonal(sims[:, start:start + chunk], -np.inf)
            best[start:start + chunk] = sims.argmax(axis=1)
            score[start:start + chunk] = sims.max(axis=1)
        pairs = [(i, int(j)) for i, j in enumerate(best)
                 if i < j and best[j] == i and score[i] >= min_similarity]
        if not pairs:
            break
        joined = {j for _, j in pairs}
        for i, j in pairs:
            members[i] = members[i] + members[j]
            current[i] = current[i] + current[j]
        keep = [i for i in range(len(members)) if i not in joined]
        members = [members[i] for i in keep]
        current = current[keep]
    return [sorted(group) for group in members]


def leaves_of(vectors: np.ndarray, rows: np.ndarray, max_size: int, min_size: int,
              seed: int) -> list[np.ndarray]:
    """``rows`` cut into leaves of at most ``max_size``; a leaf under ``min_size`` gives its rows to
    the nearest leaf with room (a sub-topic of two memories helps no reader)."""
    leaves = [leaf for leaf in split_to_max(vectors, rows, max_size, seed) if len(leaf)]
    if len(leaves) < 2:
        return leaves
    small = [leaf for leaf in leaves if len(leaf) < min_size]
    kept = [list(leaf) for leaf in leaves if len(leaf) >= min_size]
    if not kept:
        return leaves
    for leaf in small:
        for row in leaf:
            centroids = _unit(np.array([vectors[members].mean(axis=0) for members in kept]))
            order = np.argsort(-(centroids @ vectors[row]), kind="stable")
            target = next((int(k) for k in order if len(kept[k]) < max_size), None)
            if target is None:
                kept.append([row])
            else:
                kept[target].append(row)
    return [np.array(sorted(leaf)) for leaf in kept]
