"""Study: judge-v13's features under an averaged (B3) or deeper (D5) tree ensemble, out of fold on
training data only (``research/studies/judge_tree_capacity_rule.md``). Prints figures, changes nothing.

    python research/studies/judge_tree_capacity_study.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mem_assets.dedup.offline_judge_features import FEATURE_NAMES
from mem_assets.dedup.offline_judge_model import both_chinese, symmetrize
from mem_resources.memory_model import normalize_text
from research.training import judge_trees as training

BASE = training.PARAMS["accurate"]
FITS = {"seed0": BASE, "seed1": {**BASE, "random_state": 1}, "seed2": {**BASE, "random_state": 2},
        "depth5": {**BASE, "max_depth": 5}}
CANDIDATES = {"baseline": ("seed0",), "B3": ("seed0", "seed1", "seed2"), "D5": ("depth5",)}


def _fold(features, swapped, truth, negatives, fit_rows, test_rows, params) -> np.ndarray:
    model = training._fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negatives, params)
    return model.predict_proba(features[test_rows]), model.predict_proba(swapped[test_rows])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = training.read_pairs(training.TRAIN_FILE)
    featurizer, features, swapped = training.training_features(rows)
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    chinese = both_chinese(features)
    candidate = features[:, FEATURE_NAMES.index("sem_cos")] >= training.WORDLLAMA_THRESHOLD
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    folds = [(seed, fit_rows, test_rows, training.easy_negatives([rows[i] for i in fit_rows], featurizer, seed))
             for seed in training.SHUFFLES
             for fit_rows, test_rows in GroupKFold(5, shuffle=True, random_state=seed).split(features, truth, groups)]
    tasks = [(name, k) for name in FITS for k in range(len(folds))]
    results = Parallel(n_jobs=args.jobs, verbose=5)(
        delayed(_fold)(features, swapped, truth, folds[k][3], folds[k][1], folds[k][2], FITS[name])
        for name, k in tasks)
    by_task = dict(zip(tasks, results, strict=True))
    baseline_sum = None
    for candidate_name, fit_names in CANDIDATES.items():
        runs = []
        for seed in training.SHUFFLES:
            probabilities = np.zeros((len(rows), len(training.CLASSES)))
            for k, (fold_seed, _, test_rows, _) in enumerate(folds):
                if fold_seed != seed:
                    continue
                forward = np.mean([by_task[(name, k)][0] for name in fit_names], axis=0)
                backward = np.mean([by_task[(name, k)][1] for name in fit_names], axis=0)
                probabilities[test_rows] = symmetrize(forward, backward, training.CLASSES)
            runs.append(training._as_pipeline(probabilities, candidate, exact))
        pooled_truth = np.tile(truth, len(runs))
        thresholds = training.choose_thresholds(np.vstack(runs), pooled_truth)
        thresholds["redundant_zh"] = thresholds["redundant"]
        pooled = training.apply_model_thresholds(np.vstack(runs), thresholds, np.tile(chinese, len(runs)))
        f1_sum = training._f1_sum(pooled_truth, pooled)
        baseline_sum = baseline_sum if baseline_sum is not None else f1_sum
        wrong = [training.wrong_count(truth, training.apply_model_thresholds(r, thresholds, chinese)) / len(truth)
                 for r in runs]
        zh = np.tile(chinese, len(runs))
        scores = training._scores(pooled_truth, pooled)
        print(f"{candidate_name}: R {thresholds['redundant']} C {thresholds['contradictory']}; pooled F1 sum "
              f"{f1_sum:.4f} ({f1_sum - baseline_sum:+.4f}); redundant {scores['redundant']}; "
              f"contradictory {scores['contradictory']}; wrong per shuffle "
              f"{', '.join(f'{w:.2%}' for w in wrong)} (mean {np.mean(wrong):.2%}); Chinese redundant "
              f"{training._scores(pooled_truth[zh], pooled[zh])['redundant']}", flush=True)


if __name__ == "__main__":
    main()
