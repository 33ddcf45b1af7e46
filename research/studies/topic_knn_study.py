"""English thresholds referenced to each tenant's nearest-neighbour cosines in the bge spaces
(B-both), on the tuning parts only, with the rule fixed beforehand in research/studies/topic_knn_rule.md.

research/studies/topic_relative_study.py set thresholds from a tenant's whole cosine spread, which mostly
follows how many themes the tenant has. Here the reference is local: at every cycle, for each
tenant, its English memories seen so far (pool plus level-1 members), centred and normalised as
that cycle's placement does; r_k = the median over those memories of the cosine to their k-th
nearest neighbour. Family K: place = a·r_k, group = g·r_k, attach = t·r_k (theme, margins and
merge absolute at the shipped values, so the near-duplicate check is the shipped one). Family P:
only place = a·r_k; group / theme / attach absolute at B-both's best-gain values (0.25 / 0.08 /
0.15). Chinese stays at bge-zh 0.30 / 0.15 (absolute), as in the relative study. Nothing is wired
into production: ``placement.plan_cycle`` is wrapped for the run (the study's seam).

Printed as JSON lines: ``--references SET`` only the reference values per tenant and cycle (no
placement figure; used to fix the grid from T1); otherwise the shipped row, B-both absolute, each
family's grid on T1 / T2 / GT with the thresholds it gave per tenant, and each family's choice.
``--final FAMILY K PLACE GROUP ATTACH`` scores a qualified family's chosen setting on the held-out
half, LoCoMo held-out and the whole synthetic set, once (not run: nothing qualified).

    python research/studies/topic_knn_study.py --references synthetic_tune > /tmp/topics_knn/references_t1.jsonl
    python research/studies/topic_knn_study.py > /tmp/topics_knn/study.jsonl
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
from mem_assets.reorg.topic_space import languages
from research.studies import combined_space_study
from research.studies.combined_space_study import growth_check, heldout_sets, tuning_sets
from research.studies.topic_bge_study import figures, gain, qualifies
from research.studies.topic_relative_study import ZH_PARAMS, choose, score, seen_in_space, spaces

SETS = ("synthetic_tune", "locomo_tune")
KS = (2, 3, 5)
#: T1's r_k (one tenant, English), mean over its three cycles (143, 257, 355 memories seen): the
#: label-free look the grid was fixed from (research/studies/topic_knn_rule.md), before any placement figure.
T1_SCALE = {2: 0.3912, 3: 0.3528, 5: 0.3057}
#: Grid values are T1-equivalent cosines x: the factor is x / T1_SCALE[k], so each k starts from the
#: same thresholds on T1 on average and differs where tenants' r_k differ.
GRIDS = {"K": {"k": [2, 3, 5], "place": [0.20, 0.25, 0.30, 0.35], "group": [0.15, 0.20, 0.25, 0.30]},
         "P": {"k": [2, 3, 5], "place": [0.20, 0.25, 0.30, 0.35]}}
ATTACH = 0.15


def factor(x: float, k: int) -> float:
    return round(x / T1_SCALE[k], 3)
P_ABSOLUTE = {"group_similarity": 0.25, "theme_similarity": 0.08, "attach_similarity": 0.15}


@dataclass(frozen=True)
class Knn:
    """English thresholds as multiples of r_k (the tenant's median k-th-nearest-neighbour cosine)."""

    family: str
    k: int
    place: float
    group: float = 0.0
    attach: float = 0.0

    def at(self, r: float) -> dict[str, float]:
        if self.family == "P":
            return {"place_similarity": round(self.place * r, 4), **P_ABSOLUTE}
        return {"place_similarity": round(self.place * r, 4), "group_similarity": round(self.group * r, 4),
                "attach_similarity": round(self.attach * r, 4)}


def references(projected: np.ndarray) -> dict[int, float]:
    """r_k for each k: median over rows of the cosine to the row's k-th nearest other row."""
    sims = projected @ projected.T
    np.fill_diagonal(sims, -np.inf)
    ordered = -np.sort(-sims, axis=1)
    return {k: round(float(np.median(ordered[:, k - 1])), 4) for k in KS if k < len(projected)}


_STATE: dict[str, Any] = {"spec": None, "lang_of": {}, "tenant_of": {}, "given": {}, "trace": None}
_plan_cycle = placement.plan_cycle


def _knn_plan_cycle(topics: dict[str, Topic], ids: Sequence[str], vectors: np.ndarray, langs: Sequence[str],
                    params: PlacementParams, member_vectors: Callable[[Sequence[str]], np.ndarray],
                    *args: Any, **kwargs: Any) -> placement.CyclePlan:
    """plan_cycle with English thresholds from this tenant's r_k at this cycle."""
    spec: Knn | None = _STATE["spec"]
    lang = langs[0] if len(langs) else next((t.language for t in topics.values()), None)
    if (spec is not None or _STATE["trace"] is not None) and lang == "en":
        projected, tenant = seen_in_space(topics, ids, vectors, lang, member_vectors, _STATE["lang_of"],
                                          _STATE["tenant_of"])
        refs = references(projected)
        if _STATE["trace"] is not None:
            roots = [t for t in topics.values() if t.parent is None]
            _STATE["trace"].append({"tenant": tenant, "n": len(projected), "topics": len(roots),
                                    **{f"r{k}": v for k, v in refs.items()}})
        if spec is not None and spec.k in refs:
            params = replace(params, **spec.at(refs[spec.k]))
            _STATE["given"][tenant] = {"n": len(projected), f"r{spec.k}": refs[spec.k], **spec.at(refs[spec.k])}
    return _plan_cycle(topics, ids, vectors, langs, params, member_vectors, *args, **kwargs)


@contextmanager
def knn(spec: Knn | None, items: Sequence[EvalItem], trace: list[dict[str, Any]] | None = None
        ) -> Iterator[dict[str, Any]]:
    ids = [f"m{k}" for k in range(len(items))]
    _STATE.update(spec=spec, lang_of=dict(zip(ids, languages(i.text for i in items).tolist(), strict=True)),
                  tenant_of={m: i.tenant for m, i in zip(ids, items, strict=True)}, given={}, trace=trace)
    placement.plan_cycle = combined_space_study.plan_cycle = _knn_plan_cycle  # type: ignore[assignment]
    try:
        yield _STATE["given"]
    finally:
        placement.plan_cycle = combined_space_study.plan_cycle = _plan_cycle  # type: ignore[assignment]
        _STATE.update(spec=None, trace=None)


def grid(family: str, sets: dict[str, list[EvalItem]], en_space: dict[str, np.ndarray],
         zh_space: dict[str, np.ndarray], shipped: dict[str, Any]) -> dict[str, Any] | None:
    axes = GRIDS[family]
    base = replace(COMBINED_PARAMS, **P_ABSOLUTE) if family == "P" else COMBINED_PARAMS
    rows: dict[tuple[float, ...], dict[str, Any]] = {}
    for combo in itertools.product(*axes.values()):
        setting = dict(zip(axes, combo, strict=True))
        k = int(setting["k"])
        spec = Knn(family, k, factor(setting["place"], k), factor(setting.get("group", 0.0), k),
                   factor(ATTACH, k) if family == "K" else 0.0)
        row = score(sets, (*SETS, "growth"), en_space, zh_space, base, ZH_PARAMS, spec, seam=knn)
        row.update(setting=setting, factors={"place": spec.place, "group": spec.group, "attach": spec.attach},
                   qualifies=qualifies(row, shipped), gain=gain(row, shipped))
        rows[combo] = row
        print(json.dumps({"grid": family, **row}), flush=True)

    return choose(family, rows, axes, shipped, place_axis=1)


def trace_references(items: list[EvalItem], en_space: dict[str, np.ndarray], zh_space: dict[str, np.ndarray],
                     growth: bool = False) -> list[dict[str, Any]]:
    """r_k per tenant and cycle under B-both's absolute thresholds; the placement is not reported."""
    trace: list[dict[str, Any]] = []
    with knn(None, items, trace):
        if growth:
            growth_check(items, en_space, COMBINED_PARAMS)
        else:
            figures(items, en_space, zh_space, COMBINED_PARAMS, ZH_PARAMS)
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/topics_bge"))
    parser.add_argument("--references", choices=(*SETS, "growth"),
                        help="only the reference values per tenant and cycle of one set (no placement figure)")
    parser.add_argument("--final", nargs=5, metavar=("FAMILY", "K", "PLACE", "GROUP", "ATTACH"),
                        help="score a qualified family's chosen setting on the held-out parts, once")
    args = parser.parse_args()
    if args.final:
        sets = heldout_sets()
        names: Sequence[str] = tuple(sets)
    else:
        sets, names = tuning_sets(), SETS
        if args.references:
            sets = {args.references: sets[args.references]}
    texts = sorted({i.text for items in sets.values() for i in items})
    en_spaces, zh_spaces = spaces(args.cache, texts)
    if args.references:
        for entry in trace_references(sets[args.references], en_spaces["bge"], zh_spaces["bge"],
                                      growth=args.references == "growth"):
            print(json.dumps({"references": args.references, **entry}), flush=True)
        return
    shipped = score(sets, names if args.final else (*names, "growth"), en_spaces["shipped"], zh_spaces["shipped"],
                    COMBINED_PARAMS, E5_PARAMS, None, seam=knn)
    print(json.dumps({"candidate": "shipped", **shipped}), flush=True)
    if args.final:
        family, k, place, group, attach = args.final
        spec = Knn(family, int(k), float(place), float(group), float(attach))
        base = replace(COMBINED_PARAMS, **P_ABSOLUTE) if family == "P" else COMBINED_PARAMS
        print(json.dumps({"items": {n: len(sets[n]) for n in names}}), flush=True)
        row = score(sets, names, en_spaces["bge"], zh_spaces["bge"], base, ZH_PARAMS, spec, seam=knn)
        print(json.dumps({"final": args.final, **row}), flush=True)
        return
    for name in (*SETS, "growth"):
        for entry in trace_references(sets[name], en_spaces["bge"], zh_spaces["bge"], growth=name == "growth"):
            print(json.dumps({"references": name, **entry}), flush=True)
    absolute = score(sets, (*SETS, "growth"), en_spaces["bge"], zh_spaces["bge"], COMBINED_PARAMS, ZH_PARAMS, None, seam=knn)
    print(json.dumps({"candidate": "B-both absolute (shipped en thresholds, zh 0.30/0.15)", **absolute,
                      "qualifies": qualifies(absolute, shipped)}), flush=True)
    for family in GRIDS:
        grid(family, sets, en_spaces["bge"], zh_spaces["bge"], shipped)


if __name__ == "__main__":
    main()
