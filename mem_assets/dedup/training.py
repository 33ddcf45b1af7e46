"""Rebuild the shipped judge model from data/judge/train.jsonl, reproducibly.

``python -m mem_assets.dedup.training [--train PATH] [--out PATH]``

1. Features of every training pair (``pair_features``).
2. Five-fold cross-validated probabilities, folds by authored group (a group's sentences never sit
   on both sides of a fold), to choose the precision-first thresholds: the pair of thresholds on
   a 0.05 grid with the best redundant F1 + contradictory F1 whose wrong merges (independent or
   contradictory judged redundant) plus wrong supersedes (independent judged contradictory) stay
   within ``WRONG_BUDGET`` of the training pairs.
3. A final fit on all training pairs, exported as JSON trees; the export is checked against
   scikit-learn's own probabilities before it is written.

Fixed seeds throughout: the same data gives the same file. The held-out split is never read here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.metrics import f1_score
from sklearn.model_selection import GroupKFold, cross_val_predict

from mem_assets.dedup.judge_model import MODEL_FILE, feature_matrix, model_from_json
from mem_assets.dedup.pair_features import FEATURE_NAMES

TRAIN_FILE = Path(__file__).parents[2] / "data" / "judge" / "train.jsonl"
WRONG_BUDGET = 0.02
GRID = np.round(np.arange(0.40, 0.96, 0.05), 2)
PARAMS = {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
          "random_state": 0}


def read_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def apply_thresholds(probabilities: np.ndarray, classes: list[str], redundant: float,
                     contradictory: float) -> np.ndarray:
    r, c = probabilities[:, classes.index("redundant")], probabilities[:, classes.index("contradictory")]
    return np.where((r >= redundant) & (r >= c), "redundant",
                    np.where(c >= contradictory, "contradictory", "independent"))


def wrong_rate(truth: np.ndarray, predicted: np.ndarray) -> float:
    merges = ((predicted == "redundant") & (truth != "redundant")).sum()
    supersedes = ((predicted == "contradictory") & (truth == "independent")).sum()
    return float(merges + supersedes) / len(truth)


def choose_thresholds(probabilities: np.ndarray, classes: list[str], truth: np.ndarray) -> dict:
    best: tuple[float, float, float] | None = None
    for redundant in GRID:
        for contradictory in GRID:
            predicted = apply_thresholds(probabilities, classes, redundant, contradictory)
            if wrong_rate(truth, predicted) > WRONG_BUDGET:
                continue
            score = f1_score(truth, predicted, labels=["redundant", "contradictory"], average="macro")
            if best is None or score > best[0]:
                best = (score, float(redundant), float(contradictory))
    if best is None:
        raise RuntimeError("no thresholds keep wrong merges + supersedes within the budget")
    return {"redundant": best[1], "contradictory": best[2]}


def export(model: GradientBoostingClassifier, thresholds: dict, extra: dict) -> str:
    init = model.init_.predict_proba(np.zeros((1, len(FEATURE_NAMES))))[0]
    trees = []
    for stage in model.estimators_:
        trees.append([{
            "left": t.tree_.children_left.tolist(), "right": t.tree_.children_right.tolist(),
            "feature": t.tree_.feature.tolist(),
            "threshold": [round(float(x), 9) for x in t.tree_.threshold],
            "value": [round(float(x), 9) for x in t.tree_.value[:, 0, 0]],
        } for t in stage])
    spec = {"version": 1, "features": list(FEATURE_NAMES), "classes": [str(c) for c in model.classes_],
            "init": np.log(np.clip(init, 1e-12, None)).round(9).tolist(),
            "learning_rate": model.learning_rate, "thresholds": thresholds, "trees": trees, **extra}
    return json.dumps(spec, separators=(",", ":"), sort_keys=True) + "\n"


def train(train_file: Path = TRAIN_FILE) -> tuple[str, dict]:
    rows = read_pairs(train_file)
    features = feature_matrix([(r["a"], r["b"]) for r in rows])
    truth = np.array([r["label"] for r in rows])
    groups = [r.get("group", f"{r['a']}\x1f{r['b']}") for r in rows]
    model = GradientBoostingClassifier(**PARAMS)
    cv = cross_val_predict(model, features, truth, groups=groups, cv=GroupKFold(5), method="predict_proba")
    classes = sorted(set(truth))
    thresholds = choose_thresholds(cv, classes, truth)
    predicted = apply_thresholds(cv, classes, thresholds["redundant"], thresholds["contradictory"])
    report = {
        "train_pairs": len(rows),
        "cv_f1": dict(zip(["redundant", "contradictory"], np.round(f1_score(
            truth, predicted, labels=["redundant", "contradictory"], average=None), 3).tolist(), strict=True)),
        "cv_wrong_rate": round(wrong_rate(truth, predicted), 4),
    }
    model.fit(features, truth)
    text = export(model, thresholds, {"training": report})
    exported = model_from_json(text, "check")
    if not np.allclose(exported.probabilities(features), model.predict_proba(features), atol=1e-6):
        raise RuntimeError("exported trees disagree with scikit-learn's probabilities")
    return text, {**report, "thresholds": thresholds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=TRAIN_FILE)
    parser.add_argument("--out", type=Path, default=MODEL_FILE)
    args = parser.parse_args()
    text, report = train(args.train)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(json.dumps({**report, "model": str(args.out), "bytes": len(text.encode())}, indent=1))


if __name__ == "__main__":
    main()
