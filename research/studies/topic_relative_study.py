"""Tenant-relative English thresholds in the bge spaces (B-both), on the tuning parts only, with the
rule fixed beforehand in research/studies/topic_relative_rule.md.

research/studies/topic_bge_study.py found bge-small-en better than the combined space on the synthetic half
and on LoCoMo separately, but at different absolute thresholds (place ~0.25 against ~0.40). Here
the English place / group / theme / attach thresholds are set per tenant and cycle from that
tenant's own cosines: its English memories seen so far (pool plus level-1 members), centred and
normalised as that cycle's placement does, their pairwise cosines C; family Q takes quantiles of
C, family Z mean + z·std. Margins and the merge threshold stay absolute (the shipped
near-duplicate check). Chinese stays at bge-zh 0.30 / 0.15 (absolute). Nothing is wired into
production: ``placement.plan_cycle`` is wrapped for the run (the study's seam).

Printed as JSON lines: the shipped row, each family's grid on T1 / T2 / GT with the thresholds it
gave per tenant, and each family's choice. ``--place-only`` is a diagnostic run after those
figures (only the place threshold relative; not eligible for a choice). ``--final FAMILY PLACE
GROUP THEME`` scores a qualified family's chosen setting on the held-out half, LoCoMo held-out and
the whole synthetic set, once (not run: nothing qualified).

    python research/studies/topic_relative_study.py > /tmp/topics_relative/study.jsonl
    python research/studies/topic_relative_study.py --place-only > /tmp/topics_relative/place_only.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mem_assets.reorg import placement
from mem_assets.reorg.evaluation import EvalItem
from mem_assets.reorg.placement import PlacementParams, Topic
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, E5_PARAMS
from mem_assets.reorg.topic_space import TopicSpace, languages
from mem_assets.reorg.topic_vectors import combine
from mem_resources.embedder import WordLlamaEmbedder, e5_query_embed
from research.studies import combined_space_study
from research.studies.combined_space_study import growth_check, heldout_sets, tuning_sets
from research.studies.topic_bge_study import VectorCache, figures, gain, qualifies, with_e5_tail

SETS = ("synthetic_tune", "locomo_tune")
ZH_PARAMS = replace(E5_PARAMS, place_similarity=0.30, group_similarity=0.15)
AXES = ("place", "group", "theme")
GRIDS = {"Q": {"place": [0.945, 0.955, 0.965, 0.975, 0.985], "group": [0.92, 0.945, 0.965, 0.98],
               "theme": [0.81, 0.86, 0.90]},
         "Z": {"place": [1.8, 2.0, 2.2, 2.45, 2.8], "group": [1.35, 1.8, 2.2, 2.65], "theme": [0.75, 1.0, 1.3]}}
ATTACH = {"Q": 0.91, "Z": 1.35}
#: Diagnostic only, run after the grids' T2 figures were seen (not eligible for a choice): the place
#: threshold relative (quantile), group / theme / attach absolute.
PLACE_ONLY = {"place": [0.955, 0.965, 0.975], "absolute": [(0.20, 0.08, 0.15), (0.25, 0.08, 0.15)]}


@dataclass(frozen=True)
class Relative:
    """English thresholds as positions in the tenant's own cosines: quantiles (Q) or z-scores (Z)."""

    family: str
    place: float
    group: float
    theme: float
    attach: float

    def at(self, cosines: np.ndarray) -> dict[str, float]:
        if self.family == "Qp":
            return {"place_similarity": round(float(np.quantile(cosines, self.place)), 4)}
        if self.family == "Q":
            q = np.quantile(cosines, [self.place, self.group, self.theme, self.attach])
        else:
            q = cosines.mean() + np.array([self.place, self.group, self.theme, self.attach]) * cosines.std()
        return {f"{name}_similarity": round(float(v), 4) for name, v in zip((*AXES, "attach"), q, strict=True)}


_STATE: dict[str, Any] = {"spec": None, "lang_of": {}, "tenant_of": {}, "given": {}}
_plan_cycle = placement.plan_cycle


def seen_in_space(topics: dict[str, Topic], ids: Sequence[str], vectors: np.ndarray, lang: str,
                  member_vectors: Callable[[Sequence[str]], np.ndarray], lang_of: dict[str, str],
                  tenant_of: dict[str, str]) -> tuple[np.ndarray, str]:
    """The tenant's memories of ``lang`` seen so far (this cycle's pool and the level-1 members),
    centred and normalised as this cycle's placement does, and the tenant's name."""
    members = sorted({m for t in topics.values() if t.level == 1 for m in t.children
                      if lang_of.get(m, lang) == lang} - set(ids))
    roots = [t for t in topics.values() if t.parent is None]
    dimension = np.asarray(vectors).shape[1] if len(ids) else len(roots[0].vector_sum)
    pool = np.asarray(vectors, dtype=np.float32).reshape(len(ids), dimension)
    space = TopicSpace.fit([r.language for r in roots], placement._means(roots, dimension), [lang] * len(ids), pool)
    seen = np.vstack([pool, member_vectors(members)]) if members else pool
    tenant = tenant_of.get(next(iter(ids), members[0] if members else ""), "?")
    return space.project(seen, [lang] * len(seen)).astype(np.float64), tenant


def _relative_plan_cycle(topics: dict[str, Topic], ids: Sequence[str], vectors: np.ndarray, langs: Sequence[str],
                         params: PlacementParams, member_vectors: Callable[[Sequence[str]], np.ndarray],
                         *args: Any, **kwargs: Any) -> placement.CyclePlan:
    """plan_cycle with English thresholds from this tenant's cosines at this cycle."""
    spec: Relative | None = _STATE["spec"]
    lang = langs[0] if len(langs) else next((t.language for t in topics.values()), None)
    if spec is not None and lang == "en":
        projected, tenant = seen_in_space(topics, ids, vectors, lang, member_vectors, _STATE["lang_of"],
                                          _STATE["tenant_of"])
        if len(projected) >= 3:
            cosines = (projected @ projected.T)[np.triu_indices(len(projected), 1)]
            params = replace(params, **spec.at(cosines))
            _STATE["given"][tenant] = {"n": len(projected), **spec.at(cosines)}
    return _plan_cycle(topics, ids, vectors, langs, params, member_vectors, *args, **kwargs)


@contextmanager
def relative(spec: Relative | None, items: Sequence[EvalItem]) -> Iterator[dict[str, Any]]:
    ids = [f"m{k}" for k in range(len(items))]
    _STATE.update(spec=spec, lang_of=dict(zip(ids, languages(i.text for i in items).tolist(), strict=True)),
                  tenant_of={m: i.tenant for m, i in zip(ids, items, strict=True)}, given={})
    placement.plan_cycle = combined_space_study.plan_cycle = _relative_plan_cycle  # type: ignore[assignment]
    try:
        yield _STATE["given"]
    finally:
        placement.plan_cycle = combined_space_study.plan_cycle = _plan_cycle  # type: ignore[assignment]
        _STATE["spec"] = None


def score(sets: dict[str, list[EvalItem]], names: Sequence[str], en_space: dict[str, np.ndarray],
          zh_space: dict[str, np.ndarray], en_params: PlacementParams, zh_params: PlacementParams,
          spec: Any, seam: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Each named set's figures with ``spec`` applied through ``seam`` (default ``relative``; the
    nearest-neighbour study passes its own), and the thresholds it gave at the last cycle."""
    row: dict[str, Any] = {}
    for name in names:
        with (seam or relative)(spec, sets[name]) as given:
            if name == "growth":
                row[name] = growth_check(sets[name], en_space, en_params)
            else:
                row[name] = figures(sets[name], en_space, zh_space, en_params, zh_params)
            if spec is not None:
                row[name]["thresholds_last_cycle"] = dict(sorted(given.items()))
    return row


def choose(family: str, rows: dict[tuple[float, ...], dict[str, Any]], axes: dict[str, Sequence[float]],
           shipped: dict[str, Any], place_axis: int) -> dict[str, Any] | None:
    """The rule's choice among a grid's rows: qualifying with at least half of its one-step
    neighbours qualifying, the largest T1 gain, then the higher place threshold; prints the tally."""
    def near(combo: tuple[float, ...]) -> list[dict[str, Any]]:
        out = []
        for k, values in enumerate(axes.values()):
            at = list(values).index(combo[k])
            out.extend(rows[(*combo[:k], values[at + step], *combo[k + 1:])]
                       for step in (-1, 1) if 0 <= at + step < len(values))
        return out

    robust = [c for c, r in rows.items() if r["qualifies"] and 2 * sum(n["qualifies"] for n in near(c)) >= len(near(c))]
    key = lambda c: (rows[c]["gain"], c[place_axis])
    chosen = max(robust, key=key) if robust else None
    best = max(rows, key=key)
    passes_t2 = [c for c, r in rows.items() if r["locomo_tune"]["purity"] >= shipped["locomo_tune"]["purity"] - 0.002
                 and r["locomo_tune"]["placed"] >= shipped["locomo_tune"]["placed"] - 0.002]
    passes_t1 = [c for c, r in rows.items() if qualifies({**r, "locomo_tune": shipped["locomo_tune"],
                                                           "growth": {"passes": True}}, shipped)]
    print(json.dumps({"choice": family, "settings": len(rows), "qualifying": sum(r["qualifies"] for r in rows.values()),
                      "robust": len(robust), "chosen": chosen and rows[chosen]["setting"],
                      "best_gain": rows[best]["setting"], "passing_t1": len(passes_t1), "passing_t2": len(passes_t2),
                      "passing_both": len(set(passes_t1) & set(passes_t2)),
                      "neighbours_of_best": [(n["setting"], n["qualifies"], n["gain"]) for n in near(best)]}),
          flush=True)
    return rows[chosen] if chosen else None


def grid(family: str, sets: dict[str, list[EvalItem]], en_space: dict[str, np.ndarray],
         zh_space: dict[str, np.ndarray], shipped: dict[str, Any]) -> dict[str, Any] | None:
    axes = GRIDS[family]
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*axes.values()):
        spec = Relative(family, *combo, attach=ATTACH[family])
        row = score(sets, (*SETS, "growth"), en_space, zh_space, COMBINED_PARAMS, ZH_PARAMS, spec)
        row.update(setting=dict(zip(axes, combo, strict=True)), qualifies=qualifies(row, shipped),
                   gain=gain(row, shipped))
        rows[combo] = row
        print(json.dumps({"grid": family, **row}), flush=True)

    return choose(family, rows, axes, shipped, place_axis=0)


def spaces(cache: Path, texts: list[str]) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, np.ndarray]]]:
    from research.studies.topic_bge_study import bge_vectors

    caches = {"wordllama": VectorCache(cache / "wordllama.npz", lambda: WordLlamaEmbedder().embed),
              "e5": VectorCache(cache / "e5_query.npz", lambda: e5_query_embed),
              "bge_en": VectorCache(cache / "bge_en.npz", lambda: bge_vectors("en")),
              "bge_zh": VectorCache(cache / "bge_zh.npz", lambda: bge_vectors("zh"))}
    vec = {name: c.get(texts) for name, c in caches.items()}
    combined = dict(zip(texts, combine(np.array([vec["wordllama"][t] for t in texts]),
                                       np.array([vec["e5"][t] for t in texts]), 0.8), strict=True))
    return ({"shipped": combined, "bge": with_e5_tail(vec["bge_en"], vec["e5"])},
            {"shipped": vec["e5"], "bge": with_e5_tail(vec["bge_zh"], vec["e5"])})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_bge"))
    parser.add_argument("--place-only", action="store_true",
                        help="diagnostic (not a choice): only the place threshold relative")
    parser.add_argument("--final", nargs=4, metavar=("FAMILY", "PLACE", "GROUP", "THEME"),
                        help="score a qualified family's chosen setting on the held-out parts, once")
    args = parser.parse_args()
    if args.final:
        sets = heldout_sets()
        names: Sequence[str] = tuple(sets)
        family, *values = args.final
        spec: Relative | None = Relative(family, *map(float, values), attach=ATTACH[family])
    else:
        sets, names, spec = tuning_sets(), SETS, None
    texts = sorted({i.text for items in sets.values() for i in items})
    en_spaces, zh_spaces = spaces(args.cache, texts)
    shipped = score(sets, (*names, "growth") if not args.final else names, en_spaces["shipped"], zh_spaces["shipped"],
                    COMBINED_PARAMS, E5_PARAMS, None)
    print(json.dumps({"candidate": "shipped", **shipped}), flush=True)
    if args.final:
        row = score(sets, names, en_spaces["bge"], zh_spaces["bge"], COMBINED_PARAMS, ZH_PARAMS, spec)
        print(json.dumps({"final": args.final, **row}), flush=True)
        return
    if args.place_only:
        for q, (group, theme, attach) in itertools.product(*PLACE_ONLY.values()):
            params = replace(COMBINED_PARAMS, group_similarity=group, theme_similarity=theme, attach_similarity=attach)
            row = score(sets, (*SETS, "growth"), en_spaces["bge"], zh_spaces["bge"], params, ZH_PARAMS,
                        Relative("Qp", q, group, theme, attach))
            print(json.dumps({"diagnostic": "place-only", "setting": {"place_q": q, "group": group, "theme": theme,
                                                                         "attach": attach}, **row,
                              "qualifies": qualifies(row, shipped), "gain": gain(row, shipped)}), flush=True)
        return
    absolute = score(sets, (*SETS, "growth"), en_spaces["bge"], zh_spaces["bge"], COMBINED_PARAMS, ZH_PARAMS, None)
    print(json.dumps({"candidate": "B-both absolute (shipped en thresholds, zh 0.30/0.15)", **absolute,
                      "qualifies": qualifies(absolute, shipped)}), flush=True)
    for family in GRIDS:
        grid(family, sets, en_spaces["bge"], zh_spaces["bge"], shipped)


if __name__ == "__main__":
    main()
