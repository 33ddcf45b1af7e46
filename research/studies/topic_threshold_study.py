"""Why topic placement misses on a labeled tuning file, and which thresholds would do better.

Tuning data only (never a held-out file). Three parts, each printed as JSON lines:

1. ``ceiling``: per topic space (WordLlama, multilingual-e5 ``query:``), how often a memory's
   nearest neighbour among its tenant's memories shares its label, and how often the centroid of
   its own label (leave-one-out) is the nearest label centroid — both in the topic space
   (tenant mean of the label centroids subtracted). Placement cannot be purer than the space
   separates themes, unless its topics are smaller than the themes.
2. ``unplaced``: with the shipped thresholds, the memories left unplaced, their reasons, the size
   of the group they were in, the cosine to their nearest topic and whether that topic is
   mostly of their own label.
3. ``grid`` and ``fold``: ``place_similarity`` × ``group_similarity`` × ``min_cluster_size`` in
   each space, on every conversation (tenant prefix ``locomo-<conv>-``) alone; the rule "purest
   setting with >= 95 % placed, no near-duplicate pair and at most 1.75 leaf topics per label" is
   applied to all conversations and, leave one conversation out, to the others and scored on the
   one left out.

    python research/studies/topic_threshold_study.py research/data/eval/locomo/topics_tune.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from mem_assets.reorg import evaluation
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics, read_items
from mem_assets.reorg.placement import CyclePlan, PlacementParams
from mem_assets.reorg.placement_thresholds import E5_PARAMS
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed, normalize_rows

SPACES = ("wordllama", "e5")
GRID = {"place_similarity": [0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5],
        "group_similarity": [0.1, 0.15, 0.2, 0.25, 0.3], "min_cluster_size": [2, 3]}
MIN_PLACED = 0.95
MAX_LEAVES_PER_LABEL = 1.75


class Cached:
    """An embedder answering from precomputed vectors (each text is embedded once per space)."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.vectors = dict(zip(texts, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def ceiling(items: Sequence[EvalItem], vectors: np.ndarray) -> dict[str, float]:
    labels = np.array([i.topic for i in items], dtype=object)
    tenants = np.array([i.tenant for i in items], dtype=object)
    neighbour = centroid = 0
    for tenant in sorted(set(tenants.tolist())):
        rows = np.flatnonzero(tenants == tenant)
        x, y = vectors[rows].astype(np.float64), labels[rows]
        names = sorted(set(y.tolist()))
        sums = np.array([x[y == n].sum(axis=0) for n in names])
        counts = np.array([(y == n).sum() for n in names])
        mean = (sums / counts[:, None]).mean(axis=0)
        projected = normalize_rows(x - mean)
        sims = projected @ projected.T
        np.fill_diagonal(sims, -np.inf)
        neighbour += int((y[sims.argmax(axis=1)] == y).sum())
        for k in range(len(rows)):
            own = names.index(y[k])
            loo_sums, loo_counts = sums.copy(), counts.copy()
            loo_sums[own] -= x[k]
            loo_counts[own] -= 1
            centroids = normalize_rows(loo_sums / np.maximum(loo_counts, 1)[:, None] - mean)
            centroids[loo_counts == 0] = 0
            centroid += int(int((centroids @ projected[k]).argmax()) == own)
    return {"nearest_neighbour_same_label": round(neighbour / len(items), 4),
            "own_label_centroid_nearest": round(centroid / len(items), 4)}


def unplaced(items: Sequence[EvalItem], embedder: Cached) -> dict[str, Any]:
    """Re-runs the shipped setting, keeping every plan, to read the set-aside details."""
    plans: list[CyclePlan] = []
    original = evaluation.plan_cycle

    def keep(*args: Any, **kwargs: Any) -> CyclePlan:
        plan = original(*args, **kwargs)
        plans.append(plan)
        return plan

    evaluation.plan_cycle = keep
    try:
        evaluate_topics(items, embedder, PlacementParams(), (), combined_languages=())
    finally:
        evaluation.plan_cycle = original
    aside: dict[str, Any] = {}
    topics: dict[str, Any] = {}
    for plan in plans:
        topics.update(plan.topics)
        aside.update(plan.set_aside)
        for topic in plan.topics.values():
            for member in topic.children if topic.level == 1 else []:
                aside.pop(member, None)
    label = {f"m{i}": item.topic for i, item in enumerate(items)}

    def majority(tid: str | None) -> str | None:
        if tid is None or tid not in topics:
            return None
        topic = topics[tid]
        members = topic.children if topic.level == 1 else [m for c in topic.children for m in topics[c].children]
        return Counter(label[m] for m in members).most_common(1)[0][0]

    sims = np.array([a.similarity for a in aside.values()], dtype=np.float64)
    return {"unplaced": len(aside), "of": len(items), "reasons": Counter(a.reason for a in aside.values()),
            "group_sizes": Counter(a.group_size for a in aside.values()),
            "nearest_cosine_quartiles": np.round(np.nanquantile(sims, [0, .25, .5, .75, 1]), 3).tolist(),
            "nearest_topic_is_own_label": sum(majority(a.nearest_topic) == label[m] for m, a in aside.items())}


def scores(items: Sequence[EvalItem], space: str, embedders: dict[str, Cached], **changes: Any) -> dict[str, Any]:
    if space == "wordllama":
        report = evaluate_topics(items, embedders[space], replace(PlacementParams(), **changes), (),
                                 combined_languages=())
    else:
        report = evaluate_topics(items, embedders["wordllama"], PlacementParams(), ("en", "zh"),
                                 replace(E5_PARAMS, **changes), embedders["e5"].embed, combined_languages=())
    placed = round(report.placed * report.memories)
    return {"memories": report.memories, "placed": placed, "pure": round(report.purity * placed),
            "leaves": report.sub_topics, "labels": report.labels, "dupes": report.near_duplicate_pairs}


def pooled(per: dict[str, dict[str, Any]], convs: Sequence[str]) -> dict[str, Any]:
    total = {key: sum(per[c][key] for c in convs) for key in ("memories", "placed", "pure", "leaves", "labels", "dupes")}
    return {"placed": round(total["placed"] / total["memories"], 4),
            "purity": round(total["pure"] / max(total["placed"], 1), 4),
            "leaves": total["leaves"], "labels": total["labels"], "near_duplicate_pairs": total["dupes"]}


def choose(rows: Sequence[dict[str, Any]], convs: Sequence[str]) -> dict[str, Any] | None:
    fit = [r for r in rows if (p := pooled(r["per"], convs))["placed"] >= MIN_PLACED
           and p["near_duplicate_pairs"] == 0 and p["leaves"] <= MAX_LEAVES_PER_LABEL * p["labels"]]
    return max(fit, key=lambda r: pooled(r["per"], convs)["purity"]) if fit else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("items", type=Path)
    items = read_items(parser.parse_args().items)
    texts = [i.text for i in items]
    embed: dict[str, Callable[[Sequence[str]], np.ndarray]] = {
        "wordllama": WordLlamaEmbedder().embed, "e5": e5_query_embed}
    embedders = {space: Cached(texts, np.asarray(embed[space](texts), dtype=np.float32)) for space in SPACES}
    for space in SPACES:
        print(json.dumps({"ceiling": space, **ceiling(items, embedders[space].embed(texts))}))
    print(json.dumps({"unplaced": "wordllama, shipped", **unplaced(items, embedders["wordllama"])}, default=dict))
    convs = sorted({i.tenant.split("-")[1] for i in items})
    names = {f.name for f in fields(PlacementParams)}
    assert set(GRID) <= names
    for space in SPACES:
        rows = []
        for combo in itertools.product(*GRID.values()):
            setting = dict(zip(GRID, combo, strict=True))
            per = {c: scores([i for i in items if i.tenant.startswith(f"locomo-{c}-")], space, embedders, **setting)
                   for c in convs}
            rows.append({"setting": setting, "per": per})
            print(json.dumps({"grid": space, **setting, **pooled(per, convs)}))
        best = choose(rows, convs)
        print(json.dumps({"chosen": space, "setting": best and best["setting"],
                          **(pooled(best["per"], convs) if best else {})}))
        for left_out in convs:
            rest = [c for c in convs if c != left_out]
            pick = choose(rows, rest)
            print(json.dumps({"fold": space, "left_out": left_out, "setting": pick and pick["setting"],
                              "on_rest": pick and pooled(pick["per"], rest),
                              "on_left_out": pick and pooled(pick["per"], [left_out])}))


if __name__ == "__main__":
    main()
