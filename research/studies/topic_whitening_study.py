"""Diagnostic: does a learned within-theme whitening make topic spaces separate unseen themes better?

Within-class covariance normalisation (as speaker verification does for unseen speakers): the
scatter of memories around their own theme's mean, pooled over labeled themes (Ledoit-Wolf
shrinkage, scaled to unit mean variance, plus ``alpha`` times the identity), is whitened away by a
fixed linear map, so the directions in which memories of one theme differ (style, subject, sentence
shape) weigh less. Fitted on one labeled part and measured on themes it never saw, by the true-k
ceiling of research/studies/topic_bge_study.py (KMeans / average linkage with the true number of themes, per
tenant and language, centred on the tenant mean): LoCoMo tune → synthetic tuning half (English) and
back, and across the two halves of the synthetic tuning half's themes (English, and Chinese).

A diagnostic with no decision attached (no placement run, nothing wired in). Tuning parts only;
never given a held-out file. Vectors are cached as research/studies/topic_bge_study.py caches them.

    python research/studies/topic_whitening_study.py > /tmp/topics_bge/whitening.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.covariance import LedoitWolf

from mem_assets.reorg.evaluation import EvalItem
from mem_assets.reorg.topic_space import languages
from mem_assets.reorg.topic_vectors import combine
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed, normalize_rows
from research.studies.combined_space_study import tuning_sets
from research.studies.topic_bge_study import VectorCache, bge_vectors, ceiling

ALPHAS = (0.0, 0.3, 1.0)


def whitening(items: Sequence[EvalItem], space: dict[str, np.ndarray], alpha: float) -> np.ndarray:
    vectors = normalize_rows(np.array([space[i.text] for i in items], dtype=np.float64))
    themes = np.array([f"{i.tenant}|{i.topic}" for i in items])
    residuals = vectors.copy()
    for theme in set(themes.tolist()):
        residuals[themes == theme] -= vectors[themes == theme].mean(axis=0)
    scatter = LedoitWolf().fit(residuals).covariance_
    scatter *= len(scatter) / np.trace(scatter)
    values, basis = np.linalg.eigh(scatter + alpha * np.eye(len(scatter)))
    return basis @ np.diag(values ** -0.5) @ basis.T


def mapped(space: dict[str, np.ndarray], matrix: np.ndarray) -> dict[str, np.ndarray]:
    return {text: matrix @ vector for text, vector in space.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_bge"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    sets = tuning_sets()
    texts = sorted({i.text for items in sets.values() for i in items})
    vec = {name: VectorCache(args.cache / file, make).get(texts) for name, file, make in (
        ("wordllama", "wordllama.npz", lambda: WordLlamaEmbedder().embed), ("e5", "e5_query.npz", lambda: e5_query_embed),
        ("bge_en", "bge_en.npz", lambda: bge_vectors("en")), ("bge_zh", "bge_zh.npz", lambda: bge_vectors("zh")))}
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), 0.8), strict=True))
    synthetic, locomo = sets["synthetic_tune"], sets["locomo_tune"]
    langs = languages(i.text for i in synthetic)
    by_language = {want: [i for i, lang in zip(synthetic, langs, strict=True) if lang == want] for want in ("en", "zh")}
    themes = sorted({i.topic for i in synthetic})
    halves = (set(themes[::2]), set(themes[1::2]))

    def score(items: Sequence[EvalItem], space: dict[str, np.ndarray], lang: str) -> dict[str, float]:
        other = vec["e5"]
        out = ceiling(items, {"en": space, "zh": other} if lang == "en" else {"en": other, "zh": space})
        return {k: out[k] for k in ("kmeans", "average")}

    for lang, spaces in (("en", {"combined": combined, "bge_en": vec["bge_en"], "e5": vec["e5"]}),
                         ("zh", {"e5": vec["e5"], "bge_zh": vec["bge_zh"]})):
        pool = by_language[lang]
        tests: list[tuple[str, Sequence[EvalItem], Sequence[EvalItem]]] = [
            ("themes A -> B", [i for i in pool if i.topic in halves[0]], [i for i in pool if i.topic in halves[1]]),
            ("themes B -> A", [i for i in pool if i.topic in halves[1]], [i for i in pool if i.topic in halves[0]])]
        if lang == "en":
            tests += [("locomo_tune -> synthetic_tune", locomo, pool), ("synthetic_tune -> locomo_tune", pool, locomo)]
        for name, space in spaces.items():
            for test, fit, scored in tests:
                row = {"language": lang, "space": name, "fit -> scored": test, "scored_items": len(scored),
                       "as_is": score(scored, space, lang)}
                row |= {f"alpha_{alpha}": score(scored, mapped(space, whitening(fit, space, alpha)), lang)
                        for alpha in ALPHAS}
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
