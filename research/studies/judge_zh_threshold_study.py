"""Study: judge-v13's thresholds with a redundant threshold of its own for pairs of two Chinese
texts, chosen out of fold by training.py's rule (``research/studies/judge_zh_threshold_rule.md``). Training
data only; prints figures, changes nothing.

    python research/studies/judge_zh_threshold_study.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mem_assets.dedup.offline_judge_model import both_chinese
from research.training import judge_trees as training


def f1_sum(truth: np.ndarray, predicted: np.ndarray) -> float:
    """training._f1_sum without scikit-learn's overhead (the grid has 42,875 points)."""
    total = 0.0
    for label in training.JUDGED:
        tp = np.count_nonzero((predicted == label) & (truth == label))
        denominator = np.count_nonzero(predicted == label) + np.count_nonzero(truth == label)
        total += 2 * tp / denominator if denominator else 0.0
    return total


def choose_three(probabilities: np.ndarray, truth: np.ndarray, chinese: np.ndarray) -> dict:
    """training.choose_thresholds over (redundant, redundant_zh, contradictory)."""
    best: tuple[float, dict] | None = None
    for redundant in training.GRID:
        for redundant_zh in training.GRID:
            for contradictory in training.GRID:
                thresholds = {"redundant": float(redundant), "redundant_zh": float(redundant_zh),
                              "contradictory": float(contradictory)}
                predicted = training.apply_model_thresholds(probabilities, thresholds, chinese)
                if training.wrong_count(truth, predicted) > training.WRONG_BUDGET * len(truth):
                    continue
                score = f1_sum(truth, predicted)
                if best is None or score > best[0]:
                    best = (score, thresholds)
    assert best is not None
    return best[1]


def report(name: str, runs: list[np.ndarray], truth: np.ndarray, chinese: np.ndarray, thresholds: dict) -> None:
    pooled = training.apply_model_thresholds(np.vstack(runs), thresholds, np.tile(chinese, len(runs)))
    tiled = np.tile(truth, len(runs))
    wrong = [training.wrong_count(truth, training.apply_model_thresholds(r, thresholds, chinese)) / len(truth)
             for r in runs]
    zh = np.tile(chinese, len(runs))
    print(f"{name}: {thresholds}; pooled F1 sum {training._f1_sum(tiled, pooled):.4f}; "
          f"redundant {training._scores(tiled, pooled)['redundant']}; wrong per shuffle "
          f"{', '.join(f'{w:.2%}' for w in wrong)} (mean {np.mean(wrong):.2%}); Chinese pairs: "
          f"{training._scores(tiled[zh], pooled[zh])['redundant']}")


def main() -> None:
    rows = training.read_pairs(training.TRAIN_FILE)
    featurizer, features, swapped = training.training_features(rows)
    truth = np.array([r["label"] for r in rows])
    chinese = both_chinese(features)
    baseline, runs = training.cross_validate(rows, features, swapped, featurizer, training.PARAMS["accurate"])
    baseline = {**baseline, "redundant_zh": baseline["redundant"]}
    report("baseline (training.py's rule)", runs, truth, chinese, baseline)
    thresholds = choose_three(np.vstack(runs), np.tile(truth, len(runs)), np.tile(chinese, len(runs)))
    report("Z (own Chinese redundant threshold)", runs, truth, chinese, thresholds)


if __name__ == "__main__":
    main()
