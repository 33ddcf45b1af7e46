"""Study: can the accurate judge skip the cross-encoder where its columns cannot change the decision?

For each pair the cheap gate leaves open, the judge-v13 trees are read with the three
cross-encoder columns unknown (each anywhere in [0, 1]): per tree, the least and largest leaf value
a row can reach, summed per class, bound each class's score, and the softmax bounds each
probability. A pair whose bounds already fix its label (independent: both readings' P(redundant)
and the forward P(contradictory) under their thresholds; redundant: the lower bound clears its
threshold and the contradictory upper bound) would need no cross-encoder run. The same with the
bge-small columns unknown too. Sound, so it cannot move a decision; the question is how many pairs
it decides.

    python research/studies/judge_cross_bounds_study.py [PAIRS.jsonl] [N]

Training data only (default research/data/judge/train.jsonl, 1,500 pairs drawn with seed 0).
Result (2026-12-06, log judge_cross_bounds_study.log): none of 1,065 open pairs is decided; the
bound on P(redundant) is ~0.97 wide on average: the trees split on the cross-encoder columns
near their roots, and each tree takes its own worst case, so without them nearly any answer is
reachable. A joint bound (the same three values in every tree) would have to read the trees in
every cell that the thresholds on those columns cut: more work than the cross-encoder run it
saves (2-4 ms). Not shipped.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.offline_judge_features import ALIGNED_FEATURE_NAMES, CROSS_FEATURE_NAMES

ROOT = Path(__file__).resolve().parents[2]


def score_bounds(model: judge_model.JudgeModel, rows: np.ndarray, free: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Least and largest raw class scores of ``rows`` with the columns ``free`` anywhere in [0, 1]."""
    forest = model._forest
    nodes = len(forest.left)
    reach = np.zeros((nodes, len(rows)), bool)
    reach[forest.roots] = True
    leaf = forest.left == np.arange(nodes)
    unknown = np.zeros(rows.shape[1], bool)
    unknown[free] = True
    frontier, columns = forest.roots, rows.T
    for _ in range(forest.depth):
        inner = frontier[~leaf[frontier]]
        if not len(inner):
            break
        feature, threshold = forest.feature[inner], forest.threshold[inner][:, None]
        open_split = unknown[feature][:, None]
        left = np.where(open_split, threshold >= 0, columns[feature] <= threshold)
        right = np.where(open_split, threshold < 1, columns[feature] > threshold)
        reach[forest.left[inner]] |= reach[inner] & left
        reach[forest.right[inner]] |= reach[inner] & right
        frontier = np.concatenate([forest.left[inner], forest.right[inner]])
    tree_of = np.cumsum(np.isin(np.arange(nodes), forest.roots[1:]))
    leaves = np.flatnonzero(leaf)
    values = forest.value.reshape(-1)[leaves][:, None]
    starts = np.searchsorted(tree_of[leaves], np.arange(len(forest.roots)))
    least = np.minimum.reduceat(np.where(reach[leaves], values, np.inf), starts, axis=0)
    largest = np.maximum.reduceat(np.where(reach[leaves], values, -np.inf), starts, axis=0)
    classes, low, high = len(model.classes), np.tile(model.init, (len(rows), 1)), np.tile(model.init, (len(rows), 1))
    for stage in range(len(model.trees)):
        low = low + model.learning_rate * least[stage * classes:(stage + 1) * classes].T
        high = high + model.learning_rate * largest[stage * classes:(stage + 1) * classes].T
    return low, high


def probability_bounds(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lower, upper = np.empty_like(low), np.empty_like(low)
    for c in range(low.shape[1]):
        others = [k for k in range(low.shape[1]) if k != c]
        lower[:, c] = 1 / (1 + np.exp(high[:, others] - low[:, [c]]).sum(axis=1))
        upper[:, c] = 1 / (1 + np.exp(low[:, others] - high[:, [c]]).sum(axis=1))
    return lower, upper


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "research/data/judge/train.jsonl"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    random.Random(0).shuffle(rows)
    pairs = [(row["a"], row["b"]) for row in rows[:count]]
    model, gate, features_of = judge_model.load(), judge_model.gate(), judge_model.featurizer()
    n = len(pairs)
    cheap = features_of.cheap([*pairs, *((b, a) for a, b in pairs)])
    opened = np.array([i for i, label in enumerate(gate.answers(gate.model.pair_probabilities(cheap[:n], cheap[n:])))
                       if label is None])
    subset = [pairs[i] for i in opened]
    forward = features_of.with_deep(subset, cheap[opened])
    backward = features_of.with_deep([(b, a) for a, b in subset], cheap[opened + n])
    chinese = judge_model.both_chinese(forward)
    exact = judge_model.symmetrize(model.probabilities(forward), model.probabilities(backward), model.classes)
    labels = [label for label, _ in model.decide(exact, chinese)]
    r, c = model.classes.index("redundant"), model.classes.index("contradictory")
    bars, bar_c = judge_model.redundant_thresholds(model.thresholds, chinese), model.thresholds["contradictory"]
    width = forward.shape[1]
    cross = list(range(width - len(CROSS_FEATURE_NAMES), width))
    aligned = list(range(cross[0] - len(ALIGNED_FEATURE_NAMES), cross[0]))
    print(f"{len(subset)} of {n} pairs open behind the gate; labels {dict(Counter(labels))}")
    for name, free in (("cross-encoder unknown", cross), ("bge-small and cross-encoder unknown", aligned + cross)):
        low_f, high_f = probability_bounds(*score_bounds(model, forward, free))
        low_b, high_b = probability_bounds(*score_bounds(model, backward, free))
        redundant_high, contradictory_high = (high_f[:, r] + high_b[:, r]) / 2, high_f[:, c]
        redundant_low = (low_f[:, r] + low_b[:, r]) / 2
        independent = (redundant_high < bars) & (contradictory_high < bar_c)
        redundant = (redundant_low / np.maximum(1, redundant_low + contradictory_high) >= bars) \
            & (redundant_low >= contradictory_high)
        wrong = sum(1 for i, label in enumerate(labels)
                    if (independent[i] and label != "independent") or (redundant[i] and label != "redundant"))
        print(f"{name}: decided independent {int(independent.sum())}, redundant {int(redundant.sum())} of "
              f"{len(subset)}; against the exact label {wrong} (must be 0); mean width of P(redundant) "
              f"{float(np.mean(high_f[:, r] - low_f[:, r])):.3f}")


if __name__ == "__main__":
    main()
