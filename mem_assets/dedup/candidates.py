"""Candidate pairs for dedup: nearest activated neighbours of each unchecked node, per tenant.

Pure numpy; the graph module loads the vectors. A pair is reported once, ordered by id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mem_assets.dedup.superseding import Recency, when
from mem_resources.embedder import EmbedderResource, HashingEmbedder, WordLlamaEmbedder, normalize_rows

PAIR_COLUMNS = ["left_id", "right_id", "memory_type", "score", "exact"]

#: Cosine threshold per embedder. Neural embedders (OpenAI): the seed's 0.8. The offline hashing
#: embedder is lexical: short value conflicts and negations share few features ("is married" /
#: "is single" scores 0.25), so it gets the highest 0.05 step that keeps every clear-cut
#: redundant/contradictory pair of tests/data/labeled_pairs.jsonl; research/studies/labeled_pairs_study.py prints
#: that calibration. top_k bounds the judge's work either way.
#: WordLlama: chosen on research/data/judge/train.jsonl only, the highest 0.05 step keeping >= 98% of the
#: redundant and >= 94% of the contradictory training pairs as candidates (docs/dedup.md).
NEURAL_THRESHOLD = 0.8
HASHING_THRESHOLD = 0.2
#: Scores are rounded before the top k is taken, and equal scores go to the lower pool position
#: (id order): texts that differ in one word tie exactly, and float noise of the matrix product
#: (which varies with memory layout) must not pick a different neighbour on every run.
SCORE_DECIMALS = 5
WORDLLAMA_THRESHOLD = 0.35


def default_threshold(embedder: EmbedderResource) -> float:
    if isinstance(embedder, WordLlamaEmbedder):
        return WORDLLAMA_THRESHOLD
    return HASHING_THRESHOLD if isinstance(embedder, HashingEmbedder) else NEURAL_THRESHOLD


@dataclass(frozen=True)
class NodeVectors:
    """Activated nodes of one tenant: ids, memory types, payload hashes and unit vectors."""

    ids: list[str]
    memory_types: list[str]
    hashes: list[str]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def _pairs_frame(rows: list[tuple[str, str, str, float, bool]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    if frame.empty:
        return frame.astype({"score": float, "exact": bool})
    frame = frame.sort_values(["exact", "score"], ascending=False)
    frame = frame.drop_duplicates(["left_id", "right_id"]).sort_values(["left_id", "right_id"])
    return frame.reset_index(drop=True)


def largest_per_row(scores: np.ndarray, k: int, decimals: int = SCORE_DECIMALS,
                    block: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and values of each row's k largest scores rounded to ``decimals`` (unordered),
    as if every score had been rounded first.

    A full argpartition over 100k columns costs more than the matrix product itself, so rows are
    cut into blocks: the k largest values lie in the k blocks with the largest maxima (a block
    holding one of them can be beaten only by blocks holding larger values, of which there are
    fewer than k), and only those k x block columns are partitioned exactly. Rounding is monotone,
    so a block's rounded maximum is the maximum of its rounded scores: only the maxima and the
    chosen blocks are rounded (rounding every score cost more than finding the maxima).
    """
    rows, n = scores.shape
    if n <= 4 * k * block:
        scores = scores.round(decimals)
        if k >= n:
            return np.tile(np.arange(n), (rows, 1)), scores
        columns = np.argpartition(scores, n - k, axis=1)[:, n - k:]
        return columns, np.take_along_axis(scores, columns, axis=1)
    whole = n // block
    maxima = scores[:, :whole * block].reshape(rows, whole, block).max(axis=2)
    if whole * block < n:
        maxima = np.hstack([maxima, scores[:, whole * block:].max(axis=1, keepdims=True)])
    maxima = maxima.round(decimals)
    best_blocks = np.argpartition(maxima, maxima.shape[1] - k, axis=1)[:, -k:]
    columns = (best_blocks[:, :, None] * block + np.arange(block)).reshape(rows, -1)
    valid = columns < n
    taken = np.take_along_axis(scores, np.minimum(columns, n - 1), axis=1).round(decimals)
    values = np.where(valid, taken, -np.inf)
    chosen = np.argpartition(values, values.shape[1] - k, axis=1)[:, -k:]
    return np.take_along_axis(columns, chosen, axis=1), np.take_along_axis(values, chosen, axis=1)


def hash_pairs(new: NodeVectors, active_ids: list[str],
               active_hashes: list[str]) -> list[tuple[str, str, str, float, bool]]:
    """Every (new node, other activated node) sharing a payload hash: exact duplicates."""
    by_hash: dict[str, list[str]] = defaultdict(list)
    for node_id, hash_ in zip(active_ids, active_hashes, strict=True):
        if hash_:
            by_hash[hash_].append(node_id)
    return [(*sorted((node_id, other)), memory_type, 1.0, True)
            for node_id, memory_type, hash_ in zip(new.ids, new.memory_types, new.hashes, strict=True)
            for other in (by_hash.get(hash_, ()) if hash_ else ()) if other != node_id]


def find_candidates(new: NodeVectors, active: NodeVectors, threshold: float, top_k: int,
                    chunk_rows: int = 256) -> pd.DataFrame:
    """Pairs (new node, activated node of the same memory type) with cosine >= threshold among
    the new node's top_k neighbours, plus every exact payload-hash duplicate.

    ``active`` is every activated node of the tenant, the new ones included, so the nodes of one
    batch are compared with each other too. Chunked so memory stays at chunk_rows x len(active).
    """
    rows = hash_pairs(new, active.ids, active.hashes)
    active_types = np.asarray(active.memory_types)
    new_types = np.asarray(new.memory_types)
    active_vectors = normalize_rows(active.vectors)
    new_vectors = normalize_rows(new.vectors)
    active_ids = np.asarray(active.ids)
    for memory_type in np.unique(new_types):
        pool = np.flatnonzero(active_types == memory_type)
        queries = np.flatnonzero(new_types == memory_type)
        if len(pool) == 0:
            continue
        pool_vectors = active_vectors[pool]
        pool_ids = active_ids[pool]
        position = {node_id: i for i, node_id in enumerate(pool_ids.tolist())}
        k = min(top_k + 1, len(pool))
        for start in range(0, len(queries), chunk_rows):
            batch = queries[start:start + chunk_rows]
            scores = new_vectors[batch] @ pool_vectors.T
            for row, query in enumerate(batch):
                if (own := position.get(new.ids[query])) is not None:
                    scores[row, own] = -np.inf
            top, top_scores = largest_per_row(scores, k)
            order = np.lexsort((top, -top_scores), axis=1)[:, :top_k]
            for row, query in enumerate(batch):
                for column in order[row]:
                    score = float(top_scores[row, column])
                    if score < threshold:
                        break
                    other = str(pool_ids[top[row, column]])
                    rows.append((*sorted((new.ids[query], other)), str(memory_type), score, False))
    return _pairs_frame(rows)


def index_candidates(new: NodeVectors, active_ids: list[str], active_hashes: list[str],
                     query: Callable[[list[dict], int], list[dict]],
                     threshold: float, top_k: int, max_k: int, batch_rows: int = 500) -> pd.DataFrame:
    """Same pairs as find_candidates, with the neighbours from a vector index.

    ``query(rows, k)`` returns, per row, the tenant's neighbours among the index's global top k
    and that top k's lowest score. A row is asked again with 4x k while it has fewer than top_k
    neighbours and the lowest global score is still >= threshold: another tenant's nodes (or the
    working-memory twins) filling the global top k can never starve a tenant.
    """
    found = hash_pairs(new, active_ids, active_hashes)
    rows = [{"id": i, "memory_type": t, "embedding": v.tolist()}
            for i, t, v in zip(new.ids, new.memory_types, normalize_rows(new.vectors), strict=True)]
    types = {row["id"]: row["memory_type"] for row in rows}
    pending, k = rows, min(max(4 * top_k, 32), max_k)
    while pending:
        retry: set[str] = set()
        answers = [a for lo in range(0, len(pending), batch_rows) for a in query(pending[lo:lo + batch_rows], k)]
        for answer in answers:
            mine = [n for n in answer["neighbours"] if n["score"] >= threshold][:top_k]
            starved = (len(mine) < top_k and answer["returned"] == k and answer["floor"] >= threshold
                       and k < max_k)
            if starved:
                retry.add(answer["id"])
                continue
            found.extend((*sorted((answer["id"], n["id"])), types[answer["id"]], float(n["score"]), False)
                         for n in mine)
        pending = [row for row in pending if row["id"] in retry]
        k = min(4 * k, max_k)
    return _pairs_frame(found)


def orient_pairs(pairs: pd.DataFrame, unchecked: set[str], recencies: dict[str, Recency]) -> pd.DataFrame:
    """Which side of each pair is the new node the judge asks about (``new_id``: the unchecked
    side, the newer one when both are), when each side was stated (``left_at``, ``right_at``) and
    where the other side stands in time (``other_when``: older, newer, same time)."""
    pairs = pairs.copy()
    new_ids, whens = [], []
    for left, right in zip(pairs["left_id"], pairs["right_id"], strict=True):
        if (left in unchecked) != (right in unchecked):
            new = left if left in unchecked else right
        else:
            new = max((left, right), key=lambda node: (recencies[node], node))
        other = right if new == left else left
        new_ids.append(new)
        whens.append(when(recencies[other], recencies[new]))
    pairs["new_id"] = new_ids
    pairs["other_when"] = whens
    for side in ("left", "right"):
        pairs[f"{side}_at"] = [recencies[node].stated_at.isoformat() for node in pairs[f"{side}_id"]]
    return pairs
