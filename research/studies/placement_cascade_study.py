"""Placement cascade study (rule: placement_cascade_rule.md): e5 passage vs query in the kept
vector, and the cheap-space band that lets a memory skip the kept vector, on the tuning sets.

    python -m research.studies.placement_cascade_study [--cache /tmp/pcascade]
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from mem_assets.reorg.cascade import CascadeParams
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics, read_items
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, E5_PARAMS, EMBEDDER_PARAMS
from mem_assets.reorg.topic_encoder import ENCODERS, topic_encoder_embed
from mem_resources.embedder import e5_embed, e5_query_embed, normalize_rows, wordllama_embed

ROOT = Path(__file__).resolve().parents[2]
TUNING = {"topics": "topics.jsonl", "fresh": "fresh/topics.jsonl", "fresh2": "fresh2/topics.jsonl"}


class Cached:
    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.dimension = len(next(iter(vectors.values())))

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def vectors(name: str, texts: list[str], cache: Path) -> dict[str, dict[str, np.ndarray]]:
    """Per text: WordLlama, kept vector with e5 query (shipped) and with e5 passage."""
    file = cache / f"{name}.npz"
    if not file.exists():
        encoders = np.hstack([topic_encoder_embed(texts, lang) for lang in ENCODERS])
        np.savez(file, wl=wordllama_embed(texts), query=e5_query_embed(texts),
                 passage=normalize_rows(e5_embed(texts)), encoders=encoders)
    data = np.load(file)
    kept = {part: np.hstack([data[part], data["encoders"]]) for part in ("query", "passage")}
    return {"wl": dict(zip(texts, data["wl"], strict=True)),
            **{part: dict(zip(texts, rows, strict=True)) for part, rows in kept.items()}}


def score(items: list[EvalItem], vecs: dict, part: str, cascade: CascadeParams | None,
          e5_languages: tuple[str, ...] = (), combined: tuple[str, ...] = ("en", "zh"),
          cross: bool = True) -> dict:
    report = evaluate_topics(items, Cached(vecs["wl"]), EMBEDDER_PARAMS, e5_languages, E5_PARAMS,
                             Cached(vecs[part]).embed, combined, COMBINED_PARAMS,
                             **({} if cross else {"cross": None}), cascade=cascade)
    return {"purity": report.purity, "placed": report.placed, **report.stages}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path("/tmp/pcascade"))
    parser.add_argument("--offer-only", action="store_true",
                        help="the follow-up rule: no cheap groups, stricter bands")
    parser.add_argument("--ablation", default="", help="comma-separated cached sets: purity without each "
                        "model (embedder space only; no cross-language offers, i.e. no e5 use)")
    parser.add_argument("--heldout", default="", help="JSON of the chosen band: score fresh4/ once, "
                        "shipped before (e5 query:, no cascade) and after (passage, the band)")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.ablation:
        for name in args.ablation.split(","):
            path = TUNING.get(name, f"{name}/topics.jsonl")
            items = read_items(ROOT / "research/data/eval" / path)
            vecs = vectors(name, sorted({i.text for i in items}), args.cache)
            rows = {"shipped": score(items, vecs, "passage", None),
                    "embedder_only": score(items, vecs, "passage", None, (), ()),
                    "no_cross_language": score(items, vecs, "passage", None, cross=False)}
            print(name, json.dumps(rows), flush=True)
        return
    if args.heldout:
        items = read_items(ROOT / "research/data/eval/fresh4/topics.jsonl")
        vecs = vectors("fresh4", sorted({i.text for i in items}), args.cache)
        before = score(items, vecs, "query", None)
        after = score(items, vecs, "passage", CascadeParams(**json.loads(args.heldout)))
        no_cascade = score(items, vecs, "passage", None)
        print(json.dumps({"before": before, "after": after, "passage_no_cascade": no_cascade}), flush=True)
        return
    sets = {name: read_items(ROOT / "research/data/eval" / path) for name, path in TUNING.items()}
    vecs = {name: vectors(name, sorted({i.text for i in items}), args.cache) for name, items in sets.items()}

    def mean_of(rows: dict[str, dict]) -> dict:
        cheap = sum(r.get("cheap", 0) for r in rows.values())
        paid = sum(r.get("paid", 0) for r in rows.values())
        return {"purity": round(float(np.mean([r["purity"] for r in rows.values()])), 4),
                "placed": round(float(np.mean([r["placed"] for r in rows.values()])), 4),
                "cheap_share": round(cheap / max(cheap + paid, 1), 4),
                "changed": sum(r.get("changed", 0) for r in rows.values())}

    out: dict[str, object] = {}
    for label, part, e5_langs, combined in ((("passage", "passage", (), ("en", "zh")),) if args.offer_only else
                                            (("query", "query", (), ("en", "zh")),
                                            ("passage", "passage", (), ("en", "zh")),
                                            ("e5_space_query", "query", ("zh", "en"), ()),
                                             ("e5_space_passage", "passage", ("zh", "en"), ()))):
        rows = {name: score(items, vecs[name], part, None, e5_langs, combined) for name, items in sets.items()}
        out[label] = {"sets": rows, "mean": mean_of(rows)}
        print(label, json.dumps(out[label]), flush=True)
    part = "passage" if args.offer_only or (
        out["passage"]["mean"]["purity"] >= out["query"]["mean"]["purity"] - 0.005  # type: ignore[index]
        and out["passage"]["mean"]["placed"] >= out["query"]["mean"]["placed"] - 0.005) else "query"  # type: ignore[index]
    base = out[part]["sets"]  # type: ignore[index]
    print("e5 part:", part, flush=True)
    grid = []
    grid_of = (itertools.product((0.6, 0.7, 0.8), (0.2, 0.3), (1,)) if args.offer_only
               else itertools.product((0.4, 0.5, 0.6), (0.10, 0.20), (1, 2)))
    for sim, margin, reps in grid_of:
        params = CascadeParams(clear_similarity=sim, clear_margin=margin, representatives=reps,
                               min_group_size=10**6 if args.offer_only else 3)
        rows = {name: score(items, vecs[name], part, params) for name, items in sets.items()}
        summary = mean_of(rows)
        worst = min(rows[n]["purity"] - base[n]["purity"] for n in rows)
        admissible = (summary["purity"] >= out[part]["mean"]["purity"] - 0.005  # type: ignore[index]
                      and summary["placed"] >= out[part]["mean"]["placed"] - 0.005 and worst >= -0.02)  # type: ignore[index]
        grid.append({"clear_similarity": sim, "clear_margin": margin, "representatives": reps, **summary,
                     "worst_set_drop": round(worst, 4), "admissible": admissible, "sets": rows})
        print(json.dumps({k: v for k, v in grid[-1].items() if k != "sets"}), flush=True)
    chosen = max((g for g in grid if g["admissible"]), key=lambda g: (g["cheap_share"], g["purity"]), default=None)
    print("chosen:", json.dumps(chosen), flush=True)
    (args.cache / ("offer_only.json" if args.offer_only else "study.json")).write_text(json.dumps({"spaces": out, "grid": grid, "chosen": chosen}, indent=1))


if __name__ == "__main__":
    main()
