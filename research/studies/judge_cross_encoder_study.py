"""A fine-tuned bge-small-zh cross-encoder against judge-v8's recipe, on Chinese training pairs only.

Rule fixed before any figure: research/studies/judge_cross_encoder_rule.md. The model and its fine-tuning are
judge-v9's (research/training/judge_cross_encoder.py); this study checks that its torch BERT
matches onnxruntime's hidden states (``parity``). It is fine-tuned on 80 % of the Chinese groups of research/data/judge/train.jsonl and scored on
the other 20 %, next to judge-v8's recipe out of fold (training.py's folds; those models never saw
the rows either). Never given a held-out file.

Needs the ``research`` extra (torch, onnx):

    .venv/bin/pip install -e '.[research]'
    python research/studies/judge_cross_encoder_study.py --oof-cache /tmp/judge_v8_oof.pkl
"""

from __future__ import annotations

import argparse
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import average_precision_score, precision_recall_curve
from sklearn.model_selection import GroupShuffleSplit
from tokenizers import Tokenizer

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup.offline_judge_model import featurizer, symmetrize
from mem_resources import bge
from mem_resources.settings import load_settings
from research.training import judge_cross_encoder as cet
from research.training import judge_trees as training

CLASSES = training.CLASSES
HEADS = {"zh": 8, "en": 12}


def parity(encoder: cet.Encoder, jar: Path, language: bge.Language, tok: Tokenizer) -> float:
    """Largest difference from onnxruntime's hidden states on two texts."""
    import onnxruntime

    with zipfile.ZipFile(jar) as archive:
        session = onnxruntime.InferenceSession(archive.read(f"{bge.JARS[language].stem}.onnx"),
                                               providers=["CPUExecutionProvider"])
    encoded = tok.encode_batch(["用户不喜欢吃香菜", "用户讨厌香菜的味道，吃饭时总让老板别放。"])
    ids, mask = np.array([e.ids for e in encoded]), np.array([e.attention_mask for e in encoded])
    reference = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    encoder.eval()
    with torch.no_grad():
        ours = encoder(torch.tensor(ids), torch.tensor(mask), torch.zeros_like(torch.tensor(ids))).numpy()
    used = mask.astype(bool)
    return float(np.abs(ours - reference)[used].max())


def pair_probabilities(model: cet.CrossEncoder, tok: Tokenizer, rows: list[dict]) -> np.ndarray:
    """As the judge: P(redundant) the mean of both orders, P(contradictory) the forward one."""
    return symmetrize(cet.probabilities(model, tok, [(r["a"], r["b"]) for r in rows]),
                      cet.probabilities(model, tok, [(r["b"], r["a"]) for r in rows]), CLASSES)


def recipe_out_of_fold(rows: list[dict], cache: Path) -> list[np.ndarray]:
    """judge-v8's recipe out of fold on all training pairs (training.cross_validate), cached."""
    if cache.exists():
        return pickle.loads(cache.read_bytes())[1]
    features_of = featurizer(deep=True, models_dir=load_settings().models_dir)
    both = features_of.matrix([(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows])
    thresholds, runs = training.cross_validate(rows, both[:len(rows)], both[len(rows):], features_of,
                                               training.PARAMS["accurate"])
    cache.write_bytes(pickle.dumps((thresholds, runs)))
    return runs


def figures(truth: np.ndarray, probabilities: np.ndarray) -> dict[str, dict[str, float]]:
    out = {}
    for label in ("redundant", "contradictory"):
        positive = truth == label
        score = probabilities[:, CLASSES.index(label)]
        precision, recall, _ = precision_recall_curve(positive, score)
        f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
        out[label] = {"average_precision": round(float(average_precision_score(positive, score)), 4),
                      **{f"best_f1_at_precision_{p}": round(float(np.where(precision >= p, f1, 0).max()), 3)
                         for p in (0.95, 0.90)}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=list(HEADS), default="zh")
    parser.add_argument("--oof-cache", type=Path, default=Path("/tmp/judge_v8_oof.pkl"))
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rows = training.read_pairs(training.TRAIN_FILE)
    ours = np.array([i for i, r in enumerate(rows) if r.get("lang") == args.language])
    fit, held = next(GroupShuffleSplit(1, test_size=0.2, random_state=0).split(
        ours, groups=[rows[i]["group"] for i in ours]))
    fit, held = ours[fit], ours[held]
    jar = bge.jar_path(load_settings().models_dir, args.language)
    tok = cross_encoder.tokenizer(jar, args.language)
    weights = cet.onnx_weights(jar, args.language)
    print(json.dumps({"parity_max_abs_diff": parity(cet.Encoder(weights, HEADS[args.language]), jar, args.language,
                                                    tok),
                      "fit_pairs": len(fit), "scored_pairs": len(held)}), flush=True)
    model = cet.fine_tune(weights, tok, [rows[i] for i in fit], HEADS[args.language])
    truth = np.array([rows[i]["label"] for i in held])
    cross = pair_probabilities(model, tok, [rows[i] for i in held])
    runs = recipe_out_of_fold(rows, args.oof_cache)
    report = {"cross_encoder": figures(truth, cross), "judge_v8_recipe_shuffle_0": figures(truth, runs[0][held]),
              "judge_v8_recipe_mean_of_3": figures(truth, np.mean([r[held] for r in runs], axis=0))}
    report["diagnostic_blend_0.25"] = figures(truth, 0.75 * runs[0][held] + 0.25 * cross)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
