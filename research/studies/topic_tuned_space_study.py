"""English topics in a fine-tuned encoder's space (F), placement measured on the tuning parts
only, by the rule fixed beforehand in research/studies/topic_tuned_space_rule.md. Needs the ``research`` extra.

    python research/studies/topic_tuned_space_study.py --scale     # label-free cosine scale (fixes the grid)
    python research/studies/topic_tuned_space_study.py > /tmp/topics_tuned/study.jsonl

F vectors are cross-fitted (research/studies/topic_finetune_study.py's recipe): each LoCoMo tune conversation
embedded by a model trained on the other two, the synthetic tuning half and the growth tenant by
one trained on all of LoCoMo tune; cached in ``--cache``. ``--onnx FILE`` scores an exported
topic encoder instead (T1 and GT unseen by it; T2 seen).
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from mem_assets.reorg.placement import CrossParams, PlacementParams
from mem_assets.reorg.placement_thresholds import E5_PARAMS
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import combine
from mem_resources import bge
from mem_resources.embedder import normalize_rows
from mem_resources.settings import load_settings
from research.studies.topic_bge_study import choose, gain, grid, qualifies, row_of, tuning_vectors, with_e5_tail
from research.studies.topic_finetune_study import cross_fitted
from research.training.bge_finetune import onnx_weights
from research.training.topic_encoder import jar_tokenizer

GRID = {"place_similarity": [0.30, 0.35, 0.40, 0.45, 0.50], "group_similarity": [0.20, 0.25, 0.30, 0.35, 0.40],
        "theme_similarity": [0.10, 0.14], "merge_similarity": [0.50, 0.60]}
#: The defaults F was measured against (English in WordLlama ⊕ e5 at 0.8, commit 51ec800).
BEFORE_WEIGHT = 0.8
BEFORE_COMBINED = PlacementParams(place_similarity=0.25, group_similarity=0.20, min_cluster_size=2,
                                  theme_similarity=0.08, min_theme_size=4)
BEFORE_CROSS = CrossParams(place_similarity=0.25, place_margin=0.05)
F2_GRID = {"place_similarity": [0.30, 0.35, 0.40], "group_similarity": [0.20, 0.25, 0.30],
           "cross_place_similarity": [0.25, 0.30, 0.35], "cross_place_margin": [0.05, 0.08]}


def tuned_vectors(cache: Path, sets: dict) -> dict[str, np.ndarray]:
    path = cache / "tuned_en.npz"
    if path.exists():
        data = np.load(path, allow_pickle=False)
        return dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
    torch.set_num_threads(2)
    english = {name: [i for i, lang in zip(items, languages(i.text for i in items), strict=True) if lang == "en"]
               for name, items in sets.items()}
    jar = bge.jar_path(load_settings().models_dir, "en")
    tuned = cross_fitted(onnx_weights(jar, "en"), jar_tokenizer(jar), english["locomo_tune"],
                         sorted({i.text for name in ("synthetic_tune", "growth") for i in sets[name]}))
    keys = sorted(tuned)
    np.savez(path, texts=np.array(keys), vectors=np.stack([tuned[k] for k in keys]))
    return tuned


def scale(sets: dict, spaces: dict[str, dict[str, np.ndarray]]) -> None:
    """Label-free: quantiles of centred pairwise cosines and the median 2nd / 5th-neighbour cosine,
    English memories per tenant, in each space."""
    for name in ("synthetic_tune", "locomo_tune"):
        items = [i for i, lang in zip(sets[name], languages(i.text for i in sets[name]), strict=True) if lang == "en"]
        for space, vec in spaces.items():
            cos, knn2, knn5 = [], [], []
            for tenant in sorted({i.tenant for i in items}):
                x = np.array([vec[i.text] for i in items if i.tenant == tenant], dtype=np.float64)[:, :-384] \
                    if space != "shipped" else np.array([vec[i.text] for i in items if i.tenant == tenant])
                x = normalize_rows(x - x.mean(axis=0))
                sims = x @ x.T
                cos.append(sims[np.triu_indices(len(x), 1)])
                np.fill_diagonal(sims, -np.inf)
                ordered = -np.sort(-sims, axis=1)
                knn2.append(ordered[:, 1])
                knn5.append(ordered[:, 4])
            c = np.concatenate(cos)
            print(json.dumps({"scale": name, "space": space, "mean": round(float(c.mean()), 3),
                              "std": round(float(c.std()), 3),
                              **{f"q{q}": round(float(np.quantile(c, q)), 3) for q in (0.9, 0.95, 0.97, 0.98, 0.99)},
                              "r2": round(float(np.median(np.concatenate(knn2))), 3),
                              "r5": round(float(np.median(np.concatenate(knn5))), 3)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_tuned"))
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--onnx", type=Path, help="score an exported topic encoder at --setting")
    parser.add_argument("--setting", type=json.loads, default={})
    parser.add_argument("--f2", action="store_true", help="F with the cross-language thresholds gridded too")
    args = parser.parse_args()
    sets, texts, vec = tuning_vectors(args.cache, ("wordllama", "e5"))
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), BEFORE_WEIGHT), strict=True))
    if args.onnx:
        from mem_assets.reorg.topic_encoder import ENCODERS, TopicEncoder

        tuned = dict(zip(texts, TopicEncoder(ENCODERS["en"], args.onnx, check=False).embed(texts), strict=True))
    else:
        tuned = tuned_vectors(args.cache, sets)
    f_space = with_e5_tail(tuned, vec["e5"])
    if args.scale:
        scale(sets, {"shipped": combined, "F": f_space})
        return
    from research.studies import topic_bge_study

    topic_bge_study.CROSS_PARAMS = BEFORE_CROSS
    shipped = row_of(sets, combined, vec["e5"], BEFORE_COMBINED, E5_PARAMS)
    print(json.dumps({"candidate": "shipped", **shipped}), flush=True)
    if args.onnx:
        topic_bge_study.CROSS_PARAMS = CrossParams(**args.setting.pop("cross", {}))
        row = row_of(sets, f_space, vec["e5"], replace(BEFORE_COMBINED, **args.setting), E5_PARAMS)
        print(json.dumps({"candidate": f"F from {args.onnx.name}", "setting": args.setting, **row,
                          "qualifies": qualifies(row, shipped)}), flush=True)
        return
    if not args.f2:
        grid("F", "en", GRID, sets, f_space, vec["e5"], E5_PARAMS, shipped)
        return
    rows: dict[tuple[float, ...], dict] = {}
    for combo in itertools.product(*F2_GRID.values()):
        place, group, cross, margin = combo
        topic_bge_study.CROSS_PARAMS = CrossParams(cross, margin)
        params = replace(BEFORE_COMBINED, place_similarity=place, group_similarity=group, theme_similarity=0.10,
                         merge_similarity=0.50)
        row = row_of(sets, f_space, vec["e5"], params, E5_PARAMS)
        row.update(setting=dict(zip(F2_GRID, combo, strict=True)), qualifies=qualifies(row, shipped),
                   gain=gain(row, shipped))
        rows[combo] = row
        print(json.dumps({"grid": "F2", **row}), flush=True)

    choose("F2", F2_GRID, rows)

if __name__ == "__main__":
    main()
