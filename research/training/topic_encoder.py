"""Fine-tune a topic encoder (bge-small, CLS) and export it for onnxruntime.

``python -m research.training.topic_encoder --language en|zh`` (the ``research`` extra;
~2 min on two cores)

Pretrained encoders rank "says similar words about the same person" above "is about the same
theme". A supervised contrastive loss on labeled themes teaches the second: each memory's
positives are the other memories of its theme in the batch, and each batch is one speaker's
memories, so the negatives are "same person, another theme" — the case placement gets wrong.
The recipe was fixed before any figure (research/studies/topic_finetune_rule.md). English (bge-small-en-v1.5)
is trained on the English memories of the LoCoMo tuning conversations only (26, 30, 41), the space
chosen by research/studies/topic_tuned_space_rule.md; Chinese (bge-small-zh-v1.5) on the Chinese memories of
the training users 4-6, the synthetic set and the first fresh set, chosen by
research/studies/topic_zh_encoder_rule.md — the second fresh set and LoCoMo held-out stay unseen by both.
Fixed seed; exported with the L2-normalised CLS vector as its output, weights quantized to int8.
A new file needs a new name and sha256 in ``topic_encoder.ENCODERS`` (printed here), or the
pipeline refuses it.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from mem_assets.reorg.evaluation import EvalItem, read_items
from mem_assets.reorg.topic_encoder import ENCODERS, INPUTS, MAX_TOKENS, Language
from mem_assets.reorg.topic_space import languages
from mem_resources import bge
from mem_resources.settings import load_settings
from research.training.bge_finetune import Encoder, onnx_weights, train

DATA = Path(__file__).resolve().parents[2] / "research" / "data"
#: What each language's encoder learns from (its memories of that language).
TRAIN_FILES: dict[Language, tuple[Path, ...]] = {
    "en": (DATA / "eval" / "locomo" / "topics_tune.jsonl",),
    "zh": (*(DATA / "topic_training" / f"user_{n}.jsonl" for n in (4, 5, 6)), DATA / "eval" / "topics.jsonl",
           DATA / "eval" / "fresh" / "topics.jsonl")}
HEADS, EPOCHS, BATCH, LEARNING_RATE, TEMPERATURE = ENCODERS["en"].heads, 4, 64, 2e-5, 0.05


def cls_vectors(model: Encoder, tok: Tokenizer, texts: Sequence[str]) -> torch.Tensor:
    encoded = tok.encode_batch(list(texts))
    ids, mask, types = (torch.tensor([getattr(e, f) for e in encoded]) for f in ("ids", "attention_mask", "type_ids"))
    return _Sentence(model)(ids, mask, types)


def supervised_contrastive(z: torch.Tensor, labels: Sequence[str]) -> torch.Tensor:
    """Mean over anchors with a positive of -mean log p(positive) among all other rows."""
    same = torch.tensor([[a == b for b in labels] for a in labels])
    eye = torch.eye(len(labels), dtype=torch.bool)
    logits = (z @ z.T / TEMPERATURE).masked_fill(eye, float("-inf"))
    log_p = logits.log_softmax(dim=1)
    positives = same & ~eye
    anchors = positives.any(dim=1)
    per_anchor = -(log_p.masked_fill(~positives, 0).sum(dim=1)[anchors] / positives.sum(dim=1)[anchors])
    return per_anchor.mean()


def fine_tune(weights: dict[str, np.ndarray], tok: Tokenizer, items: Sequence[EvalItem],
              heads: int = HEADS) -> Encoder:
    """The fixed recipe: one tenant's shuffled memories per batch of <= 64, 4 epochs, seed 0. A
    batch in which no theme occurs twice (a tenant's short last batch) has no positive pair and is
    skipped: its loss would be the mean of nothing (NaN)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = Encoder(weights, heads)
    tenants = sorted({i.tenant for i in items})
    rows_of = {t: [k for k, i in enumerate(items) if i.tenant == t] for t in tenants}

    def batches() -> list[list[int]]:
        out = []
        for t in tenants:
            rows = list(rng.permutation(rows_of[t]))
            out += [rows[s:s + BATCH] for s in range(0, len(rows), BATCH)]
        out = [b for b in out if len({items[k].topic for k in b}) < len(b)]
        return [out[k] for k in rng.permutation(len(out))]

    def loss_of(batch: list[int]) -> torch.Tensor:
        return supervised_contrastive(cls_vectors(model, tok, [items[k].text for k in batch]),
                                      [items[k].topic for k in batch])

    train(model, [batches() for _ in range(EPOCHS)], loss_of, LEARNING_RATE)
    return model.eval()


def embed(model: Encoder, tok: Tokenizer, texts: Sequence[str]) -> dict[str, np.ndarray]:
    with torch.no_grad():
        vectors = np.vstack([cls_vectors(model, tok, texts[s:s + 64]).numpy() for s in range(0, len(texts), 64)])
    return dict(zip(texts, vectors, strict=True))


def of_language(items: Sequence[EvalItem], language: Language) -> list[EvalItem]:
    return [i for i, lang in zip(items, languages(i.text for i in items), strict=True) if lang == language]


def jar_tokenizer(jar: Path, language: Language = "en") -> Tokenizer:
    return bge.tokenizer(jar, bge.JARS[language], MAX_TOKENS)


class _Sentence(torch.nn.Module):
    """What the ONNX file computes: the L2-normalised CLS vector."""

    def __init__(self, model: Encoder) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.model(ids, mask, types)[:, 0], dim=-1)


def export(model: Encoder, path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        float_path = Path(folder) / "float.onnx"
        ids = torch.ones((2, 8), dtype=torch.int64)
        torch.onnx.export(_Sentence(model), (ids, ids, torch.zeros_like(ids)), str(float_path),
                          input_names=list(INPUTS), output_names=["vector"],
                          dynamic_axes={name: {0: "batch", 1: "tokens"} for name in INPUTS},
                          opset_version=17, dynamo=False)
        logging.getLogger().setLevel(logging.WARNING)
        quantize_dynamic(str(float_path), str(path), weight_type=QuantType.QInt8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--language", choices=sorted(ENCODERS), default="en")
    language = parser.parse_args().language
    torch.set_num_threads(2)
    model = ENCODERS[language]
    jar = bge.existing_jar(load_settings().models_dir, language)
    weights, tok = onnx_weights(jar, language), jar_tokenizer(jar, language)
    items = of_language([i for path in TRAIN_FILES[language] for i in read_items(path)], language)
    export(fine_tune(weights, tok, items, model.heads), model.file)
    model.tokenizer.write_text(bge.tokenizer_json(jar, bge.JARS[language]), "utf-8")
    print(json.dumps({"model": str(model.file), "bytes": model.file.stat().st_size, "memories": len(items),
                      "sha256": bge.file_sha256(model.file)}))


if __name__ == "__main__":
    main()
