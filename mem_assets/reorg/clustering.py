"""Grouping embeddings into topics: similarity groups, joined themes, leaves of bounded size.

- ``similar_groups``: average-linkage agglomerative clustering cut at a similarity, so the number
  of groups follows the data (blocked by KMeans above a few thousand rows).
- ``themed_groups``: the same tree also cut coarser, so groups come gathered into themes.
- ``merge_groups``: groups whose mean vectors are alike enough are one theme.
- ``leaves_of`` / ``split_to_max``: seed 000 §6.2's recursive KMeans with k = ceil(n / max) until
  every leaf holds at most ``max_cluster_size`` rows (MiniBatchKMeans above one batch).

Everything is seeded and works on rows sorted by the caller, so the same input gives the same plan.
SciPy's and scikit-learn's clustering are imported by the functions that use them: importing them
costs every process about 2 s, and only the runs that cluster need them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

#: A split whose largest part keeps this share of the rows made no progress worth another fit.
_STUCK_SHARE = 0.8
#: Up to this many rows one mini-batch would hold the whole set: plain KMeans does that work faster.
_MINI_BATCH_ROWS = 4096
#: Most clusters one KMeans fit makes while cutting a set down to size.
_BRANCHING = 16
#: A cluster up to this many times the size limit is cut along its principal axis, not refitted:
#: a KMeans fit costs milliseconds even on a few dozen rows, and there are thousands of them.
_CHUNK_FACTOR = 3


def _kmeans_labels(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.exceptions import ConvergenceWarning

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

    Each fit makes at most ``_BRANCHING`` clusters (k = ceil(n / max_size) when smaller): a fit
    costs rows × k, so a large set is cut a few ways at a time instead of into hundreds at once.
    A cluster KMeans barely shrinks (near-identical vectors, where it would peel off one outlier
    per fit) is cut into consecutive chunks instead: its rows are alike anyway.
    """
    if len(rows) <= max_size:
        return [rows]
    k = min(math.ceil(len(rows) / max_size), _BRANCHING)
    labels = _kmeans_labels(vectors[rows], k, seed)
    leaves: list[np.ndarray] = []
    for label in np.unique(labels):
        group = rows[labels == label]
        if len(group) <= max_size:
            leaves.append(group)
        elif len(group) > _STUCK_SHARE * len(rows) or len(group) <= _CHUNK_FACTOR * max_size:
            leaves.extend(_chunks(vectors, group, max_size))
        else:
            leaves.extend(split_to_max(vectors, group, max_size, seed))
    return leaves


def _chunks(vectors: np.ndarray, rows: np.ndarray, max_size: int) -> list[np.ndarray]:
    """Near-equal chunks of at most ``max_size`` rows, in order along the rows' principal axis
    (so each chunk holds neighbours): for a set just over the size, or one KMeans cannot split."""
    centred = vectors[rows] - vectors[rows].mean(axis=0)
    axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    ordered = rows[np.argsort(centred @ axis, kind="stable")]
    return [np.sort(chunk) for chunk in np.array_split(ordered, math.ceil(len(rows) / max_size))]


def purity(assigned: list[np.ndarray], truth: np.ndarray) -> float:
    """Share of rows whose cluster's majority label is their own label (1.0 = clusters never mix)."""
    total = sum(len(rows) for rows in assigned)
    if total == 0:
        return 1.0
    majority = sum(np.unique(truth[rows], return_counts=True)[1].max() for rows in assigned if len(rows))
    return float(majority / total)


def similar_groups(vectors: np.ndarray, min_similarity: float, block_rows: int = 2000,
                   seed: int = 0) -> list[np.ndarray]:
    """Groups in which members are, on average, at least ``min_similarity`` alike (cosine).

    Average-linkage agglomerative clustering cut at ``1 - min_similarity``: the number of groups
    follows the data instead of being chosen up front, and a memory like no other stays alone.
    Above ``block_rows`` rows, KMeans first cuts the rows into blocks of at most that size (the
    linkage needs time and memory quadratic in its input); groups of one theme split across
    blocks are joined again by ``merge_groups``. ``vectors`` are unit rows.
    """
    return [group for theme in themed_groups(vectors, min_similarity, min_similarity, block_rows, seed)
            for group in theme]


def themed_groups(vectors: np.ndarray, group_similarity: float, theme_similarity: float,
                  block_rows: int = 2000, seed: int = 0) -> list[list[np.ndarray]]:
    """``similar_groups`` at ``group_similarity``, gathered by the coarser cut of the same linkage
    tree at ``theme_similarity`` (<= ``group_similarity``): each theme is a list of groups.

    One tree cut twice, so groups nest in themes: tight groups make pure topics, and the looser
    cut says which of them tell one theme (a small tenant's theme is rarely tight as a whole).
    """
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    rows = np.arange(len(vectors))
    if len(rows) < 2:
        return [[rows]] if len(rows) else []
    coarse = min(theme_similarity, group_similarity)
    themes: list[list[np.ndarray]] = []
    for block in split_to_max(vectors, rows, block_rows, seed):
        if len(block) < 2:
            themes.append([block])
            continue
        unit = vectors[block].astype(np.float64)
        distances = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
        np.fill_diagonal(distances, 0.0)
        tree = linkage(squareform(distances, checks=False), method="average")
        fine = fcluster(tree, t=1.0 - group_similarity, criterion="distance")
        broad = fcluster(tree, t=1.0 - coarse, criterion="distance")
        for theme in np.unique(broad):
            in_theme = broad == theme
            themes.append([block[in_theme & (fine == label)] for label in np.unique(fine[in_theme])])
    return themes


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
