"""How far topic purity can go with the vectors memtend can run offline (diagnostic; chooses nothing).

    python research/studies/topic_ceiling_study.py [--sets fresh2 locomo_heldout]   # ~5 min for all six sets

One JSON line per labeled set and language, in the space its topics are placed in by default (the
language's topic encoder) and in plain multilingual-e5 ``query:`` space; each tenant is measured on
its own, as placement plans it, and the figures are pooled by memories:

- ``centroid``: each memory classified by the nearest label centroid, the labels known (its own
  label's centroid without it): what placement could reach if every theme already had a perfect topic;
- ``nearest``: how often a memory's nearest other memory shares its label (the purity of a pair);
- ``linkage``: purity of average-linkage clustering of all the tenant's memories at once, with as
  many clusters as the shipped placement's mean leaf topic size gives (no batches, 100 % placed);
- ``shipped``: the shipped placement's purity / share placed (``memtend eval-topics``, defaults).

The centroid and nearest figures are taken in the raw space; ``topic_threshold_study.ceiling``
takes the same two in placement's tenant-centred space (within ±0.02 of these on the fresh sets).

``reader`` is the share of a random sample (``reader_sample.jsonl`` beside a set) that a careful
reader, given only the profile and the themes' one-line scopes, put under the writers' label.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from mem_assets.reorg.clustering import purity
from mem_assets.reorg.evaluation import EvalItem, TopicReport, evaluate_topics, read_items
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import E5_DIMENSION, ENCODER_SPACES, in_spaces, kept_embed
from mem_resources.embedder import HashingEmbedder, normalize_rows

ROOT = Path(__file__).resolve().parents[2]
SETS = {"fresh3": "research/data/eval/fresh3/topics.jsonl", "fresh2": "research/data/eval/fresh2/topics.jsonl", "fresh": "research/data/eval/fresh/topics.jsonl",
        "synthetic": "research/data/eval/topics.jsonl", "locomo_tune": "research/data/eval/locomo/topics_tune.jsonl",
        "locomo_heldout": "research/data/eval/locomo/topics_heldout.jsonl"}


def centroid_accuracy(vectors: np.ndarray, labels: np.ndarray) -> float:
    """Nearest label centroid, each memory left out of its own label's sum."""
    names, index = np.unique(labels, return_inverse=True)
    sums = np.zeros((len(names), vectors.shape[1]))
    np.add.at(sums, index, vectors)
    right = 0
    for row, own in enumerate(index):
        centroids = sums.copy()
        centroids[own] -= vectors[row]
        right += int(np.argmax(normalize_rows(centroids) @ vectors[row]) == own)
    return right / len(labels)


def nearest_agreement(vectors: np.ndarray, labels: np.ndarray) -> float:
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return float(np.mean(labels[similarity.argmax(axis=1)] == labels))


def figures(vectors: np.ndarray, labels: np.ndarray, tenants: np.ndarray, leaf_size: float) -> dict[str, float]:
    """Each tenant on its own, as placement plans it (its labels, its memories, its share of
    clusters), pooled by memories."""
    vectors = normalize_rows(vectors.astype(np.float64))
    sums = {"centroid": 0.0, "nearest": 0.0, "linkage": 0.0}
    for tenant in np.unique(tenants):
        rows = np.flatnonzero(tenants == tenant)
        if len(rows) < 2:
            continue
        part, own = vectors[rows], labels[rows]
        clusters = AgglomerativeClustering(n_clusters=min(max(2, round(len(rows) / leaf_size)), len(rows)),
                                           metric="cosine", linkage="average").fit_predict(part)
        sums["centroid"] += centroid_accuracy(part, own) * len(rows)
        sums["nearest"] += nearest_agreement(part, own) * len(rows)
        sums["linkage"] += purity([np.flatnonzero(clusters == c) for c in np.unique(clusters)], own) * len(rows)
    return {name: round(total / len(labels), 3) for name, total in sums.items()}


def shipped_figures(items: list[EvalItem]) -> tuple[TopicReport, float]:
    """The shipped placement's figures (defaults; the embedder's own space is unused by them), and
    its mean leaf topic size."""
    report = evaluate_topics(items, HashingEmbedder(), PlacementParams())
    placed = sum(f.memories * f.placed for f in report.by_language.values())
    return report, placed / max(report.sub_topics, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=list(SETS))
    chosen = parser.parse_args().sets
    for name in chosen:
        items = read_items(ROOT / SETS[name])
        texts = [item.text for item in items]
        labels = np.asarray([item.topic for item in items])
        tenants = np.asarray([item.tenant for item in items])
        langs = np.asarray(languages(texts))
        kept = kept_embed(texts)
        shipped, leaf_size = shipped_figures(items)
        for lang in sorted(set(langs.tolist())):
            rows = np.flatnonzero(langs == lang)
            if len(rows) < 20:
                continue
            language = shipped.by_language[lang]
            print(json.dumps({
                "set": name, "language": lang, "memories": len(rows), "labels": len(set(zip(tenants[rows], labels[rows], strict=True))),
                "tenants": len(set(tenants[rows])), "clusters": round(len(rows) / leaf_size),
                "encoder": figures(np.stack(in_spaces([ENCODER_SPACES[lang]] * len(rows), [None] * len(rows),
                                                      list(kept[rows]))), labels[rows], tenants[rows], leaf_size),
                "e5": figures(kept[rows][:, :E5_DIMENSION], labels[rows], tenants[rows], leaf_size),
                "shipped": {"purity": language.purity, "placed": language.placed}}), flush=True)
    for name in chosen:
        path = (ROOT / SETS[name]).with_name("reader_sample.jsonl")
        if path.exists():
            sample = [json.loads(line) for line in path.open(encoding="utf-8")]
            agreed = sum(row["topic"] == row["reader_topic"] for row in sample)
            print(json.dumps({"set": name, "reader": {"sample": len(sample), "agreed": agreed,
                                                      "share": round(agreed / len(sample), 3)}}))


if __name__ == "__main__":
    main()
