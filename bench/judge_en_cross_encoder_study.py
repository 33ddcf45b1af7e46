"""An English cross-encoder stacked into the judge's trees, out of fold on training data only
(rule fixed beforehand: bench/judge_en_cross_encoder_rule.md). Needs the ``training`` extra.

    python bench/judge_en_cross_encoder_study.py --cache /tmp/judge_en_ce > /tmp/judge_en_ce.jsonl

Step 1 fine-tunes bge-small-en-v1.5 as ``cross_encoder_training`` fine-tunes the Chinese model, in
three group folds (~35 min on two cores; the fold models and out-of-fold rows are kept in
``--cache``). Step 2 runs training.py's ``cross_validate`` for judge-v11's features (English pairs
−1 in the cross-encoder columns) and for the candidate (those columns from the English fold models).
Never given a held-out file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import average_precision_score
from sklearn.model_selection import GroupKFold
from tokenizers import Tokenizer

from mem_assets.dedup import cross_encoder, training
from mem_assets.dedup.cross_encoder_training import CrossEncoder, Encoder, fine_tune, onnx_weights, probabilities
from mem_assets.dedup.judge_model import both_chinese
from mem_assets.dedup.pair_features import CROSS_FEATURE_NAMES, PairFeaturizer
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import load_settings

ENGLISH_HEADS = 12
JUDGE_V11 = {"redundant": 0.92, "redundant_zh": 0.88, "contradictory": 0.62}


def english(row: dict) -> bool:
    return bge.pair_language(row["a"], row["b"]) == "en"


def fold_models(rows: list[dict], cache: Path) -> tuple[list[CrossEncoder], Tokenizer, dict[tuple[str, str], list[float]]]:
    """The three fold models (kept in ``cache``) and every English row's out-of-fold probabilities, both orders."""
    jar = bge.jar_path(load_settings().models_dir, "en")
    weights, tok = onnx_weights(jar, "en"), cross_encoder.tokenizer(jar, "en")
    groups = np.array([r["group"] for r in rows])
    models, known = [], {}
    for fold, (fit, test) in enumerate(GroupKFold(3, shuffle=True, random_state=0).split(rows, groups=groups)):
        path = cache / f"fold{fold}.pt"
        if path.exists():
            model = CrossEncoder(Encoder(weights, ENGLISH_HEADS))
            model.load_state_dict(torch.load(path))
            model.eval()
        else:
            model = fine_tune(weights, tok, [rows[i] for i in fit if english(rows[i])], ENGLISH_HEADS)
            torch.save(model.state_dict(), path)
        held = [rows[i] for i in test if english(rows[i])]
        forward = probabilities(model, tok, [(r["a"], r["b"]) for r in held])
        backward = probabilities(model, tok, [(r["b"], r["a"]) for r in held])
        for r, f, b in zip(held, forward, backward, strict=True):
            known[(r["a"], r["b"])], known[(r["b"], r["a"])] = f.tolist(), b.tolist()
        models.append(model)
    return models, tok, known


class WithEnglishCross:
    """A featurizer whose English pairs get the English cross-encoder's columns: a training pair's
    out-of-fold probabilities, any other pair the mean of the fold models."""

    def __init__(self, base: PairFeaturizer, models: list[CrossEncoder], tok: Tokenizer,
                 known: dict[tuple[str, str], list[float]]) -> None:
        self.base, self.models, self.tok, self.known = base, models, tok, known

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        missing = [p for p in dict.fromkeys(pairs) if p not in self.known]
        if missing:
            mean = np.mean([probabilities(m, self.tok, missing) for m in self.models], axis=0)
            self.known.update({p: v.tolist() for p, v in zip(missing, mean, strict=True)})
        return np.array([self.known[p] for p in pairs], dtype=np.float64).reshape(len(pairs), 3)

    def fill(self, pairs: list[tuple[str, str]], matrix: np.ndarray) -> np.ndarray:
        matrix = matrix.copy()
        start = matrix.shape[1] - len(CROSS_FEATURE_NAMES)
        rows = np.flatnonzero(np.array([bge.pair_language(a, b) == "en" for a, b in pairs]))
        if len(rows):
            matrix[rows, start:] = self.score([pairs[i] for i in rows])
        return matrix

    def matrix(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        return self.fill(list(pairs), self.base.matrix(pairs))


def figures(rows: list[dict], runs: list[np.ndarray], thresholds: dict, chinese: np.ndarray) -> dict:
    per_run = training.cv_scores(rows, runs, thresholds, chinese)["runs"]

    def mean(path: tuple[str, ...]) -> float:
        values = []
        for run in per_run:
            value = run
            for key in path:
                value = value[key]
            values.append(value)
        return round(float(np.mean(values)), 4)

    out = {}
    for part in ("all", "en", "zh"):
        out[part] = {"redundant_f1": mean((part, "redundant", "f1")), "redundant_p": mean((part, "redundant", "precision")),
                     "redundant_r": mean((part, "redundant", "recall")),
                     "contradictory_f1": mean((part, "contradictory", "f1")), "wrong_percent": mean((part, "wrong_percent"))}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/judge_en_ce"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    rows = training.read_pairs(training.TRAIN_FILE)
    models, tok, known = fold_models(rows, args.cache)
    print(json.dumps({"step": "fold models", "english_rows": sum(english(r) for r in rows)}), flush=True)
    md = load_settings().models_dir
    base = PairFeaturizer(wordllama_embed, e5_embed, aligned=lambda lang: bge.encoder(md, lang),
                          cross=training.out_of_fold_cross(md))
    pairs = [(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows]
    both = base.matrix(pairs)
    candidate = WithEnglishCross(base, models, tok, known)
    both_e = candidate.fill(pairs, both)
    n = len(rows)
    truth = np.array([r["label"] for r in rows])
    en = np.array([english(r) for r in rows])
    ce_r = both_e[:n, -1][en]
    ce_c = both_e[:n, -3][en]
    chinese = both_chinese(both[:n])
    report: dict = {"english_ce_alone": {
        "redundant_ap": round(float(average_precision_score(truth[en] == "redundant", ce_r)), 4),
        "contradictory_ap": round(float(average_precision_score(truth[en] == "contradictory", ce_c)), 4)}}
    for name, matrix, featurizer in (("baseline", both, base), ("E", both_e, candidate)):
        chosen, runs = training.cross_validate(rows, matrix[:n], matrix[n:], featurizer, training.PARAMS["accurate"])
        p = np.mean(runs, axis=0)
        report[name] = {"cv_thresholds": chosen,
                        "at_judge_v11": figures(rows, runs, JUDGE_V11, chinese),
                        "at_own_cv": figures(rows, runs, {**chosen, "redundant_zh": chosen["redundant"]}, chinese),
                        "english_oof_redundant_ap": round(float(average_precision_score(truth[en] == "redundant",
                                                                                          p[en, 2])), 4),
                        "english_oof_contradictory_ap": round(float(average_precision_score(
                            truth[en] == "contradictory", p[en, 0])), 4)}
        np.save(args.cache / f"runs_{name}.npy", np.stack(runs))
        print(json.dumps({name: report[name]}), flush=True)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
