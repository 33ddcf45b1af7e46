"""A Chinese topic encoder (Z), by the rule fixed beforehand in research/studies/topic_zh_encoder_rule.md.
Tuning data only; needs the ``research`` extra.

    python research/studies/topic_zh_encoder_study.py > /tmp/topics_z/study.jsonl   # Z (~10 min)

Z is the topic encoder's fixed recipe on bge-small-zh-v1.5 (8 heads), trained on the Chinese
memories of the training users 4-6 (U_zh) and of the tuning sets the cross-fitting allows: N by a
model trained on U_zh ∪ S, S_A by U_zh ∪ N ∪ S_B, S_B by U_zh ∪ N ∪ S_A. Chinese topics are
planned in Z space (carried with e5 at 1e-6, as the English space is); English stays in the
shipped topic encoder's space. F, what ships (Chinese in e5 space), is the baseline. The growth
tenant is English only, so Z leaves it as shipped. Vectors are cached per model in ``--cache``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mem_assets.reorg import evaluation
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics, holdout_split, read_items
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_encoder import topic_encoder_embed
from mem_assets.reorg.topic_vectors import E5_DIMENSION
from research.studies.combined_space_study import ROOT, Cached, growth_check, tuning_sets
from research.studies.topic_bge_study import MODELS, VectorCache, choose, with_e5_tail
from research.studies.topic_encoder_data_study import Trainer, pooled
from research.training.topic_encoder import of_language

GRID = {"place_similarity": [0.25, 0.30, 0.35], "group_similarity": [0.25, 0.30, 0.35]}
PARTS = ("S_A", "S_B", "N")


def zh_users() -> list[EvalItem]:
    """U_zh: the hand-written training users 4-6 (research/data/topic_training/README.md)."""
    return [i for n in (4, 5, 6) for i in read_items(ROOT / "research" / "data" / "topic_training" / f"user_{n}.jsonl")]


@contextmanager
def split_at(zh_dimension: int) -> Iterator[None]:
    """evaluate_topics with each text's kept vector as the study makes it: its Chinese-space
    vector (``zh_dimension`` floats), then its English-space vector; both end in the e5 vector
    (or carry it), which the shared map reads."""
    original_in_spaces, original_to_shared = evaluation.in_spaces, evaluation.to_shared

    def in_spaces(spaces: Sequence[str], main: Sequence[np.ndarray | None],
                  kept: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [np.asarray(v)[:zh_dimension] if space == evaluation.E5_SPACE else np.asarray(v)[zh_dimension:]
                for space, v in zip(spaces, kept, strict=True)]

    evaluation.in_spaces = in_spaces
    evaluation.to_shared = lambda space: lambda vectors: np.asarray(vectors)[..., -E5_DIMENSION:]
    try:
        yield
    finally:
        evaluation.in_spaces, evaluation.to_shared = original_in_spaces, original_to_shared


def figures(items: Sequence[EvalItem], en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray],
            zh_params: PlacementParams) -> dict[str, Any]:
    texts = {i.text for i in items}
    zh_dimension = len(next(iter(zh_space.values())))
    kept = {t: np.concatenate([zh_space[t], en_space[t]]) for t in texts}
    with split_at(zh_dimension):
        report = evaluate_topics(items, Cached(en_space), PlacementParams(), ("zh",), zh_params, Cached(kept).embed,
                                 ("en",), COMBINED_PARAMS, CROSS_PARAMS)
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "ari": report.ari, "nmi": report.nmi,
            **{f"{lang}_purity_placed": (f.purity, f.placed) for lang, f in report.by_language.items()}}


def row(parts: dict[str, list[EvalItem]], en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray],
        zh_params: PlacementParams) -> dict[str, Any]:
    out: dict[str, Any] = {name: figures(parts[name], en_space, zh_space, zh_params) for name in PARTS}
    out["pooled"] = pooled([(len(parts[name]), out[name]) for name in PARTS])
    zh = [(len(of_language(parts[name], "zh")), out[name]["zh_purity_placed"]) for name in PARTS]
    out["pooled"]["zh"] = pooled([(n, {"purity": p, "placed": q, "dupes": 0, "split": 0}) for n, (p, q) in zh])
    return out


def qualifies(got: dict[str, Any], base: dict[str, Any], parts: Sequence[str] = PARTS, part_drop: float = 0.010,
              split_slack: int = 0, chinese: bool = True) -> bool:
    """Pooled over ``parts``: purer (+0.005) at placed >= -0.002, or more placed (+0.005) at purity
    >= -0.002; no part's purity down by more than ``part_drop``; (``chinese``) pooled Chinese purity
    not lower; no near-duplicate pair; themes told twice at most ``split_slack`` more."""
    g, b = got["pooled"], base["pooled"]
    purer = g["purity"] >= b["purity"] + 0.005 and g["placed"] >= b["placed"] - 0.002
    more = g["placed"] >= b["placed"] + 0.005 and g["purity"] >= b["purity"] - 0.002
    kept = all(got[name]["purity"] >= base[name]["purity"] - part_drop for name in parts)
    zh = not chinese or g["zh"]["purity"] >= b["zh"]["purity"]
    return bool((purer or more) and kept and zh and not g["dupes"] and g["split"] <= b["split"] + split_slack)


def gain(got: dict[str, Any], base: dict[str, Any]) -> float:
    g, b = got["pooled"], base["pooled"]
    return round(g["purity"] - b["purity"] + g["placed"] - b["placed"], 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_z"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    s_a, s_b = holdout_split(read_items(ROOT / "research/data/eval/topics.jsonl"))
    parts = {"S_A": s_a, "S_B": s_b, "N": read_items(ROOT / "research/data/eval/fresh/topics.jsonl")}
    users = zh_users()
    every = sorted({i.text for items in parts.values() for i in items})
    e5 = VectorCache(args.cache / MODELS["e5"][0], MODELS["e5"][1]).get(every)
    en_space = with_e5_tail(dict(zip(every, topic_encoder_embed(every), strict=True)), e5)
    print(json.dumps({"users": len(users), "users_zh": len(of_language(users, "zh")),
                      "user_labels": len({(i.tenant, i.topic) for i in users}),
                      **{name: [len(items), len(of_language(items, "zh"))] for name, items in parts.items()}}), flush=True)

    base = row(parts, en_space, e5, E5_PARAMS)
    print(json.dumps({"candidate": "F (shipped)", **base}), flush=True)
    growth = tuning_sets()["growth"]
    growth_space = with_e5_tail(dict(zip([i.text for i in growth], topic_encoder_embed([i.text for i in growth]),
                                         strict=True)), VectorCache(args.cache / MODELS["e5"][0],
                                                                    MODELS["e5"][1]).get([i.text for i in growth]))
    growth_passes = growth_check(growth, growth_space, COMBINED_PARAMS)["passes"]

    trainer = Trainer(args.cache, "zh", prefix="z")
    texts = {name: [i.text for i in items] for name, items in parts.items()}
    z = (trainer.vectors("N", [*users, *s_a, *s_b], texts["N"])
         | trainer.vectors("S_A", [*users, *parts["N"], *s_b], texts["S_A"])
         | trainer.vectors("S_B", [*users, *parts["N"], *s_a], texts["S_B"]))
    zh_space = with_e5_tail({t: z[t] for t in every}, e5)
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*GRID.values()):
        params = replace(COMBINED_PARAMS, **dict(zip(GRID, combo, strict=True)))
        got = row(parts, en_space, zh_space, params)
        got.update(setting=dict(zip(GRID, combo, strict=True)), growth_passes=growth_passes,
                   qualifies=growth_passes and qualifies(got, base), gain=gain(got, base))
        rows[combo] = got
        print(json.dumps({"grid": "Z", **got}), flush=True)
    choose("Z", GRID, rows)


if __name__ == "__main__":
    main()
