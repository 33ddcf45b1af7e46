"""Cross-language topics on the tuning parts only: a grid of ``CrossParams`` against the shipped
default, and the rule fixed beforehand in research/studies/cross_language_rule.md. Uses the vectors cached by
research/studies/combined_space_study.py (``--cache``; made there if missing). Never given a held-out file.

    python research/studies/cross_language_study.py > /tmp/cross_grid.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import CrossParams, PlacementParams
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_vectors import combine
from research.studies.combined_space_study import Cached, embed_all, growth_check, tuning_sets

GRID = {"cross_place_similarity": [0.20, 0.25, 0.30, 0.35, 0.40, 0.45],
        "cross_place_margin": [0.0, 0.03, 0.05, 0.08]}
SETS = ("synthetic_tune", "locomo_tune")


def figures(items: Sequence[EvalItem], main: dict[str, np.ndarray], e5: dict[str, np.ndarray],
            cross: CrossParams | None) -> dict[str, Any]:
    report = evaluate_topics(items, Cached(main), PlacementParams(), ("zh",), E5_PARAMS, Cached(e5).embed,
                             ("en",), COMBINED_PARAMS, cross)
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "root_purity": report.root_purity,
            **{f"{lang}_purity_placed": (f.purity, f.placed) for lang, f in report.by_language.items()}}


def qualifies(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> bool:
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    if got["purity"] < base["purity"] or got["placed"] < base["placed"]:
        return False
    if max(got["purity"] - base["purity"], got["placed"] - base["placed"]) < 0.005:
        return False
    if got["dupes"] or got["split"] > base["split"]:
        return False
    loc, loc_base = row["locomo_tune"], shipped["locomo_tune"]
    if loc["purity"] < loc_base["purity"] - 0.002 or loc["placed"] < loc_base["placed"] - 0.002:
        return False
    return bool(row["growth"]["passes"])


def gain(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> tuple[float, float]:
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    return (round(got["purity"] - base["purity"] + got["placed"] - base["placed"], 4), row["cross_place_similarity"],
            row["cross_place_margin"])


def choose(lines: Sequence[dict[str, Any]]) -> None:
    shipped = {line["shipped"]: line for line in lines if "shipped" in line}
    rows = [line for line in lines if "cross_place_similarity" in line]
    key = {(r["cross_place_similarity"], r["cross_place_margin"]): r for r in rows}
    passing = [r for r in rows if qualifies(r, shipped)]

    def near(row: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for axis, values in GRID.items():
            at = values.index(row[axis])
            for step in (-1, 1):
                if 0 <= at + step < len(values):
                    other = {**row, axis: values[at + step]}
                    out.append(key[(other["cross_place_similarity"], other["cross_place_margin"])])
        return out

    robust = [r for r in passing if 2 * sum(qualifies(n, shipped) for n in near(r)) >= len(near(r))]
    print(json.dumps({"settings": len(rows), "qualifying": len(passing), "robust": len(robust)}))
    for row in sorted(passing, key=lambda r: gain(r, shipped), reverse=True):
        print(json.dumps({"gain": gain(row, shipped), "robust": row in robust, **row}))
    print(json.dumps({"chosen": max(robust, key=lambda r: gain(r, shipped)) if robust else None}))


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
    growth = dict(zip(texts, combine(np.array([main_vectors[t] for t in texts]),
                                     np.array([e5_vectors[t] for t in texts]), 0.8), strict=True))
    for name in SETS:
        print(json.dumps({"shipped": name, **figures(sets[name], main_vectors, e5_vectors, None)}), flush=True)
    for combo in itertools.product(*GRID.values()):
        setting = dict(zip(GRID, combo, strict=True))
        cross = CrossParams(place_similarity=setting["cross_place_similarity"],
                            place_margin=setting["cross_place_margin"])
        row: dict[str, Any] = dict(setting)
        for name in SETS:
            row[name] = figures(sets[name], main_vectors, e5_vectors, cross)
        row["growth"] = growth_check(sets["growth"], growth, COMBINED_PARAMS)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
