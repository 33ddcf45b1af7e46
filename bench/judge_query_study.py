"""Study: the accurate judge's e5 features from ``query:`` vectors (the ones topics keep) instead of,
or beside, ``passage:`` ones.

``python bench/judge_query_study.py oof CANDIDATE SEEDS``  out-of-fold probabilities of one
    candidate in training.py's folds (5 group folds per shuffle, same easy negatives, parameters
    and seeds), one file per shuffle, then (with shuffle 0) a fit on all training pairs.
    CANDIDATE: ``v7`` (passage: features, today's recipe), ``B`` (the same 4 features from
    query: vectors), ``A`` (both sets, 8 features). SEEDS: e.g. ``0,1,2``.
``python bench/judge_query_study.py report SEEDS``  per candidate: thresholds by training.py's rule
    on the pooled shuffles, mean redundant / contradictory F1 and wrong % (all, en, zh), and the
    full fit on the 640 LoCoMo training pairs (each pair its own tenant, as eval-judge reads them;
    v7 is the shipped model there).

e5 vectors are cached per distinct text under ``WORK``. Training data only:
data/judge/heldout.jsonl and data/judge/locomo/heldout.jsonl are never read.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import GroupKFold

from mem_assets.dedup import judge_model, training
from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.pair_features import FEATURE_NAMES, PairFeaturizer
from mem_resources.embedder import e5_embed, e5_query_embed, wordllama_embed
from mem_resources.memory_model import normalize_text

WORK = Path("/tmp/judge_query_study")
LOCOMO_TRAIN = Path(__file__).resolve().parents[1] / "data" / "judge" / "locomo" / "train.jsonl"
CHEAP = len(FEATURE_NAMES)
COLUMNS = {"v7": list(range(CHEAP + 4)),
           "B": list(range(CHEAP)) + list(range(CHEAP + 4, CHEAP + 8)),
           "A": list(range(CHEAP + 8))}
"""Columns of the study's matrix (68 cheap, 4 from passage: vectors, 4 from query: vectors)."""


def _vectors(space: str, embed: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]) -> dict:
    path = WORK / f"e5_{space}.pkl"
    store = pickle.loads(path.read_bytes()) if path.exists() else {}
    new = [t for t in dict.fromkeys(texts) if t not in store]
    if new:
        store.update(zip(new, embed(new), strict=True))
        path.write_bytes(pickle.dumps(store))
    return store


def _missing(texts: Sequence[str]) -> np.ndarray:
    raise KeyError(f"{len(texts)} texts have no cached e5 vector")


class StudyFeaturizer:
    """Rows of the 68 cheap features, then the 4 deep ones from passage: and from query: vectors;
    ``columns`` keeps a candidate's (``training.easy_negatives`` calls ``matrix``)."""

    def __init__(self, passage: Mapping[str, np.ndarray], query: Mapping[str, np.ndarray],
                 columns: Sequence[int] = COLUMNS["A"]) -> None:
        self.cheap = PairFeaturizer(wordllama_embed)
        self.passage = PairFeaturizer(wordllama_embed, _missing, passage)
        self.query = PairFeaturizer(wordllama_embed, _missing, query)
        self.columns = list(columns)

    def matrix(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        cheap = self.cheap.cheap(pairs)
        full = np.hstack([self.passage.with_deep(pairs, cheap), self.query.with_deep(pairs, cheap)[:, CHEAP:]])
        return full[:, self.columns]


def _featurizer(rows: list[dict], columns: Sequence[int]) -> StudyFeaturizer:
    texts = [r[side] for r in rows for side in ("a", "b")]
    WORK.mkdir(parents=True, exist_ok=True)
    return StudyFeaturizer(_vectors("passage", e5_embed, texts), _vectors("query", e5_query_embed, texts), columns)


def _both_orders(featurizer: StudyFeaturizer, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    both = featurizer.matrix([(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows])
    return both[:len(rows)], both[len(rows):]


def pipeline_inputs(featurizer: StudyFeaturizer, rows: list[dict]) -> tuple[np.ndarray, ...]:
    """Both orders' features, which pairs the candidate search finds, and which are equal texts."""
    features, swapped = _both_orders(featurizer, rows)
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    return features, swapped, features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD, exact


def oof(candidate: str, seeds: Sequence[int], columns: Sequence[int] | None = None,
        params: Mapping[str, Any] | None = None) -> None:
    """``columns`` / ``params``: the candidate's features and tree parameters, if not ``COLUMNS[candidate]``
    and the accurate recipe's."""
    rows = training.read_pairs(training.TRAIN_FILE)
    featurizer = _featurizer(rows + training.read_pairs(LOCOMO_TRAIN),
                             COLUMNS[candidate] if columns is None else columns)
    features, swapped, candidate_pair, exact = pipeline_inputs(featurizer, rows)
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    params = dict(params or training.PARAMS["accurate"])
    for seed in seeds:
        path = WORK / f"oof_{candidate}_{seed}.npy"
        if path.exists():
            continue
        probabilities = np.zeros((len(rows), len(training.CLASSES)))
        for fit_rows, test_rows in GroupKFold(5, shuffle=True, random_state=seed).split(features, truth, groups):
            negatives = training.easy_negatives([rows[i] for i in fit_rows], featurizer, seed)
            model = training._fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negatives, params)
            probabilities[test_rows] = judge_model.symmetrize(model.predict_proba(features[test_rows]),
                                                              model.predict_proba(swapped[test_rows]),
                                                              training.CLASSES)
            print(f"{candidate} shuffle {seed}: fold done", flush=True)
        np.save(path, training._as_pipeline(probabilities, candidate_pair, exact))
    if 0 in seeds and candidate != "v7" and not (WORK / f"final_{candidate}.pkl").exists():
        model = training._fit(features, swapped, truth, training.easy_negatives(rows, featurizer, 0), params)
        (WORK / f"final_{candidate}.pkl").write_bytes(pickle.dumps(model))


def _locomo(candidate: str, thresholds: Mapping[str, float], columns: Sequence[int]) -> dict:
    rows = training.read_pairs(LOCOMO_TRAIN)
    features, swapped, candidate_pair, exact = pipeline_inputs(_featurizer(rows, columns), rows)
    if candidate == "v7":
        shipped = judge_model.load("accurate")
        probabilities, thresholds = shipped.pair_probabilities(features, swapped), shipped.thresholds
    else:
        model = pickle.loads((WORK / f"final_{candidate}.pkl").read_bytes())
        probabilities = judge_model.symmetrize(model.predict_proba(features), model.predict_proba(swapped),
                                               training.CLASSES)
    probabilities = training._as_pipeline(probabilities, candidate_pair, exact)
    predicted = training.apply_thresholds(probabilities, thresholds["redundant"], thresholds["contradictory"])
    truth = np.array([r["label"] for r in rows])
    return {"pairs": len(rows), "thresholds": dict(thresholds),
            "wrong_merges": int(((predicted == "redundant") & (truth != "redundant")).sum()),
            "wrong_supersedes": int(((predicted == "contradictory") & (truth == "independent")).sum()),
            "redundant_found": int(((predicted == "redundant") & (truth == "redundant")).sum()),
            "redundant": int((truth == "redundant").sum())}


def report(seeds: Sequence[int], candidates: Mapping[str, Sequence[int]] = COLUMNS) -> None:
    """``candidates``: each candidate's feature columns (its out-of-fold files named after it)."""
    rows = training.read_pairs(training.TRAIN_FILE)
    truth = np.array([r["label"] for r in rows])
    languages = np.array([r.get("lang", "") for r in rows])
    out = {}
    for candidate, columns in candidates.items():
        paths = [WORK / f"oof_{candidate}_{seed}.npy" for seed in seeds]
        if not all(p.exists() for p in paths):
            continue
        runs = [np.load(p) for p in paths]
        thresholds = training.choose_thresholds(np.vstack(runs), np.tile(truth, len(runs)))
        scores = []
        for probabilities in runs:
            predicted = training.apply_thresholds(probabilities, thresholds["redundant"], thresholds["contradictory"])
            scores.append({part: training._scores(truth[mask], predicted[mask]) for part, mask in (
                ("all", np.ones(len(rows), bool)), ("en", languages == "en"), ("zh", languages == "zh"))})
        mean = {part: {"redundant_f1": round(float(np.mean([s[part]["redundant"]["f1"] for s in scores])), 3),
                       "contradictory_f1": round(float(np.mean([s[part]["contradictory"]["f1"] for s in scores])), 3),
                       "wrong_percent": round(float(np.mean([s[part]["wrong_percent"] for s in scores])), 2)}
                for part in ("all", "en", "zh")}
        locomo = _locomo(candidate, thresholds, columns) if candidate == "v7" or (WORK / f"final_{candidate}.pkl").exists() \
            else None
        out[candidate] = {"pairs": len(rows), "shuffles": list(seeds), "thresholds": thresholds, "mean": mean,
                          "locomo_train": locomo}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "oof":
        oof(sys.argv[2], [int(s) for s in sys.argv[3].split(",")])
    else:
        report([int(s) for s in sys.argv[2].split(",")])
