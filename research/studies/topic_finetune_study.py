"""A topic encoder fine-tuned on labeled real conversations: the ceiling diagnostic of
research/studies/topic_finetune_rule.md (fixed beforehand). Tuning parts only; needs the ``research`` extra.

    python research/studies/topic_finetune_study.py --cache /tmp/topics_ft > /tmp/topics_ft.jsonl

bge-small-en-v1.5 (CLS) is fine-tuned with a supervised contrastive loss on the LoCoMo tune
memories, one tenant per batch. LoCoMo figures come from leave-one-conversation-out models, the
synthetic tuning half from a model trained on all of LoCoMo tune; no figure is on text the model
saw. Printed: per part and space (shipped combined, raw bge-small-en, the fine-tuned T), English
memories only, the own-label centroid / nearest neighbour rates and the true-k purity.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer

from mem_assets.reorg.evaluation import EvalItem
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import combine
from mem_resources import bge
from mem_resources.settings import load_settings
from research.studies.topic_bge_study import ceiling as true_k_ceiling
from research.studies.topic_bge_study import tuning_vectors
from research.studies.topic_threshold_study import ceiling as centroid_ceiling
from research.training.bge_finetune import Encoder, onnx_weights
from research.training.topic_encoder import HEADS, embed, fine_tune, jar_tokenizer


def conversation(item: EvalItem) -> str:
    return item.tenant.split("-")[1]


def cross_fitted(weights: dict[str, np.ndarray], tok: Tokenizer, locomo: Sequence[EvalItem],
                 others: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors no model saw: each LoCoMo conversation's from a model trained on the other two,
    ``others`` from one trained on all of them."""
    tuned: dict[str, np.ndarray] = {}
    for held in sorted({conversation(i) for i in locomo}):
        model = fine_tune(weights, tok, [i for i in locomo if conversation(i) != held])
        tuned |= embed(model, tok, [i.text for i in locomo if conversation(i) == held])
    return tuned | embed(fine_tune(weights, tok, locomo), tok, list(others))


def measures(items: Sequence[EvalItem], space: dict[str, np.ndarray]) -> dict[str, float]:
    centroid = centroid_ceiling(items, np.array([space[i.text] for i in items]))
    true_k = true_k_ceiling(items, {"en": space})
    return {**centroid, "kmeans": true_k["kmeans"], "average": true_k["average"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_ft"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    sets, texts, vec = tuning_vectors(args.cache, ("wordllama", "e5", "bge_en"))
    english = {name: [i for i, lang in zip(items, languages(i.text for i in items), strict=True) if lang == "en"]
               for name, items in sets.items() if name in ("synthetic_tune", "locomo_tune")}
    jar = bge.jar_path(load_settings().models_dir, "en")
    weights, tok = onnx_weights(jar, "en"), jar_tokenizer(jar)
    untrained = embed(Encoder(weights, HEADS).eval(), tok, texts[:50])
    parity = min(float(untrained[t] @ (vec["bge_en"][t] / np.linalg.norm(vec["bge_en"][t]))) for t in texts[:50])
    print(json.dumps({"parity_min_cosine_untrained_vs_onnx": round(parity, 6)}), flush=True)
    tuned = cross_fitted(weights, tok, english["locomo_tune"], [i.text for i in english["synthetic_tune"]])
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), 0.8), strict=True))
    spaces = {"shipped": combined, "bge_en": vec["bge_en"], "T": tuned}
    report = {part: {name: measures(items, space) for name, space in spaces.items()} for part, items in english.items()}
    for part, rows in report.items():
        best = {m: max(rows["shipped"][m], rows["bge_en"][m]) for m in ("own_label_centroid_nearest", "kmeans")}
        rows["lead"] = {"centroid_gain": round(rows["T"]["own_label_centroid_nearest"] - best["own_label_centroid_nearest"], 4),
                        "kmeans_gain": round(rows["T"]["kmeans"] - best["kmeans"], 4)}
        print(json.dumps({"part": part, "memories": len(english[part]), **rows}), flush=True)
    lead = all(r["lead"]["centroid_gain"] >= 0.03 and r["lead"]["kmeans_gain"] >= 0.02 for r in report.values())
    print(json.dumps({"lead": lead}), flush=True)


if __name__ == "__main__":
    main()
