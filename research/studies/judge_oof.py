"""Out-of-fold probabilities of the accurate judge's trees on the training files, for routing studies.

``python -m research.studies.judge_oof``  writes ``/tmp/judgeband/oof.pkl``:
``{file name: {(a, b): [P(contradictory), P(independent), P(redundant)]}}``.

The shipped judge was fitted on ``research/data/judge/train.jsonl``: its probabilities there are
in-sample, sharper than on new pairs. This refits the accurate trees (``judge_trees.PARAMS``) in
five group folds, one shuffle (seed 0; training uses three), and scores each fold's pairs with the
fit that did not see their group. Easy negatives are drawn once from all rows (seed 0) and a fold
keeps those whose two texts both come from its fitting groups. The real-conversation training
pairs (``locomo/train.jsonl``) were never learned by the trees; they get the shipped trees on
features whose cross-encoder columns are out of fold by speaker (as ``judge_trees`` reads them).
Probabilities are symmetrized as the shipped judge does (``symmetrize``).
"""

from __future__ import annotations

import pickle
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_resources.embedder import wordllama_embed
from research.training.judge_trees import (
    CLASSES,
    EASY_NEGATIVES,
    PARAMS,
    REAL_TRAIN_FILE,
    TRAIN_FILE,
    _fit,
    read_pairs,
    symmetrize,
    training_features,
)

OUT = Path("/tmp/judgeband/oof.pkl")


def negative_pairs(rows: list[dict], seed: int = 0) -> list[tuple[str, str]]:
    """``judge_trees.easy_negatives``'s pairs (not their features)."""
    texts: dict[str, tuple[str, str]] = {}
    for row in rows:
        for side in ("a", "b"):
            texts.setdefault(row[side], (row["group"], row.get("lang", "")))
    ordered = sorted(texts)
    vectors = wordllama_embed(ordered)
    groups = np.array([texts[t][0] for t in ordered])
    languages = np.array([texts[t][1] for t in ordered])
    similar = (vectors @ vectors.T >= WORDLLAMA_THRESHOLD) & (groups[:, None] != groups[None, :]) \
        & (languages[:, None] == languages[None, :])
    left, right = np.nonzero(np.triu(similar, 1))
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(len(left))[:EASY_NEGATIVES]
    pairs = [(ordered[left[i]], ordered[right[i]]) for i in sorted(chosen)]
    while len(pairs) < 2 * min(EASY_NEGATIVES, len(left)):
        x, y = rng.integers(len(ordered), size=2)
        if groups[x] != groups[y]:
            pairs.append((ordered[x], ordered[y]))
    return pairs


def main() -> None:
    started = time.monotonic()
    rows, real = read_pairs(TRAIN_FILE), read_pairs(REAL_TRAIN_FILE)
    featurizer, features, swapped = training_features(rows + real)
    print(f"features in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    n = len(rows)
    out: dict[str, dict[tuple[str, str], list[float]]] = {}
    model = judge_model.load("accurate")
    shipped = model.pair_probabilities(features[n:], swapped[n:])
    assert list(model.classes) == CLASSES
    out["locomo"] = {(r["a"], r["b"]): row.tolist() for r, row in zip(real, shipped, strict=True)}
    negatives = negative_pairs(rows)
    negative_features = featurizer.matrix(negatives)
    group_of = {r[side]: r["group"] for r in rows for side in ("a", "b")}
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    probabilities = np.zeros((n, len(CLASSES)))
    for fold, (fit_rows, test_rows) in enumerate(GroupKFold(5, shuffle=True, random_state=0).split(
            features[:n], truth, groups)):
        fitting = set(groups[fit_rows])
        keep = [i for i, (a, b) in enumerate(negatives) if group_of[a] in fitting and group_of[b] in fitting]
        fitted = _fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negative_features[keep],
                      PARAMS["accurate"])
        probabilities[test_rows] = symmetrize(fitted.predict_proba(features[test_rows]),
                                              fitted.predict_proba(swapped[test_rows]), CLASSES)
        print(f"fold {fold} in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    out["hand-written"] = {(r["a"], r["b"]): row.tolist() for r, row in zip(rows, probabilities, strict=True)}
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    main()
