"""Rebuild the shipped judge model from research/data/judge/train.jsonl, reproducibly.

``python -m research.training.judge_trees [--model accurate|middle|fast] [--train PATH] [--out PATH]``

``accurate`` (judge-v13, the default) learns from ``FEATURE_NAMES``, ``DEEP_FEATURE_NAMES``
(multilingual-e5), ``ALIGNED_FEATURE_NAMES`` (bge-small token alignment; the jars ``make setup``
fetched) and ``CROSS_FEATURE_NAMES`` (the cross-encoder of the pair's language:
``cross_encoder_training`` makes both first); ``fast`` (judge-v2) from ``FEATURE_NAMES`` only;
``middle`` (judge-mid-v1, the cascade's stage between them) from ``FEATURE_NAMES`` and
``DEEP_FEATURE_NAMES``, with the accurate recipe's tree parameters, one shuffle in step 2
(``MIDDLE_SHUFFLES``) and no step 4.

1. Features of every training pair (``pair_features``), in both orders. A training pair's
   cross-encoder columns are its out-of-fold probabilities (``CROSS_OOF_FILES``, one per language):
   the shipped cross-encoder saw it, and trees fit on those scores would trust them more than they
   deserve on new pairs; every other pair gets the shipped cross-encoder of its language. Which of two redundant or
   independent memories is "newer" is arbitrary, so those pairs are also learned swapped (a
   contradiction keeps its order: ``b`` is the newer value).
   Authored independent pairs are all hard (same person, same topic); a real candidate list also
   holds loosely related facts, and a lexical embedder pairs unrelated ones ("plays chess" / "no
   longer drinks tea"). So each fit also learns, labelled independent, ``EASY_NEGATIVES`` pairs of
   texts from two different groups of its own training rows, same language, that the WordLlama
   candidate search would pair, and as many random pairs across groups. They are never scored.
2. Out-of-fold probabilities from five group folds (a group's sentences never sit on both sides of
   a fold), repeated with three shuffles. Pairs the pipeline would never judge (WordLlama cosine
   under the candidate threshold) count as independent, texts equal after normalisation as
   redundant, as in ``evaluation``; P(redundant) is averaged over both orders as the shipped
   judge does (``JudgeModel.pair_probabilities``). The precision-first thresholds are the pair on a 0.02 grid with
   the best redundant F1 + contradictory F1 whose wrong merges (independent or contradictory
   judged redundant) plus wrong supersedes (independent judged contradictory) stay within
   ``WRONG_BUDGET`` of the out-of-fold pairs.
3. A final fit on all training pairs, exported as JSON trees; the export is checked against
   scikit-learn's own probabilities before it is written.
4. Real conversations (accurate model): hand-written pairs say too little about how often a judge
   merges two true observations of one speaker that merely restate an attitude. So the final fit
   judges the 640 real-conversation training pairs (research/data/judge/locomo/train.jsonl, as the pipeline
   would; their English cross-encoder columns out of fold by speaker, since the shipped English
   cross-encoder learned them) and the redundant threshold is raised on the grid until its wrong merges there stay
   within ``REAL_WRONG_MERGE_BUDGET``. Those pairs are all English, so pairs of two Chinese texts
   (the ``zh`` feature) keep the cross-validated one (``redundant_zh``, since judge-v11).

Fixed seeds throughout: the same data gives the same file. The held-out split is never read here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.metrics import precision_recall_fscore_support
from sklearn.model_selection import GroupKFold

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.offline_judge_features import FEATURE_NAMES, CrossScorers, PairFeaturizer, PairScorer
from mem_assets.dedup.offline_judge_model import (
    FEATURE_SETS,
    MODEL_NAMES,
    both_chinese,
    model_file,
    model_from_json,
    redundant_thresholds,
    symmetrize,
)
from mem_assets.dedup.relations import ModelKind
from mem_resources import bge
from mem_resources.bge import Language
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.memory_model import normalize_text
from mem_resources.settings import DEFAULT_MODELS_DIR, load_settings

TRAIN_FILE = Path(__file__).parents[2] / "research" / "data" / "judge" / "train.jsonl"
REAL_TRAIN_FILE = TRAIN_FILE.parent / "locomo" / "train.jsonl"
CROSS_OOF_FILES: dict[Language, Path] = {"zh": TRAIN_FILE.parent / "cross_encoder_oof.jsonl",
                                         "en": TRAIN_FILE.parent / "cross_encoder_en_oof.jsonl"}
WRONG_BUDGET = 0.015
REAL_WRONG_MERGE_BUDGET = 0.033
"""Wrong merges allowed on the 640 real-conversation training pairs: judge-v7's rate (21)."""
GRID = np.round(np.arange(0.30, 0.99, 0.02), 2)
SHUFFLES = (0, 1, 2)
MIDDLE_SHUFFLES = (0,)
"""The middle model's thresholds only say what it alone would decide (the cascade reads its
probabilities against the middle gate's bounds, ``MIDDLES``): one shuffle of folds is enough."""
EASY_NEGATIVES = 1500
PARAMS = {"accurate": {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.8,
                       "min_samples_leaf": 10, "random_state": 0},
          "middle": {"n_estimators": 300, "max_depth": 4, "learning_rate": 0.05, "subsample": 0.8,
                     "min_samples_leaf": 10, "random_state": 0},
          "fast": {"n_estimators": 200, "max_depth": 3, "learning_rate": 0.05, "subsample": 0.8,
                   "min_samples_leaf": 10, "random_state": 0}}
CLASSES = ["contradictory", "independent", "redundant"]
JUDGED = ("redundant", "contradictory")


def read_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def apply_thresholds(probabilities: np.ndarray, redundant: float | np.ndarray, contradictory: float) -> np.ndarray:
    """Labels as the judge decides; ``redundant`` may be one threshold per row."""
    r, c = probabilities[:, CLASSES.index("redundant")], probabilities[:, CLASSES.index("contradictory")]
    return np.where((r >= redundant) & (r >= c), "redundant",
                    np.where(c >= contradictory, "contradictory", "independent"))


def apply_model_thresholds(probabilities: np.ndarray, thresholds: dict, chinese: np.ndarray) -> np.ndarray:
    """Labels under a model's thresholds (``redundant_zh`` for pairs of two Chinese texts)."""
    return apply_thresholds(probabilities, redundant_thresholds(thresholds, chinese), thresholds["contradictory"])


def wrong_merges(truth: np.ndarray, predicted: np.ndarray) -> int:
    """Independent or contradictory pairs judged redundant."""
    return int(((predicted == "redundant") & (truth != "redundant")).sum())


def wrong_supersedes(truth: np.ndarray, predicted: np.ndarray) -> int:
    """Independent pairs judged contradictory."""
    return int(((predicted == "contradictory") & (truth == "independent")).sum())


def wrong_count(truth: np.ndarray, predicted: np.ndarray) -> int:
    return wrong_merges(truth, predicted) + wrong_supersedes(truth, predicted)


def _f1_sum(truth: np.ndarray, predicted: np.ndarray) -> float:
    return float(precision_recall_fscore_support(truth, predicted, labels=list(JUDGED), zero_division=0)[2].sum())


def choose_thresholds(probabilities: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    best: tuple[float, float, float] | None = None
    for redundant in GRID:
        for contradictory in GRID:
            predicted = apply_thresholds(probabilities, redundant, contradictory)
            if wrong_count(truth, predicted) > WRONG_BUDGET * len(truth):
                continue
            score = _f1_sum(truth, predicted)
            if best is None or score > best[0]:
                best = (score, float(redundant), float(contradictory))
    if best is None:
        raise RuntimeError("no thresholds keep wrong merges + supersedes within the budget")
    return {"redundant": best[1], "contradictory": best[2]}


def easy_negatives(rows: list[dict], featurizer: PairFeaturizer, seed: int) -> np.ndarray:
    """Features of cross-group pairs: similar ones, then as many random ones (see the module doc)."""
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
    return featurizer.matrix(pairs)


def out_of_fold_cross(models_dir: Path) -> CrossScorers:
    """The shipped cross-encoders, but a training pair's out-of-fold probabilities where
    ``CROSS_OOF_FILES`` has them (see the module doc, step 1)."""
    scorers: dict[Language, PairScorer] = {}
    for language, path in CROSS_OOF_FILES.items():
        known: dict[tuple[str, str], list[float]] = {}
        for row in read_pairs(path):
            known[(row["a"], row["b"])], known[(row["b"], row["a"])] = row["forward"], row["backward"]
        scorers[language] = _known_first(known, cross_encoder.load(models_dir, language).probabilities)
    return scorers


def _known_first(known: dict[tuple[str, str], list[float]], shipped: PairScorer) -> PairScorer:
    def score(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        out = np.array([known.get(pair, [np.nan] * 3) for pair in pairs], dtype=np.float64).reshape(len(pairs), 3)
        rest = np.flatnonzero(np.isnan(out[:, 0]))
        if len(rest):
            out[rest] = shipped([pairs[i] for i in rest])
        return out

    return score


def _fit(features: np.ndarray, swapped: np.ndarray, truth: np.ndarray,
         negatives: np.ndarray, params: dict) -> GradientBoostingClassifier:
    both_ways = truth != "contradictory"
    return GradientBoostingClassifier(**params).fit(
        np.vstack([features, swapped[both_ways], negatives]),
        np.concatenate([truth, truth[both_ways], ["independent"] * len(negatives)]))


def _as_pipeline(probabilities: np.ndarray, candidate: np.ndarray, exact: np.ndarray) -> np.ndarray:
    probabilities = probabilities.copy()
    probabilities[~candidate] = [0.0, 1.0, 0.0]
    probabilities[exact] = [0.0, 0.0, 1.0]
    return probabilities


def _scores(truth: np.ndarray, predicted: np.ndarray) -> dict:
    precision, recall, f1, _ = precision_recall_fscore_support(truth, predicted, labels=list(JUDGED),
                                                               zero_division=0)
    return {label: {"precision": round(float(p), 3), "recall": round(float(r), 3), "f1": round(float(f), 3)}
            for label, p, r, f in zip(JUDGED, precision, recall, f1, strict=True)} | {
        "wrong_percent": round(100 * wrong_count(truth, predicted) / len(truth), 2)}


def cross_validate(rows: list[dict], features: np.ndarray, swapped: np.ndarray,
                   featurizer: PairFeaturizer, params: dict,
                   shuffles: Sequence[int] = SHUFFLES) -> tuple[dict, list[np.ndarray]]:
    """Thresholds chosen on the pooled out-of-fold probabilities, and those probabilities (one
    array per shuffle)."""
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    candidate = features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    runs = []
    for seed in shuffles:
        probabilities = np.zeros((len(rows), len(CLASSES)))
        for fit_rows, test_rows in GroupKFold(5, shuffle=True, random_state=seed).split(features, truth, groups):
            negatives = easy_negatives([rows[i] for i in fit_rows], featurizer, seed)
            model = _fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negatives, params)
            probabilities[test_rows] = symmetrize(model.predict_proba(features[test_rows]),
                                                  model.predict_proba(swapped[test_rows]), CLASSES)
        runs.append(_as_pipeline(probabilities, candidate, exact))
    return choose_thresholds(np.vstack(runs), np.tile(truth, len(shuffles))), runs


def cv_scores(rows: list[dict], runs: list[np.ndarray], thresholds: dict, chinese: np.ndarray) -> dict:
    truth = np.array([r["label"] for r in rows])
    languages = np.array([r.get("lang", "") for r in rows])
    per_run = []
    for probabilities in runs:
        predicted = apply_model_thresholds(probabilities, thresholds, chinese)
        per_run.append({"all": _scores(truth, predicted), **{
            lang: _scores(truth[languages == lang], predicted[languages == lang]) for lang in ("en", "zh")}})
    return {"folds": 5, "shuffles": len(runs), "wrong_budget": WRONG_BUDGET, "runs": per_run}


def pipeline_probabilities(model: GradientBoostingClassifier, rows: list[dict],
                           featurizer: PairFeaturizer) -> tuple[np.ndarray, np.ndarray]:
    """``model``'s probabilities for ``rows`` as the pipeline decides (see the module doc, step 2),
    and which rows are pairs of two Chinese texts."""
    both = featurizer.matrix([(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows])
    features, swapped = both[:len(rows)], both[len(rows):]
    probabilities = symmetrize(model.predict_proba(features), model.predict_proba(swapped), CLASSES)
    return _as_pipeline(probabilities, features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD,
                        np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])), both_chinese(features)


def real_conversation_threshold(probabilities: np.ndarray, truth: np.ndarray, chinese: np.ndarray,
                                thresholds: dict) -> dict:
    """The redundant threshold raised on the grid until wrong merges on the real-conversation
    training pairs stay within ``REAL_WRONG_MERGE_BUDGET`` of them; pairs of two Chinese texts
    keep the cross-validated one (step 4 of the module doc)."""
    for redundant in GRID[GRID >= thresholds["redundant"]]:
        raised = {**thresholds, "redundant": float(redundant), "redundant_zh": thresholds["redundant"]}
        if wrong_merges(truth, apply_model_thresholds(probabilities, raised, chinese)) \
                <= REAL_WRONG_MERGE_BUDGET * len(truth):
            return raised
    raise RuntimeError("no redundant threshold keeps real-conversation wrong merges within the budget")


def real_conversation_report(truth: np.ndarray, predicted: np.ndarray) -> dict:
    """What step 4 is judged by on the real-conversation pairs: wrong merges and supersedes, repeats found."""
    return {"pairs": len(truth), "wrong_merges": wrong_merges(truth, predicted),
            "wrong_supersedes": wrong_supersedes(truth, predicted),
            "redundant_found": int(((predicted == "redundant") & (truth == "redundant")).sum()),
            "redundant": int((truth == "redundant").sum())}


def export(model: GradientBoostingClassifier, kind: ModelKind, thresholds: dict, extra: dict) -> str:
    init = model.init_.predict_proba(np.zeros((1, model.n_features_in_)))[0]
    trees = []
    for stage in model.estimators_:
        trees.append([{
            "left": t.tree_.children_left.tolist(), "right": t.tree_.children_right.tolist(),
            "feature": t.tree_.feature.tolist(),
            "threshold": t.tree_.threshold.tolist(),
            "value": [round(float(x), 9) for x in t.tree_.value[:, 0, 0]],
        } for t in stage])
    features = {"accurate": FEATURE_SETS[-1], "middle": FEATURE_SETS[1], "fast": FEATURE_NAMES}[kind]
    if kind == "accurate":
        extra = {**extra, "cross_encoders": {language: cross_encoder.sha256(language) for language in CROSS_OOF_FILES}}
    spec = {"name": MODEL_NAMES[kind], "version": int(MODEL_NAMES[kind].rsplit("-v", 1)[1]), "features": list(features),
            "classes": [str(c) for c in model.classes_],
            "init": np.log(np.clip(init, 1e-12, None)).round(9).tolist(),
            "learning_rate": model.learning_rate, "thresholds": thresholds, "trees": trees, **extra}
    return json.dumps(spec, separators=(",", ":"), sort_keys=True) + "\n"


def training_features(rows: list[dict], kind: ModelKind = "accurate", models_dir: Path = DEFAULT_MODELS_DIR,
                      ) -> tuple[PairFeaturizer, np.ndarray, np.ndarray]:
    """The featurizer of model ``kind`` as training reads it (out-of-fold cross-encoder columns,
    step 1 of the module doc), and the feature rows of ``rows`` in their order and swapped."""
    accurate = kind == "accurate"
    featurizer = PairFeaturizer(wordllama_embed, e5_embed if kind != "fast" else None,
                                aligned=(lambda language: bge.encoder(models_dir, language)) if accurate else None,
                                cross=out_of_fold_cross(models_dir) if accurate else None)
    both = featurizer.matrix([(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows])
    return featurizer, both[:len(rows)], both[len(rows):]


def train(train_file: Path = TRAIN_FILE, kind: ModelKind = "accurate",
          models_dir: Path = DEFAULT_MODELS_DIR) -> tuple[str, dict]:
    rows = read_pairs(train_file)
    accurate = kind == "accurate"
    featurizer, features, swapped = training_features(rows, kind, models_dir)
    truth = np.array([r["label"] for r in rows])
    thresholds, runs = cross_validate(rows, features, swapped, featurizer, PARAMS[kind],
                                      MIDDLE_SHUFFLES if kind == "middle" else SHUFFLES)
    model = _fit(features, swapped, truth, easy_negatives(rows, featurizer, 0), PARAMS[kind])
    if list(model.classes_) != CLASSES:
        raise RuntimeError(f"unexpected classes {model.classes_}")
    real = read_pairs(REAL_TRAIN_FILE)
    real_truth = np.array([r["label"] for r in real])
    real_probabilities, real_chinese = pipeline_probabilities(model, real, featurizer)
    cv_thresholds = thresholds
    if accurate:
        thresholds = real_conversation_threshold(real_probabilities, real_truth, real_chinese, thresholds)
    real_predicted = apply_model_thresholds(real_probabilities, thresholds, real_chinese)
    report = {"train_pairs": len(rows), "easy_negatives": EASY_NEGATIVES, "cv_thresholds": cv_thresholds,
              **cv_scores(rows, runs, thresholds, both_chinese(features)),
              "real_conversation_train": real_conversation_report(real_truth, real_predicted)}
    text = export(model, kind, thresholds, {"training": report})
    exported = model_from_json(text, "check")
    # scikit-learn's trees compare float32 features: a float64 value a hair from a float32 split
    # falls on the other side in the exported trees (two out-of-fold cross-encoder values did)
    seen = features.astype(np.float32).astype(np.float64)
    if not np.allclose(exported.probabilities(seen), model.predict_proba(features), atol=1e-6):
        raise RuntimeError("exported trees disagree with scikit-learn's probabilities")
    return text, {**report, "thresholds": thresholds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODEL_NAMES), default="accurate")
    parser.add_argument("--train", type=Path, default=TRAIN_FILE)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or model_file(args.model)
    text, report = train(args.train, args.model, load_settings().models_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, "utf-8")
    print(json.dumps({**report, "model": str(out), "bytes": len(text.encode())}, indent=1))


if __name__ == "__main__":
    main()
