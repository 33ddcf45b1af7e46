"""Study: would more hand-written pairs of today's kinds lift the accurate judge?

``python bench/judge_learning_curve.py FRACTIONS SEEDS``  e.g. ``0.33,0.67,1 0,1,2``: judge-v7's
    recipe out of fold in training.py's 5 group folds per shuffle, each fit part keeping only a
    fraction of its groups (a fixed draw per fold), the test folds whole; then per fraction the
    thresholds by training.py's rule on the pooled shuffles and the mean scores.
``python bench/judge_learning_curve.py locomo``  how many merges the shipped judge makes on the 640
    LoCoMo training pairs, and how many are right, as its redundant threshold rises.

Training data only (data/judge/train.jsonl, data/judge/locomo/train.jsonl); the held-out files are
never read. Out-of-fold probabilities are cached under judge_query_study's ``WORK`` folder.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_query_study import COLUMNS, LOCOMO_TRAIN, WORK, _featurizer, pipeline_inputs

from mem_assets.dedup import judge_model, training

REDUNDANT_THRESHOLDS = (0.80, 0.84, 0.88, 0.90, 0.92, 0.94, 0.96, 0.98)


def curve(fractions: Sequence[float], seeds: Sequence[int]) -> None:
    rows = training.read_pairs(training.TRAIN_FILE)
    featurizer = _featurizer(rows, COLUMNS["v7"])
    features, swapped, candidate, exact = pipeline_inputs(featurizer, rows)
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    for fraction in fractions:
        runs = []
        for seed in seeds:
            path = WORK / f"curve_{fraction:.2f}_{seed}.npy"
            if not path.exists():
                draw = np.random.default_rng(seed)
                probabilities = np.zeros((len(rows), len(training.CLASSES)))
                for fit_rows, test_rows in GroupKFold(5, shuffle=True, random_state=seed).split(features, truth, groups):
                    fit_groups = np.unique(groups[fit_rows])
                    kept = draw.permutation(fit_groups)[:round(fraction * len(fit_groups))]
                    fit_rows = fit_rows[np.isin(groups[fit_rows], kept)]
                    negatives = training.easy_negatives([rows[i] for i in fit_rows], featurizer, seed)
                    model = training._fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negatives,
                                          training.PARAMS["accurate"])
                    probabilities[test_rows] = judge_model.symmetrize(model.predict_proba(features[test_rows]),
                                                                      model.predict_proba(swapped[test_rows]),
                                                                      training.CLASSES)
                np.save(path, training._as_pipeline(probabilities, candidate, exact))
            runs.append(np.load(path))
        thresholds = training.choose_thresholds(np.vstack(runs), np.tile(truth, len(runs)))
        scores = [training._scores(truth, training.apply_thresholds(p, thresholds["redundant"],
                                                                    thresholds["contradictory"])) for p in runs]
        print(json.dumps({"fraction": fraction, "shuffles": list(seeds), "thresholds": thresholds, **{
            f"{label}_{part}": round(float(np.mean([s[label][part] for s in scores])), 3)
            for label in training.JUDGED for part in ("precision", "recall", "f1")},
            "wrong_percent": round(float(np.mean([s["wrong_percent"] for s in scores])), 2)}), flush=True)


def locomo() -> None:
    rows = training.read_pairs(LOCOMO_TRAIN)
    features, swapped, candidate, exact = pipeline_inputs(_featurizer(rows, COLUMNS["v7"]), rows)
    shipped = judge_model.load("accurate")
    probabilities = training._as_pipeline(shipped.pair_probabilities(features, swapped), candidate, exact)
    truth = np.array([r["label"] for r in rows])
    for threshold in REDUNDANT_THRESHOLDS:
        merged = training.apply_thresholds(probabilities, threshold,
                                           shipped.thresholds["contradictory"]) == "redundant"
        print(json.dumps({"redundant_threshold": threshold, "pairs": len(rows), "merges": int(merged.sum()),
                          "right": int((merged & (truth == "redundant")).sum()),
                          "wrong": int((merged & (truth != "redundant")).sum())}))


if __name__ == "__main__":
    if sys.argv[1] == "locomo":
        locomo()
    else:
        curve([float(f) for f in sys.argv[1].split(",")], [int(s) for s in sys.argv[2].split(",")])
