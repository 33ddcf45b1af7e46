"""The combined English topic space (WordLlama + e5 ``query:``) on the tuning parts only.

Scores a grid of the combined space's weight and thresholds on the synthetic tuning half, LoCoMo
tune and the growth test's tenant (its assertions checked offline), next to the shipped default,
and applies the rule fixed beforehand in research/studies/combined_space_rule.md. Each text is embedded once
per model; the vectors are cached in ``--cache``. Never given a held-out file.

    python research/studies/combined_space_study.py > /tmp/combined_grid.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mem_assets.reorg.evaluation import EvalItem, evaluate_topics, holdout_split, read_items
from mem_assets.reorg.placement import PlacementParams, plan_cycle
from mem_assets.reorg.placement_thresholds import E5_PARAMS
from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_vectors import combine
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed

ROOT = Path(__file__).resolve().parents[2]
GROWTH_THEMES = ("japan_trip", "dentist", "gardening", "sleep", "guitar")
WEIGHTS = [0.6, 0.7, 0.8]
GRID = {"place_similarity": [0.20, 0.25, 0.30, 0.35], "group_similarity": [0.10, 0.15, 0.20],
        "min_cluster_size": [2, 3]}
THEMED = {"off": {}, "t0.05": {"theme_similarity": 0.05, "min_theme_size": 4},
          "t0.08": {"theme_similarity": 0.08, "min_theme_size": 4}}


class Cached:
    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def tuning_sets() -> dict[str, list[EvalItem]]:
    synthetic = read_items(ROOT / "research/data/eval/topics.jsonl")
    growth = [i for i in synthetic if i.topic in GROWTH_THEMES and i.batch in (1, 2) and language(i.text) == "en"]
    return {"synthetic_tune": holdout_split(synthetic)[0],
            "locomo_tune": read_items(ROOT / "research/data/eval/locomo/topics_tune.jsonl"), "growth": growth}


def heldout_sets() -> dict[str, list[EvalItem]]:
    """The parts a study scores once, only after its choice: never tuned on."""
    synthetic = read_items(ROOT / "research/data/eval/topics.jsonl")
    return {"synthetic_heldout": holdout_split(synthetic)[1],
            "locomo_heldout": read_items(ROOT / "research/data/eval/locomo/topics_heldout.jsonl"),
            "synthetic_whole": synthetic}


def embed_all(texts: list[str], cache: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    if cache.exists():
        data = np.load(cache, allow_pickle=False)
        if list(data["texts"]) == texts:
            return dict(zip(texts, data["main"], strict=True)), dict(zip(texts, data["e5"], strict=True))
    main = np.asarray(WordLlamaEmbedder().embed(texts), dtype=np.float32)
    e5 = np.asarray(e5_query_embed(texts), dtype=np.float32)
    np.savez(cache, texts=np.array(texts), main=main, e5=e5)
    return dict(zip(texts, main, strict=True)), dict(zip(texts, e5, strict=True))


def growth_check(items: Sequence[EvalItem], vectors: dict[str, np.ndarray], params: PlacementParams) -> dict[str, Any]:
    """tests/test_topic_growth.py's assertions on the tree, without Dagster or Neo4j."""
    ids = [f"m{k}" for k in range(len(items))]
    theme = {ids[k]: items[k].topic for k in range(len(items))}
    matrix = {ids[k]: vectors[items[k].text] for k in range(len(items))}

    def lookup(members: Sequence[str]) -> np.ndarray:
        return np.array([matrix[m] for m in members], dtype=np.float32)

    def roots(topics: dict) -> dict[str, str]:
        return {m: (t.parent or tid) for tid, t in topics.items() if t.level == 1 for m in t.children}

    def homes(root_of: dict[str, str]) -> dict[str, set[str]]:
        per_root: dict[str, Counter[str]] = {}
        for m, root in root_of.items():
            per_root.setdefault(root, Counter())[theme[m]] += 1
        out: dict[str, set[str]] = {}
        for root, counts in per_root.items():
            out.setdefault(counts.most_common(1)[0][0], set()).add(root)
        return out

    first = [m for k, m in enumerate(ids) if items[k].batch == 1]
    second = [m for k, m in enumerate(ids) if items[k].batch == 2]
    plan1 = plan_cycle({}, first, lookup(first), ["en"] * len(first), params, lookup)
    pool = sorted(plan1.set_aside) + second
    plan2 = plan_cycle(plan1.topics, pool, lookup(pool), ["en"] * len(pool), params, lookup)
    before, after = roots(plan1.topics), roots(plan2.topics)
    first_homes = homes(before)
    ok = set(first_homes) == set(GROWTH_THEMES) and all(len(h) == 1 for h in first_homes.values())
    placed_new = [m for m in second if m in after]
    at_home = [m for m in placed_new if after[m] in first_homes.get(theme[m], set())]
    per_root: dict[str, Counter[str]] = {}
    for m, root in after.items():
        per_root.setdefault(root, Counter())[theme[m]] += 1
    second_homes = sum(1 for t, hs in first_homes.items() for root, counts in per_root.items()
                       if root not in hs and counts[t] >= 3)
    ok = ok and len(placed_new) >= 0.7 * len(second) and len(at_home) >= 0.9 * max(len(placed_new), 1) \
        and second_homes == 0
    return {"passes": bool(ok), "roots_after_1": len(set(before.values())), "roots_after_2": len(set(after.values())),
            "placed_new": round(len(placed_new) / len(second), 3), "second_homes": second_homes}


def figures(items: Sequence[EvalItem], english: dict[str, np.ndarray], e5: dict[str, np.ndarray],
            params: PlacementParams) -> dict[str, Any]:
    report = evaluate_topics(items, Cached(english), params, ("zh",), E5_PARAMS, Cached(e5).embed,
                             combined_languages=())
    en = report.by_language.get("en")
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "root_purity": report.root_purity, "en_placed": en and en.placed, "en_purity": en and en.purity}


SETS = ("synthetic_tune", "locomo_tune")


def qualifies(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> bool:
    """research/studies/combined_space_rule.md: (a)-(d) on both tuning sets and the growth assertions."""
    for name in SETS:
        got, base = row[name], shipped[name]
        if not (got["placed"] >= 0.95 or got["placed"] > base["placed"]):
            return False
        if got["purity"] < base["purity"] or got["dupes"] or got["split"] > base["split"]:
            return False
    return bool(row["growth"]["passes"])


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["w"], row["themed"], row["place_similarity"], row["group_similarity"], row["min_cluster_size"])


def neighbours(row: dict[str, Any], by_key: dict[tuple[Any, ...], dict[str, Any]]) -> list[dict[str, Any]]:
    """One step up or down in w, place_similarity or group_similarity, the rest fixed."""
    axes = {"w": WEIGHTS, **{k: v for k, v in GRID.items() if k != "min_cluster_size"}}
    out = []
    for axis, values in axes.items():
        at = values.index(row[axis])
        for step in (-1, 1):
            if 0 <= at + step < len(values):
                other = _key({**row, axis: values[at + step]})
                if other in by_key:
                    out.append(by_key[other])
    return out


def gain(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> tuple[float, float]:
    return (round(sum(row[n]["purity"] - shipped[n]["purity"] for n in SETS), 4),
            round(sum(row[n]["placed"] for n in SETS), 4))


def choose(lines: Sequence[dict[str, Any]]) -> None:
    shipped = {line["shipped"]: line for line in lines if "shipped" in line}
    rows = [line for line in lines if "w" in line]
    by_key = {_key(row): row for row in rows}
    passing = [row for row in rows if qualifies(row, shipped)]
    robust = [row for row in passing
              if (near := neighbours(row, by_key)) and 2 * sum(qualifies(n, shipped) for n in near) >= len(near)]
    print(json.dumps({"settings": len(rows), "qualifying": len(passing), "robust": len(robust)}))
    for row in sorted(passing, key=lambda r: gain(r, shipped), reverse=True)[:15]:
        print(json.dumps({"gain": gain(row, shipped), "robust": row in robust, **row}))
    if robust:
        print(json.dumps({"chosen": max(robust, key=lambda r: gain(r, shipped))}))
        return
    fallback = [row for row in rows if all(row[n]["purity"] >= shipped[n]["purity"] and not row[n]["dupes"]
                                           for n in SETS)]
    print(json.dumps({"chosen": None, "opt_in": fallback and max(fallback, key=lambda r: gain(r, shipped))}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/combined_space_vectors.npz"))
    parser.add_argument("--choose", type=Path, help="apply the rule to a finished run's output instead")
    args = parser.parse_args()
    if args.choose:
        choose([json.loads(line) for line in args.choose.read_text().splitlines() if line.strip()])
        return
    sets = tuning_sets()
    texts = sorted({i.text for items in sets.values() for i in items})
    main_vectors, e5_vectors = embed_all(texts, args.cache)
    shipped = PlacementParams()
    for name in ("synthetic_tune", "locomo_tune"):
        print(json.dumps({"shipped": name, **figures(sets[name], main_vectors, e5_vectors, shipped)}), flush=True)
    print(json.dumps({"shipped": "growth", **growth_check(sets["growth"], main_vectors, shipped)}), flush=True)
    for weight in WEIGHTS:
        both = combine(np.array([main_vectors[t] for t in texts]), np.array([e5_vectors[t] for t in texts]), weight)
        combined = dict(zip(texts, both, strict=True))
        for themed, extra in THEMED.items():
            for combo in itertools.product(*GRID.values()):
                setting = dict(zip(GRID, combo, strict=True))
                params = replace(shipped, **setting, **extra)
                row: dict[str, Any] = {"w": weight, "themed": themed, **setting}
                for name in ("synthetic_tune", "locomo_tune"):
                    row[name] = figures(sets[name], combined, e5_vectors, params)
                row["growth"] = growth_check(sets["growth"], combined, params)
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
