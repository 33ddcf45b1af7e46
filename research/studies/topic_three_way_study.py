"""Three-way English topic space (WordLlama ⊕ bge-small-en ⊕ e5 ``query:``), tuning parts only,
with the rule fixed beforehand in research/studies/topic_three_way_rule.md.

Reuses the bge study's seams (vectors cached per model, spaces given as they are, its rule and
grid search); nothing in production changes. Never given a held-out file.

    python research/studies/topic_three_way_study.py > /tmp/topics_three_way.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_vectors import combine
from mem_resources.embedder import normalize_rows
from research.studies.topic_bge_study import gain, qualifies, row_of, tuning_vectors

WORDLLAMA_WEIGHT = 0.2
GRID = {"place_similarity": [0.25, 0.30, 0.35], "group_similarity": [0.15, 0.20, 0.25],
        "theme_similarity": [0.08, 0.11]}
SHARES = [0.25, 0.5, 0.75]


def three_way(texts: list[str], vec: dict[str, dict[str, np.ndarray]], share: float) -> dict[str, np.ndarray]:
    """WordLlama, bge, e5 (last: the shared map reads the last 384 floats), each normalised and weighted."""
    weights = {"wordllama": WORDLLAMA_WEIGHT, "bge_en": (1 - WORDLLAMA_WEIGHT) * share,
               "e5": (1 - WORDLLAMA_WEIGHT) * (1 - share)}
    parts = [np.sqrt(w) * normalize_rows(np.array([vec[name][t] for t in texts], dtype=np.float64))
             for name, w in weights.items()]
    return dict(zip(texts, np.hstack(parts).astype(np.float32), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_bge"))
    args = parser.parse_args()
    sets, texts, vec = tuning_vectors(args.cache, ("wordllama", "e5", "bge_en"))
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), 0.8), strict=True))
    shipped = row_of(sets, combined, vec["e5"], COMBINED_PARAMS, E5_PARAMS)
    print(json.dumps({"candidate": "shipped", **shipped}), flush=True)
    axes = {"share": SHARES, **GRID}
    rows: dict[tuple[float, ...], dict] = {}
    for share in SHARES:
        space = three_way(texts, vec, share)
        for combo in itertools.product(*GRID.values()):
            setting = dict(zip(GRID, combo, strict=True))
            row = row_of(sets, space, vec["e5"], replace(COMBINED_PARAMS, **setting), E5_PARAMS)
            row.update(setting={"share": share, **setting}, qualifies=qualifies(row, shipped), gain=gain(row, shipped))
            rows[(share, *combo)] = row
            print(json.dumps(row), flush=True)

    def near(key: tuple[float, ...]) -> list[dict]:
        out = []
        for k, values in enumerate(axes.values()):
            at = values.index(key[k])
            out += [rows[(*key[:k], values[at + step], *key[k + 1:])]
                    for step in (-1, 1) if 0 <= at + step < len(values)]
        return out

    robust = [k for k, r in rows.items() if r["qualifies"] and 2 * sum(n["qualifies"] for n in near(k)) >= len(near(k))]
    best = max(rows, key=lambda k: (rows[k]["gain"], k[1]))
    chosen = max(robust, key=lambda k: (rows[k]["gain"], k[1])) if robust else None
    print(json.dumps({"settings": len(rows), "qualifying": sum(r["qualifies"] for r in rows.values()),
                      "robust": len(robust), "chosen": chosen and rows[chosen]["setting"],
                      "best_gain": rows[best]["setting"], "best_gain_row": rows[best]}), flush=True)


if __name__ == "__main__":
    main()
