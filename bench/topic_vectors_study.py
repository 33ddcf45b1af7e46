"""Better topic vectors, on the tuning parts only, with the rule fixed beforehand in
bench/topic_vectors_rule.md (docs/reorg.md, "Topic vectors without the subject, tenant LSA"):

- S: both halves of each space (WordLlama and e5) made from the text with its leading generic
  subject removed ("The user's", "User", "用户的", "我" ...); LoCoMo's leading speaker names are
  left alone (telling a speaker's name from any other name needs per-tenant state).
- L (study only): a tenant-level TF-IDF / LSA part (English words, Chinese character bigrams; fit
  on the tenant's memories of that language; TruncatedSVD to 64 dims, normalised) joined to each
  space with weight ``w``, so that a cosine is ``(1 - w)`` times the space's plus ``w`` times LSA's.

For each: the true-k ceiling (bench/topic_refine_study.py's ``ceiling``) and the shipped placement
(thresholds unchanged; for S also a small threshold grid). Vectors are cached per distinct text
in ``--cache``. Never given a held-out file.

    python bench/topic_vectors_study.py --grid > /tmp/topics_vectors/study.jsonl
    python bench/topic_vectors_study.py --diagnostics > /tmp/topics_vectors/diagnostics.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from combined_space_study import Cached, growth_check, tuning_sets
from topic_refine_study import ceiling

from mem_assets.reorg import evaluation
from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS, PlacementParams
from mem_assets.reorg.topic_space import language, normalize
from mem_assets.reorg.vectors import COMBINED_SPACE, E5_DIMENSION, combine
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed

SETS = ("synthetic_tune", "locomo_tune")
MAIN_DIMENSION = 256
LSA_DIMENSION = 64
LSA_WEIGHTS = (0.2, 0.35)

_EN_SUBJECT = re.compile(r"^\s*(?:the\s+)?users?(?:['’]s)?(?=\s)\s*", re.IGNORECASE)
_ZH_SUBJECT = re.compile(r"^\s*(?:用户的|用户|我的|我(?!们))")


def strip_subject(text: str) -> str:
    """``text`` without its leading generic subject; the text itself when nothing is left."""
    rest = _ZH_SUBJECT.sub("", text, count=1) if language(text) == "zh" else _EN_SUBJECT.sub("", text, count=1)
    rest = rest.lstrip(" ,，:：、")
    if len(rest) < 2 or rest == text:
        return text
    return rest[:1].upper() + rest[1:]


class VectorCache:
    """One model's vectors per distinct text, kept in ``path`` (npz) and made only when missing."""

    def __init__(self, path: Path, embed: Callable[[list[str]], np.ndarray]) -> None:
        self.path, self.embed = path, embed
        self.vectors: dict[str, np.ndarray] = {}
        if path.exists():
            data = np.load(path, allow_pickle=False)
            self.vectors = dict(zip(data["texts"].tolist(), data["vectors"], strict=True))

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        missing = sorted({t for t in texts if t not in self.vectors})
        if missing:
            for text, vector in zip(missing, np.asarray(self.embed(missing), dtype=np.float32), strict=True):
                self.vectors[text] = vector
            keys = sorted(self.vectors)
            np.savez(self.path, texts=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))
        return {t: self.vectors[t] for t in texts}


def lsa_vectors(items: Sequence[EvalItem], input_of: Callable[[str], str]) -> dict[str, np.ndarray]:
    """Per tenant and language, LSA of the memories' TF-IDF (fit on that tenant's memories of the
    language), keyed by the original text."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    out: dict[str, np.ndarray] = {}
    groups: dict[tuple[str, str], list[str]] = {}
    for item in items:
        groups.setdefault((item.tenant, language(item.text)), []).append(item.text)
    for (_, lang), texts in groups.items():
        vectorizer = (TfidfVectorizer(analyzer="char", ngram_range=(2, 2), sublinear_tf=True) if lang == "zh" else
                      TfidfVectorizer(analyzer="word", stop_words="english", sublinear_tf=True))
        matrix = vectorizer.fit_transform([input_of(t) for t in texts])
        dims = min(LSA_DIMENSION, matrix.shape[0] - 1, matrix.shape[1] - 1)
        reduced = TruncatedSVD(n_components=dims, random_state=0).fit_transform(matrix)
        padded = np.zeros((len(texts), LSA_DIMENSION))
        padded[:, :dims] = reduced
        for text, vector in zip(texts, normalize(padded), strict=True):
            out[text] = vector.astype(np.float32)
    return out


def _shared_part(space: str) -> Callable[[np.ndarray], np.ndarray]:
    start = MAIN_DIMENSION if space == COMBINED_SPACE else 0
    return lambda vectors: np.asarray(vectors)[..., start:start + E5_DIMENSION]


@contextmanager
def with_lsa(weight: float) -> Iterator[None]:
    """evaluate_topics with each space's vector joined to an LSA part carried after the e5 vector
    (the ``e5`` lookup returns e5 ⊕ LSA); across languages only the e5 part is compared."""
    original_in_spaces, original_to_shared = evaluation.in_spaces, evaluation.to_shared

    def in_spaces(spaces: Sequence[str], main: Sequence[np.ndarray | None],
                  e5: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        base = original_in_spaces(spaces, main, [None if v is None else v[:E5_DIMENSION] for v in e5])
        return [np.concatenate([np.sqrt(1 - weight) * normalize(b), np.sqrt(weight) * v[E5_DIMENSION:]])
                .astype(np.float32) for b, v in zip(base, e5, strict=True)]

    evaluation.in_spaces, evaluation.to_shared = in_spaces, _shared_part
    try:
        yield
    finally:
        evaluation.in_spaces, evaluation.to_shared = original_in_spaces, original_to_shared


def figures(items: Sequence[EvalItem], main: dict[str, np.ndarray], e5: dict[str, np.ndarray],
            combined_params: PlacementParams = COMBINED_PARAMS, e5_params: PlacementParams = E5_PARAMS) -> dict[str, Any]:
    report = evaluate_topics(items, Cached(main), PlacementParams(), ("zh",), e5_params, Cached(e5).embed,
                             ("en",), combined_params, CROSS_PARAMS)
    return {"placed": report.placed, "purity": report.purity, "dupes": report.near_duplicate_pairs,
            "split": report.split_themes, "topics": report.topics, "leaves": report.sub_topics,
            "root_purity": report.root_purity, "ari": report.ari, "nmi": report.nmi,
            **{f"{lang}_purity_placed": (f.purity, f.placed) for lang, f in report.by_language.items()}}


def qualifies(row: dict[str, Any], shipped: dict[str, dict[str, Any]]) -> bool:
    """The fixed rule (decisions, "Topics, round 2"), the growth test's assertions checked offline."""
    got, base = row["synthetic_tune"], shipped["synthetic_tune"]
    purer = got["purity"] >= base["purity"] + 0.005 and got["placed"] >= base["placed"] - 0.002
    more = got["placed"] >= base["placed"] + 0.005 and got["purity"] >= base["purity"] - 0.002
    if not (purer or more) or got["dupes"] or got["split"] > base["split"]:
        return False
    loc, loc_base = row["locomo_tune"], shipped["locomo_tune"]
    if loc["purity"] < loc_base["purity"] - 0.002 or loc["placed"] < loc_base["placed"] - 0.002:
        return False
    return bool(row["growth"]["passes"])


S_GRID = {"place_similarity": [0.20, 0.25, 0.30], "group_similarity": [0.15, 0.20, 0.25]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_vectors"))
    parser.add_argument("--grid", action="store_true", help="also grid the combined space's thresholds for S")
    parser.add_argument("--diagnostics", action="store_true",
                        help="only the diagnostics (S per language / per half, LSA alone, speaker names)")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    sets = tuning_sets()
    wordllama = VectorCache(args.cache / "wordllama.npz", WordLlamaEmbedder().embed)
    e5 = VectorCache(args.cache / "e5_query.npz", e5_query_embed)
    texts = sorted({i.text for items in sets.values() for i in items})
    stripped = {t: strip_subject(t) for t in texts}
    print(json.dumps({"texts": len(texts), "changed_by_S": sum(t != s for t, s in stripped.items()),
                      "per_set_changed": {name: sum(stripped[i.text] != i.text for i in items)
                                          for name, items in sets.items()}}), flush=True)
    started = time.perf_counter()
    base_main, base_e5 = wordllama.get(texts), e5.get(texts)
    s_inputs = sorted(set(stripped.values()))
    s_main_by, s_e5_by = wordllama.get(s_inputs), e5.get(s_inputs)
    print(json.dumps({"embedded_seconds": round(time.perf_counter() - started, 1)}), flush=True)
    s_main = {t: s_main_by[stripped[t]] for t in texts}
    s_e5 = {t: s_e5_by[stripped[t]] for t in texts}
    if args.diagnostics:
        diagnostics(sets, base_main, base_e5, s_main, s_e5, wordllama, e5)
        return
    variants = {"shipped": (base_main, base_e5, lambda t: t), "S": (s_main, s_e5, stripped.__getitem__)}
    shipped: dict[str, dict[str, Any]] = {}
    for name, (main_v, e5_v, input_of) in variants.items():
        for weight in (0.0, *LSA_WEIGHTS):
            label = name if weight == 0 else f"{name}+L@{weight:g}"
            row: dict[str, Any] = {"candidate": label}
            for set_name in (*SETS, "growth"):
                items = sets[set_name]
                if weight:
                    lsa = lsa_vectors(items, input_of)
                    e5_aug = {t: np.concatenate([e5_v[t], lsa[t]]) for t in (i.text for i in items)}
                else:
                    lsa, e5_aug = None, e5_v
                if set_name == "growth":
                    vectors = {t: combine(main_v[t][None], e5_v[t][None])[0] for t in (i.text for i in items)}
                    if weight:
                        vectors = {t: np.concatenate([np.sqrt(1 - weight) * normalize(v), np.sqrt(weight) * lsa[t]])
                                   for t, v in vectors.items()}
                    row["growth"] = growth_check(items, vectors, COMBINED_PARAMS)
                    continue
                with with_lsa(weight) if weight else nullcontext():
                    row[set_name] = figures(items, main_v, e5_aug)
                row[f"{set_name}_ceiling"] = ceiling(items, main_v, e5_v, row[set_name]["leaves"],
                                                     lsa=lsa, lsa_weight=weight)
            if label == "shipped":
                shipped = row
            row["qualifies"] = label == "S" and qualifies(row, shipped)
            print(json.dumps(row), flush=True)
    if args.grid:
        for place in S_GRID["place_similarity"]:
            for group in S_GRID["group_similarity"]:
                params = replace(COMBINED_PARAMS, place_similarity=place, group_similarity=group)
                row = {"candidate": "S-grid", "place_similarity": place, "group_similarity": group}
                for set_name in SETS:
                    row[set_name] = figures(sets[set_name], s_main, s_e5, combined_params=params)
                growth = {t: combine(s_main[t][None], s_e5[t][None])[0] for t in (i.text for i in sets["growth"])}
                row["growth"] = growth_check(sets["growth"], growth, params)
                row["qualifies"] = qualifies(row, shipped)
                print(json.dumps(row), flush=True)


def diagnostics(sets: dict[str, list[EvalItem]], base_main: dict[str, np.ndarray], base_e5: dict[str, np.ndarray],
                s_main: dict[str, np.ndarray], s_e5: dict[str, np.ndarray], wordllama: VectorCache,
                e5: VectorCache) -> None:
    """Not candidates: which language and which half S's loss comes from, LSA's weight 0.1 and
    LSA alone (ceiling), and LoCoMo with each tenant's own speaker name removed (an oracle: it
    needs per-tenant state)."""
    def mixed(pick_main: Callable[[str], bool], pick_e5: Callable[[str], bool]) -> tuple[dict, dict]:
        return ({t: (s_main if pick_main(t) else base_main)[t] for t in base_main},
                {t: (s_e5 if pick_e5(t) else base_e5)[t] for t in base_e5})

    synthetic = sets["synthetic_tune"]
    cases = {"S English only": mixed(lambda t: language(t) == "en", lambda t: language(t) == "en"),
             "S Chinese only": mixed(lambda t: language(t) == "zh", lambda t: language(t) == "zh"),
             "S WordLlama half only": mixed(lambda t: True, lambda t: False),
             "S e5 half only": mixed(lambda t: False, lambda t: True)}
    for label, (main_v, e5_v) in cases.items():
        row = figures(synthetic, main_v, e5_v)
        print(json.dumps({"diagnostic": label, "synthetic_tune": row,
                          "ceiling": ceiling(synthetic, main_v, e5_v, row["leaves"])["per_language"]}), flush=True)
    for name in SETS:
        lsa = lsa_vectors(sets[name], lambda t: t)
        for weight in (0.1, 1.0):
            with with_lsa(weight):
                row = figures(sets[name], base_main,
                              {t: np.concatenate([base_e5[t], lsa[t]]) for t in (i.text for i in sets[name])}) \
                    if weight < 1 else {"leaves": None}
            print(json.dumps({"diagnostic": f"shipped+L@{weight:g}", name: row,
                              "ceiling": ceiling(sets[name], base_main, base_e5, row["leaves"], lsa=lsa,
                                                 lsa_weight=weight)["per_language"]}), flush=True)
    locomo = sets["locomo_tune"]
    speaker = {i.text: i.tenant.rsplit("-", 1)[-1] for i in locomo}
    named = {t: re.sub(rf"^{s}(?:'s)?\s+", "", t, flags=re.IGNORECASE) for t, s in speaker.items()}
    named = {t: (n[:1].upper() + n[1:]) if n != t else t for t, n in named.items()}
    inputs = sorted(set(named.values()))
    by_main, by_e5 = wordllama.get(inputs), e5.get(inputs)
    main_v = {**base_main, **{t: by_main[n] for t, n in named.items()}}
    e5_v = {**base_e5, **{t: by_e5[n] for t, n in named.items()}}
    row = figures(locomo, main_v, e5_v)
    print(json.dumps({"diagnostic": "LoCoMo speaker name removed (oracle)",
                      "changed": sum(n != t for t, n in named.items()), "locomo_tune": row,
                      "ceiling": ceiling(locomo, main_v, e5_v, row["leaves"])["per_language"]}), flush=True)


if __name__ == "__main__":
    main()
