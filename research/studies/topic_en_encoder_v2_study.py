"""The English topic encoder on all labeled English text (E2), by the rule fixed beforehand in
research/studies/topic_en_encoder_v2_rule.md. Tuning data only; needs the ``research`` extra and the Z study's
cache (research/studies/topic_zh_encoder_study.py).

    python research/studies/topic_en_encoder_v2_study.py > /tmp/topics_e2/study.jsonl   # seven fine-tunes, ~35 min

Every scored English vector comes from a model that did not see its text; Chinese vectors are Z's
cross-fitted ones. The baseline is F (the shipped English encoder; LoCoMo tune by session 23's
cross-fitted F vectors) with Z.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mem_assets.reorg.evaluation import EvalItem, holdout_split, read_items
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS
from mem_assets.reorg.topic_encoder import topic_encoder_embed
from research.studies.combined_space_study import ROOT, growth_check, tuning_sets
from research.studies.topic_bge_study import MODELS, VectorCache, with_e5_tail
from research.studies.topic_encoder_data_study import Trainer, pooled
from research.studies.topic_finetune_study import conversation
from research.studies.topic_tuned_space_study import tuned_vectors
from research.studies.topic_zh_encoder_study import figures, qualifies

PARTS = ("S_A", "S_B", "N", "T2")


def users() -> list[EvalItem]:
    """U: the training users with English text (1-3 all English, 6 ~40 %)."""
    return [i for n in (1, 2, 3, 6) for i in read_items(ROOT / "research" / "data" / "topic_training" / f"user_{n}.jsonl")]


def z_vectors(cache: Path, texts: list[str]) -> dict[str, np.ndarray]:
    """Z's cross-fitted vectors (the Z study's cache); texts no Z model was asked for (LoCoMo, all
    English and never in a Chinese topic) get the shipped Chinese encoder's."""
    out: dict[str, np.ndarray] = {}
    for name in ("N", "S_A", "S_B"):
        data = np.load(cache / f"z_{name}.npz", allow_pickle=False)
        out |= dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
    rest = sorted({t for t in texts if t not in out})
    return out | dict(zip(rest, topic_encoder_embed(rest, "zh"), strict=True))


def row(parts: dict[str, list[EvalItem]], en: dict[str, np.ndarray], zh: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {name: figures(parts[name], en, zh, COMBINED_PARAMS) for name in PARTS}
    out["pooled"] = pooled([(len(parts[name]), out[name]) for name in PARTS])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_e2"))
    parser.add_argument("--z-cache", type=Path, default=Path("/tmp/topics_z"))
    parser.add_argument("--f-cache", type=Path, default=Path("/tmp/topics_g"), help="session 23's cross-fitted F")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    tuning = tuning_sets()
    s_a, s_b = holdout_split(read_items(ROOT / "research/data/eval/topics.jsonl"))
    parts = {"S_A": s_a, "S_B": s_b, "N": read_items(ROOT / "research/data/eval/fresh/topics.jsonl"),
             "T2": tuning["locomo_tune"]}
    growth, u, t2 = tuning["growth"], users(), parts["T2"]
    texts = {name: [i.text for i in items] for name, items in parts.items()}
    every = sorted({t for ts in texts.values() for t in ts} | {i.text for i in growth})
    e5 = VectorCache(args.cache / MODELS["e5"][0], MODELS["e5"][1]).get(every)
    zh = with_e5_tail(z_vectors(args.z_cache, every), e5)
    print(json.dumps({"users": len(u), **{name: len(items) for name, items in parts.items()}}), flush=True)

    synthetic = sorted({t for name in ("S_A", "S_B", "N") for t in texts[name]} | {i.text for i in growth})
    f = tuned_vectors(args.f_cache, tuning) | dict(zip(synthetic, topic_encoder_embed(synthetic), strict=True))
    f_space = with_e5_tail({t: f[t] for t in every}, e5)
    base = row(parts, f_space, zh)
    base["growth"] = growth_check(growth, f_space, COMBINED_PARAMS)["passes"]
    print(json.dumps({"candidate": "F + Z (baseline)", **base}), flush=True)

    trainer = Trainer(args.cache)
    e2 = (trainer.vectors("S_A", [*t2, *u, *s_b, *parts["N"]], texts["S_A"])
          | trainer.vectors("S_B", [*t2, *u, *s_a, *parts["N"]], texts["S_B"])
          | trainer.vectors("N", [*t2, *u, *s_a, *s_b], texts["N"]))
    for held in sorted({conversation(i) for i in t2}):
        e2 |= trainer.vectors(f"T2-{held}", [*(i for i in t2 if conversation(i) != held), *u, *s_a, *s_b,
                                             *parts["N"]], [i.text for i in t2 if conversation(i) == held])
    growth_space = with_e5_tail(trainer.vectors("GT", [*t2, *u, *parts["N"]], [i.text for i in growth]), e5)
    got = row(parts, with_e5_tail({t: e2[t] for t in every if t in e2}, e5), zh)
    got["growth"] = growth_check(growth, growth_space, COMBINED_PARAMS)["passes"]
    got["qualifies"] = bool(got["growth"] and qualifies(got, base, PARTS, part_drop=0.03, split_slack=1,
                                                        chinese=False))
    print(json.dumps({"candidate": "E2 + Z", **got}), flush=True)


if __name__ == "__main__":
    main()
