"""The topic encoder trained on more labeled text (G), by the rule fixed beforehand in
research/studies/topic_encoder_data_rule.md. Tuning data only; needs the ``research`` extra.

    python research/studies/topic_encoder_data_study.py > /tmp/topics_g/study.jsonl   # G (~25 min)
    python research/studies/topic_encoder_data_study.py --h       # H: T2 + U, cross-fitted on T2 (~11 min)
    python research/studies/topic_encoder_data_study.py --cross   # C: cross-language thresholds (15 s)
    python research/studies/topic_encoder_data_study.py --after   # after N's one reading: diagnostics only

G is the shipped recipe on the English memories of LoCoMo tune (T2), the training users (U,
``research/data/topic_training/``) and the synthetic set (S). Every scored vector comes from a model that did
not see its text: S_A from one trained without S_A, S_B without S_B, each T2 conversation without
it, the growth tenant (GT) from T2 ∪ U alone (G0). F, the shipped encoder, is the baseline (T2 by
session 23's cross-fitted F vectors, ``topic_tuned_space_study.tuned_vectors``). Vectors are cached
per model in ``--cache``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mem_assets.reorg.evaluation import EvalItem, holdout_split, read_items
from mem_assets.reorg.placement import CrossParams, PlacementParams
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_encoder import ENCODERS, Language, topic_encoder_embed
from mem_resources import bge
from mem_resources.settings import load_settings
from research.studies.combined_space_study import ROOT, growth_check, tuning_sets
from research.studies.topic_bge_study import MODELS, VectorCache, choose, figures, with_e5_tail
from research.studies.topic_finetune_study import conversation
from research.studies.topic_tuned_space_study import tuned_vectors
from research.training.bge_finetune import onnx_weights
from research.training.topic_encoder import embed, fine_tune, jar_tokenizer, of_language


def training_users() -> list[EvalItem]:
    """U: the three English hand-written users kept for training only (research/data/topic_training/README.md)."""
    return [i for n in (1, 2, 3) for i in read_items(ROOT / "research" / "data" / "topic_training" / f"user_{n}.jsonl")]


GRID = {"place_similarity": [0.30, 0.35, 0.40], "group_similarity": [0.25, 0.30, 0.35]}


class Trainer:
    """Fine-tunes a ``language`` encoder once per training set (on that language's memories) and
    keeps the vectors it was asked for in ``cache`` as ``<prefix>_<name>.npz``."""

    def __init__(self, cache: Path, language: Language = "en", prefix: str = "g") -> None:
        self.cache, self.language, self.prefix = cache, language, prefix
        self.weights: dict[str, np.ndarray] | None = None

    def vectors(self, name: str, train: Sequence[EvalItem], texts: Sequence[str]) -> dict[str, np.ndarray]:
        path = self.cache / f"{self.prefix}_{name}.npz"
        if path.exists():
            data = np.load(path, allow_pickle=False)
            return dict(zip(data["texts"].tolist(), data["vectors"], strict=True))
        jar = bge.existing_jar(load_settings().models_dir, self.language)
        tok = jar_tokenizer(jar, self.language)
        if self.weights is None:
            self.weights = onnx_weights(jar, self.language)
        items = of_language(train, self.language)
        print(json.dumps({"training": name, "memories": len(items)}), flush=True)
        model = fine_tune(self.weights, tok, items, ENCODERS[self.language].heads)
        made = embed(model, tok, sorted(set(texts)))
        keys = sorted(made)
        np.savez(path, texts=np.array(keys), vectors=np.stack([made[k] for k in keys]))
        return made


def pooled(halves: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, float]:
    members = sum(n for n, _ in halves)
    placed = sum(n * f["placed"] for n, f in halves)
    pure = sum(n * f["placed"] * f["purity"] for n, f in halves)
    return {"purity": round(pure / placed, 4), "placed": round(placed / members, 4),
            "dupes": sum(f["dupes"] for _, f in halves), "split": sum(f["split"] for _, f in halves)}


def row(parts: dict[str, list[EvalItem]], space: dict[str, np.ndarray], e5: dict[str, np.ndarray],
        params: PlacementParams, growth_space: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {name: figures(parts[name], space, e5, params, E5_PARAMS) for name in ("S_A", "S_B", "T2")}
    out["S"] = pooled([(len(parts[h]), out[h]) for h in ("S_A", "S_B")])
    out["growth"] = growth_check(parts["GT"], growth_space, params)
    return out


def better_on_s(got: dict[str, Any], base: dict[str, Any]) -> bool:
    s, b = got["S"], base["S"]
    purer = s["purity"] >= b["purity"] + 0.005 and s["placed"] >= b["placed"] - 0.002
    more = s["placed"] >= b["placed"] + 0.005 and s["purity"] >= b["purity"] - 0.002
    halves = all(got[h]["purity"] >= base[h]["purity"] - 0.010 for h in ("S_A", "S_B"))
    return bool((purer or more) and halves and not s["dupes"] and s["split"] <= b["split"])


def qualifies(got: dict[str, Any], base: dict[str, Any]) -> bool:
    t2 = got["T2"]["purity"] >= base["T2"]["purity"] - 0.002 and got["T2"]["placed"] >= base["T2"]["placed"] - 0.002
    return bool(better_on_s(got, base) and t2 and got["growth"]["passes"])


def gain(got: dict[str, Any], base: dict[str, Any]) -> float:
    return round(got["S"]["purity"] - base["S"]["purity"] + got["S"]["placed"] - base["S"]["placed"], 4)


CROSS_GRID = {"place_similarity": [0.25, 0.30, 0.35, 0.40], "place_margin": [0.03, 0.05, 0.08]}


def cross_grid(parts: dict[str, list[EvalItem]], e5: dict[str, np.ndarray]) -> None:
    """C: the cross-language thresholds on the synthetic set, in the shipped encoder's space."""
    from research.studies import topic_bge_study

    s = [*parts["S_A"], *parts["S_B"]]
    texts = sorted({i.text for i in s})
    space = with_e5_tail(dict(zip(texts, topic_encoder_embed(texts), strict=True)), e5)

    def row_at(cross: CrossParams) -> dict[str, Any]:
        topic_bge_study.CROSS_PARAMS = cross
        got = {h: figures(parts[h], space, e5, COMBINED_PARAMS, E5_PARAMS) for h in ("S_A", "S_B")}
        got["S"] = pooled([(len(parts[h]), got[h]) for h in ("S_A", "S_B")])
        got["whole"] = figures(s, space, e5, COMBINED_PARAMS, E5_PARAMS)
        return got

    base = row_at(CROSS_PARAMS)
    print(json.dumps({"candidate": "shipped cross", "setting": asdict(CROSS_PARAMS), **base}), flush=True)
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*CROSS_GRID.values()):
        got = row_at(CrossParams(*combo))
        whole = got["whole"]["purity"] >= base["whole"]["purity"] - 0.002 and \
            got["whole"]["placed"] >= base["whole"]["placed"] - 0.002
        got.update(setting=dict(zip(CROSS_GRID, combo, strict=True)), gain=gain(got, base),
                   qualifies=whole and better_on_s(got, base))
        rows[combo] = got
        print(json.dumps({"grid": "C", **got}), flush=True)
    choose("C", CROSS_GRID, rows)


def after(trainer: Trainer, t2_users: list[EvalItem], synthetic: list[EvalItem], cache: Path) -> None:
    """Run only after N's one reading with what shipped: how the rejected encoders would have
    fared on the unseen sets. Nothing is chosen from it."""
    sets = {"N": read_items(ROOT / "research/data/eval/fresh/topics.jsonl"),
            "locomo_heldout": read_items(ROOT / "research/data/eval/locomo/topics_heldout.jsonl")}
    texts = sorted({i.text for items in sets.values() for i in items})
    e5 = VectorCache(cache / MODELS["e5"][0], MODELS["e5"][1]).get(texts)
    encoders = {"F (shipped)": dict(zip(texts, topic_encoder_embed(texts), strict=True)),
                "G0 = T2 + U": trainer.vectors("after-G0", t2_users, texts),
                "G = T2 + U + S": trainer.vectors("after-G", [*t2_users, *synthetic], texts)}
    for name, vectors in encoders.items():
        space = with_e5_tail(vectors, e5)
        for set_name, items in sets.items():
            print(json.dumps({"encoder": name, "set": set_name,
                              **figures(items, space, e5, COMBINED_PARAMS, E5_PARAMS)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_g"))
    parser.add_argument("--h", action="store_true", help="only H = T2 + U, cross-fitted on T2, at the shipped setting")
    parser.add_argument("--cross", action="store_true", help="only C: the cross-language thresholds on S, F vectors")
    parser.add_argument("--after", action="store_true",
                        help="the diagnostic after N's one reading: F, G0 and G on N and LoCoMo held-out (not a choice)")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    tuning = tuning_sets()
    s_a, s_b = holdout_split(read_items(ROOT / "research/data/eval/topics.jsonl"))
    parts = {"S_A": s_a, "S_B": s_b, "T2": tuning["locomo_tune"], "GT": tuning["growth"]}
    users, t2 = training_users(), parts["T2"]
    texts = {name: [i.text for i in items] for name, items in parts.items()}
    every = sorted({t for ts in texts.values() for t in ts})
    e5 = VectorCache(args.cache / MODELS["e5"][0], MODELS["e5"][1]).get(every)
    print(json.dumps({"users": len(users), "user_labels": len({(i.tenant, i.topic) for i in users}),
                      **{name: len(items) for name, items in parts.items()}}), flush=True)

    if args.cross:
        cross_grid(parts, e5)
        return
    trainer = Trainer(args.cache)
    if args.after:
        after(trainer, [*t2, *users], [*s_a, *s_b], args.cache)
        return
    if args.h:
        h_t2: dict[str, np.ndarray] = {}
        for held in sorted({conversation(i) for i in t2}):
            h_t2 |= trainer.vectors(f"H-T2-{held}", [*(i for i in t2 if conversation(i) != held), *users],
                                    [i.text for i in t2 if conversation(i) == held])
        figures_t2 = figures(t2, with_e5_tail(h_t2, e5), e5, COMBINED_PARAMS, E5_PARAMS)
        print(json.dumps({"candidate": "H = T2 + U (T2 cross-fitted, shipped setting)", "T2": figures_t2}), flush=True)
        return
    g = trainer.vectors("A", [*t2, *users, *s_b], texts["S_A"]) | trainer.vectors("B", [*t2, *users, *s_a], texts["S_B"])
    for held in sorted({conversation(i) for i in t2}):
        g |= trainer.vectors(f"T2-{held}", [*(i for i in t2 if conversation(i) != held), *users, *s_a, *s_b],
                             [i.text for i in t2 if conversation(i) == held])
    g0 = trainer.vectors("G0", [*t2, *users], texts["GT"] + texts["S_A"] + texts["S_B"])

    f = tuned_vectors(args.cache, tuning)
    synthetic = sorted(set(texts["S_A"] + texts["S_B"] + texts["GT"]))
    f |= dict(zip(synthetic, topic_encoder_embed(synthetic), strict=True))
    f_space = with_e5_tail({t: f[t] for t in every}, e5)
    base = row(parts, f_space, e5, COMBINED_PARAMS, f_space)
    print(json.dumps({"candidate": "F (shipped)", **base}), flush=True)
    gt_space = with_e5_tail(g0, e5)
    ablation = {name: figures(parts[name], gt_space, e5, COMBINED_PARAMS, E5_PARAMS) for name in ("S_A", "S_B")}
    print(json.dumps({"candidate": "G0 = T2 + U (ablation, shipped setting)", **ablation,
                      "S": pooled([(len(parts[h]), ablation[h]) for h in ("S_A", "S_B")])}), flush=True)

    g_space = with_e5_tail({t: g[t] for t in every if t in g}, e5)
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*GRID.values()):
        params = replace(COMBINED_PARAMS, **dict(zip(GRID, combo, strict=True)))
        got = row(parts, g_space, e5, params, gt_space)
        got.update(setting=dict(zip(GRID, combo, strict=True)), qualifies=qualifies(got, base), gain=gain(got, base))
        rows[combo] = got
        print(json.dumps({"grid": "G", **got}), flush=True)
    choose("G", GRID, rows)


if __name__ == "__main__":
    main()
