"""An English cross-encoder stacked into the judge's trees, out of fold on training data only
(rules fixed beforehand: research/studies/judge_en_cross_encoder_rule.md, candidate E; with ``--real``,
research/studies/judge_en_real_cross_encoder_rule.md, candidate ER). Needs the ``research`` extra.

    python research/studies/judge_en_cross_encoder_study.py --cache /tmp/judge_en_ce > /tmp/judge_en_ce.jsonl
    python research/studies/judge_en_cross_encoder_study.py --real --cache /tmp/judge_en_real_ce > /tmp/judge_en_real_ce.jsonl

Step 1 fine-tunes bge-small-en-v1.5 as ``cross_encoder_training`` fine-tunes the Chinese model, in
three group folds (~27 min on two cores; the fold models are kept in ``--cache``; with ``--real`` each also learns
the real-conversation training pairs of the other speakers). Step 2 runs training.py's
``cross_validate`` for judge-v11's features (English pairs −1 in the cross-encoder columns; not
with ``--real``) and for the candidate (those columns from the English fold models); with
``--real``, step 3 is training.py's final fit and step 4 on the real pairs. Never given a
held-out file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import average_precision_score
from tokenizers import Tokenizer

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup.offline_judge_features import CROSS_FEATURE_NAMES, PairFeaturizer
from mem_assets.dedup.offline_judge_model import both_chinese
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import load_settings
from research.training import judge_cross_encoder as cross_encoder_training
from research.training import judge_trees as training
from research.training.judge_cross_encoder import CrossEncoder, onnx_weights, probabilities

JUDGE_V11 = {"redundant": 0.92, "redundant_zh": 0.88, "contradictory": 0.62}


def english(row: dict) -> bool:
    return bge.pair_language(row["a"], row["b"]) == "en"


def fold_models(rows: list[dict], cache: Path, real: list[dict] | None = None,
                ) -> tuple[list[CrossEncoder], Tokenizer, dict[tuple[str, str], list[float]]]:
    """The three fold models (``cross_encoder_training.fold_models``, kept in ``cache``) and every
    English row's out-of-fold probabilities, both orders. With ``real``, fold k also fits the real
    pairs outside real fold k (by speaker)."""
    jar = bge.jar_path(load_settings().models_dir, "en")
    weights, tok = onnx_weights(jar, "en"), cross_encoder.tokenizer(jar, "en")
    models, known = [], {}
    for model, held in cross_encoder_training.fold_models(rows, weights, tok, "en", real or (), cache):
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


def real_conversations(rows: list[dict], matrix: np.ndarray, featurizer: WithEnglishCross, chosen: dict,
                       real: list[dict]) -> dict:
    """training.py's final fit and step 4 on the real pairs (their out-of-speaker columns)."""
    n = len(rows)
    truth = np.array([r["label"] for r in rows])
    model = training._fit(matrix[:n], matrix[n:], truth, training.easy_negatives(rows, featurizer, 0),
                          training.PARAMS["accurate"])
    real_truth = np.array([r["label"] for r in real])
    real_p, chinese = training.pipeline_probabilities(model, real, featurizer)
    try:
        shipped = training.real_conversation_threshold(real_p, real_truth, chinese, chosen)
    except RuntimeError as error:
        return {"error": str(error)}
    alone = featurizer.score([(r["a"], r["b"]) for r in real])[:, -1]
    redundant = real_truth == "redundant"
    return {"thresholds": shipped,
            **training.real_conversation_report(real_truth, training.apply_model_thresholds(real_p, shipped, chinese)),
            "cross_encoder_alone_redundant_ap": round(float(average_precision_score(redundant, alone)), 4),
            "trees_redundant_ap": round(float(average_precision_score(
                redundant, real_p[:, training.CLASSES.index("redundant")])), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/judge_en_ce"))
    parser.add_argument("--real", action="store_true",
                        help="candidate ER: the fold models also learn the real-conversation training pairs "
                             "(research/studies/judge_en_real_cross_encoder_rule.md); the baseline is not run again")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    rows = training.read_pairs(training.TRAIN_FILE)
    real = training.read_pairs(training.REAL_TRAIN_FILE) if args.real else None
    models, tok, known = fold_models(rows, args.cache, real)
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
    print(json.dumps(report), flush=True)
    runs_of = (("ER", both_e, candidate),) if args.real else (("baseline", both, base), ("E", both_e, candidate))
    for name, matrix, featurizer in runs_of:
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
        if real:
            shipped = real_conversations(rows, matrix, featurizer, chosen, real)
            report[name]["real_conversation_train"] = shipped
            if "thresholds" in shipped:
                report[name]["at_shipped"] = figures(rows, runs, shipped["thresholds"], chinese)
            print(json.dumps({name: {k: report[name].get(k) for k in ("real_conversation_train", "at_shipped")}}),
                  flush=True)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
