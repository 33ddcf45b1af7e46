"""Study: does judge-v7's recipe gain from more capacity (deeper trees, more stages)?

``python bench/judge_capacity_study.py oof NAME SEEDS``  out-of-fold probabilities of candidate NAME
    (``CANDIDATES``) in training.py's 5 group folds per shuffle, same easy negatives and seeds; then,
    with shuffle 0, a fit on all training pairs.
``python bench/judge_capacity_study.py report SEEDS``  per candidate (and judge-v7, whose out-of-fold
    files judge_query_study.py wrote): thresholds by training.py's rule on the pooled shuffles, mean
    scores (all, en, zh) and the full fit's decisions on the 640 LoCoMo training pairs.

Training data only: the held-out files are never read.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_learning_curve import _pipeline_inputs
from judge_query_study import COLUMNS, LOCOMO_TRAIN, WORK, oof

from mem_assets.dedup import judge_model, training

CANDIDATES = {"D1": training.PARAMS["accurate"] | {"n_estimators": 600},
              "D2": training.PARAMS["accurate"] | {"max_depth": 5}}


def _locomo(name: str, thresholds: dict) -> dict:
    rows = training.read_pairs(LOCOMO_TRAIN)
    features, swapped, candidate, exact = _pipeline_inputs(rows)
    if name == "v7":
        shipped = judge_model.load("accurate")
        probabilities = shipped.pair_probabilities(features, swapped)
    else:
        model = pickle.loads((WORK / f"final_{name}.pkl").read_bytes())
        probabilities = judge_model.symmetrize(model.predict_proba(features), model.predict_proba(swapped),
                                               training.CLASSES)
    predicted = training.apply_thresholds(training._as_pipeline(probabilities, candidate, exact),
                                          thresholds["redundant"], thresholds["contradictory"])
    truth = np.array([r["label"] for r in rows])
    return {"wrong_merges": int(((predicted == "redundant") & (truth != "redundant")).sum()),
            "wrong_supersedes": int(((predicted == "contradictory") & (truth == "independent")).sum()),
            "redundant_found": int(((predicted == "redundant") & (truth == "redundant")).sum())}


def report(seeds: Sequence[int]) -> None:
    rows = training.read_pairs(training.TRAIN_FILE)
    truth = np.array([r["label"] for r in rows])
    languages = np.array([r.get("lang", "") for r in rows])
    for name in ("v7", *CANDIDATES):
        paths = [WORK / f"oof_{name}_{seed}.npy" for seed in seeds]
        if not all(p.exists() for p in paths):
            continue
        runs = [np.load(p) for p in paths]
        thresholds = training.choose_thresholds(np.vstack(runs), np.tile(truth, len(runs)))
        mean = {}
        for part, mask in (("all", np.ones(len(rows), dtype=bool)), ("en", languages == "en"), ("zh", languages == "zh")):
            scores = [training._scores(truth[mask], training.apply_thresholds(
                p[mask], thresholds["redundant"], thresholds["contradictory"])) for p in runs]
            mean[part] = {"redundant_f1": round(float(np.mean([s["redundant"]["f1"] for s in scores])), 3),
                          "contradictory_f1": round(float(np.mean([s["contradictory"]["f1"] for s in scores])), 3),
                          "wrong_percent": round(float(np.mean([s["wrong_percent"] for s in scores])), 2)}
        print(json.dumps({"candidate": name, "thresholds": thresholds, **mean,
                          "locomo_train": _locomo(name, thresholds)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "oof":
        oof(sys.argv[2], [int(s) for s in sys.argv[3].split(",")], COLUMNS["v7"], CANDIDATES[sys.argv[2]])
    else:
        report([int(s) for s in sys.argv[2].split(",")])
