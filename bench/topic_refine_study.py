"""Refining a cycle's new topics (R) and offering small groups across languages by their mean (G),
on the tuning parts only, against the shipped default, with the rule fixed beforehand in
bench/topic_refine_rule.md; plus the embedding ceiling (KMeans / average linkage with the true
number of labels). Uses the vectors cached by bench/combined_space_study.py (``--cache``; made
there if missing). Never given a held-out file.

    python bench/topic_refine_study.py > /tmp/refine_grid.jsonl
    python bench/topic_refine_study.py --choose /tmp/refine_grid.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from combined_space_study import Cached, embed_all, growth_check, tuning_sets

from mem_assets.reorg.clustering import purity
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import (
    COMBINED_PARAMS,
    CROSS_PARAMS,
    E5_PARAMS,
    CrossParams,
    PlacementParams,
    RefineParams,
)
from mem_assets.reorg.topic_space import languages, normalize
from mem_assets.reorg.vectors import combine

GRIDS: dict[str, dict[str, list[Any]]] = {
    "R": {"rounds": [1, 2, 3, 5], "margin": [0.0, 0.02, 0.04, 0.06, 0.08], "leave_out": [True, False]},
    "G": {"group_similarity": [0.15, 0.20, 0.25, 0.30, 0.35], "group_margin": [0.0, 0.03, 0.05, 0.08]},
}
#: Axes along which grid neighbours are taken (the others are categorical).
NUMERIC = {"R": ("rounds", "margin"), "G": ("group_similarity", "group_margin")}
SETS = ("synthetic_tune", "locomo_tune")


def figures(items: Sequence[EvalItem], main: dict[str, np.ndarray], e5: dict[str, np.ndarray],
            cross: CrossParams, refine: RefineParams | None) -> dict[str, Any]:
    started = time.perf_counter()
    report = evaluate_topics(items, Cached(main), PlacementParams(), ("zh",), E5_PARAMS, Cached(e5).embed,
                             ("en",), COMBINED_PARAMS, cross, refine)
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "root_purity": report.root_purity, "ari": report.ari, "nmi": report.nmi,
            "seconds": round(time.perf_counter() - started, 2),
            **{f"{lang}_purity_placed": (f.purity, f.placed) for lang, f in report.by_language.items()}}


def _centred(vectors: np.ndarray) -> np.ndarray:
    return normalize(vectors.astype(np.float64) - vectors.astype(np.float64).mean(axis=0))


def _partitions(vectors: np.ndarray, k: int) -> dict[str, np.ndarray]:
    from sklearn.cluster import AgglomerativeClustering, KMeans

    k = max(1, min(k, len(vectors)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"kmeans": KMeans(n_clusters=k, random_state=0, n_init=10).fit_predict(vectors),
                "average": AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average").fit_predict(vectors)
                if k > 1 else np.zeros(len(vectors), dtype=np.int64)}


def ceiling(items: Sequence[EvalItem], main: dict[str, np.ndarray], e5: dict[str, np.ndarray],
            leaves: int | None = None, lsa: dict[str, np.ndarray] | None = None,
            lsa_weight: float = 0.0) -> dict[str, Any]:
    """Purity at 100 % placed of a partition with the true number of labels (per tenant; per
    language in its shipped space — en combined, zh e5 — and, across languages, everything in the
    e5 space, each language centred on its own mean). ``leaves``: KMeans with that many clusters
    too (the shipped plan's leaf count, split over tenants and languages by size). ``lsa``: a part
    joined to each language's space with ``lsa_weight`` (bench/topic_vectors_study.py)."""
    truth = np.array([i.topic for i in items], dtype=object)
    langs = languages(i.text for i in items)
    tenants = np.array([i.tenant for i in items], dtype=object)
    out: dict[str, Any] = {}
    for mode in ("per_language", "shared_e5"):
        parts: dict[str, list[np.ndarray]] = {"kmeans": [], "average": [], "kmeans_at_leaves": []}
        for tenant in sorted(set(tenants.tolist())):
            blocks = ([np.flatnonzero((tenants == tenant) & (langs == lang)) for lang in sorted(set(langs.tolist()))]
                      if mode == "per_language" else [np.flatnonzero(tenants == tenant)])
            for rows in (b for b in blocks if len(b)):
                if mode == "per_language":
                    lang = langs[rows[0]]
                    raw = (np.array([e5[items[r].text] for r in rows]) if lang == "zh" else
                           combine(np.array([main[items[r].text] for r in rows]),
                                   np.array([e5[items[r].text] for r in rows])))
                    if lsa is not None:
                        raw = np.hstack([np.sqrt(1 - lsa_weight) * normalize(raw),
                                         np.sqrt(lsa_weight) * np.array([lsa[items[r].text] for r in rows])])
                    vectors = _centred(raw)
                else:
                    vectors = np.zeros((len(rows), 384))
                    for lang in set(langs[rows].tolist()):
                        mine = np.flatnonzero(langs[rows] == lang)
                        vectors[mine] = _centred(np.array([e5[items[rows[m]].text] for m in mine]))
                k = len(set(truth[rows].tolist()))
                for name, labels in _partitions(vectors, k).items():
                    parts[name].extend(rows[labels == c] for c in np.unique(labels))
                if leaves:
                    share = max(1, round(leaves * len(rows) / len(items)))
                    labels = _partitions(vectors, share)["kmeans"]
                    parts["kmeans_at_leaves"].extend(rows[labels == c] for c in np.unique(labels))
        out[mode] = {name: round(purity(p, truth), 4) for name, p in parts.items() if p}
    return out


def qualifies(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> bool:
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    purer = got["purity"] >= base["purity"] + 0.005 and got["placed"] >= base["placed"] - 0.002
    more = got["placed"] >= base["placed"] + 0.005 and got["purity"] >= base["purity"] - 0.002
    if not (purer or more) or got["dupes"] or got["split"] > base["split"]:
        return False
    loc, loc_base = row["locomo_tune"], shipped["locomo_tune"]
    if loc["purity"] < loc_base["purity"] - 0.002 or loc["placed"] < loc_base["placed"] - 0.002:
        return False
    return bool(row["growth"]["passes"])


def gain(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> float:
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    return round(got["purity"] - base["purity"] + got["placed"] - base["placed"], 4)


def _setting(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["candidate"], *(row[axis] for axis in GRIDS[row["candidate"]]))


def neighbours(row: dict[str, Any], by_key: dict[tuple[Any, ...], dict[str, Any]]) -> list[dict[str, Any]]:
    grid = GRIDS[row["candidate"]]
    out = []
    for axis in NUMERIC[row["candidate"]]:
        at = grid[axis].index(row[axis])
        for step in (-1, 1):
            if 0 <= at + step < len(grid[axis]):
                key = _setting({**row, axis: grid[axis][at + step]})
                if key in by_key:
                    out.append(by_key[key])
    return out


def _tie(row: dict[str, Any]) -> tuple[float, ...]:
    if row["candidate"] == "R":
        return (row["margin"], -row["rounds"])
    return (row["group_margin"], row["group_similarity"])


def choose(lines: Sequence[dict[str, Any]]) -> None:
    shipped = {line["shipped"]: line for line in lines if "shipped" in line}
    rows = [line for line in lines if "candidate" in line and line["candidate"] in GRIDS]
    by_key = {_setting(row): row for row in rows}
    for candidate in GRIDS:
        mine = [row for row in rows if row["candidate"] == candidate]
        passing = [row for row in mine if qualifies(row, shipped)]
        robust = [row for row in passing
                  if (near := neighbours(row, by_key)) and 2 * sum(qualifies(n, shipped) for n in near) >= len(near)]
        print(json.dumps({"candidate": candidate, "settings": len(mine), "qualifying": len(passing),
                          "robust": len(robust)}))
        for row in sorted(mine, key=lambda r: (gain(r, shipped), _tie(r)), reverse=True)[:8]:
            print(json.dumps({"gain": gain(row, shipped), "qualifies": row in passing, "robust": row in robust,
                              **row}))
        chosen = max(robust, key=lambda r: (gain(r, shipped), _tie(r))) if robust else None
        print(json.dumps({"chosen": candidate, "setting": chosen and _setting(chosen),
                          "gain": chosen and gain(chosen, shipped)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/combined_space_vectors.npz"))
    parser.add_argument("--choose", type=Path, help="apply the rule to a finished run's output instead")
    parser.add_argument("--combined", help="JSON of one R and one G setting to score together")
    args = parser.parse_args()
    if args.choose:
        choose([json.loads(line) for line in args.choose.read_text().splitlines() if line.strip()])
        return
    sets = tuning_sets()
    texts = sorted({i.text for items in sets.values() for i in items})
    main_vectors, e5_vectors = embed_all(texts, args.cache)
    growth = dict(zip(texts, combine(np.array([main_vectors[t] for t in texts]),
                                     np.array([e5_vectors[t] for t in texts])), strict=True))
    if args.combined:
        setting = json.loads(args.combined)
        cross = CrossParams(CROSS_PARAMS.place_similarity, CROSS_PARAMS.place_margin,
                            setting["group_similarity"], setting["group_margin"])
        refine = RefineParams(setting["rounds"], setting["margin"], setting["leave_out"])
        row = {"candidate": "R+G", **setting}
        for name in SETS:
            row[name] = figures(sets[name], main_vectors, e5_vectors, cross, refine)
        row["growth"] = growth_check(sets["growth"], growth, COMBINED_PARAMS, refine=refine)
        print(json.dumps(row))
        return
    for name in SETS:
        shipped = figures(sets[name], main_vectors, e5_vectors, CROSS_PARAMS, None)
        print(json.dumps({"shipped": name, **shipped}), flush=True)
        print(json.dumps({"ceiling": name, **ceiling(sets[name], main_vectors, e5_vectors, shipped["leaves"])}),
              flush=True)
    print(json.dumps({"shipped": "growth", **growth_check(sets["growth"], growth, COMBINED_PARAMS)}), flush=True)
    for candidate, grid in GRIDS.items():
        for combo in itertools.product(*grid.values()):
            setting = dict(zip(grid, combo, strict=True))
            cross, refine = CROSS_PARAMS, None
            if candidate == "R":
                refine = RefineParams(**setting)
            else:
                cross = CrossParams(CROSS_PARAMS.place_similarity, CROSS_PARAMS.place_margin, **setting)
            row: dict[str, Any] = {"candidate": candidate, **setting}
            for name in SETS:
                row[name] = figures(sets[name], main_vectors, e5_vectors, cross, refine)
            row["growth"] = growth_check(sets["growth"], growth, COMBINED_PARAMS, refine=refine)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
