"""Study: which of the offline judge's pairs the LLM should see (rule: llm_route_rule.md).

``python -m research.studies.llm_route_study train [1|2|3]``  every variant of a round (default 2),
                                                        training files, both sources
``python -m research.studies.llm_route_study heldout B CR CC on|off``  the chosen variant, today's
                                                        routing and offline only, held-out files (once)
``python -m research.studies.llm_route_study heldout3 BR BC M``  round 3's chosen variant (near bands
                                                        of redundant / contradictory, merge reach)
``python -m research.studies.llm_route_study round4``    round 4's variants: training files (out of fold),
                                                        fresh6 and fresh7 (shipped), both oracles
``python -m research.studies.llm_route_study fresh8 M S`` the chosen reaches and today's, fresh8 (once)
``python -m research.studies.llm_route_study round5``    round 4's variants on fresh8 (round 5's missing figures)
``python -m research.studies.llm_route_study fresh9 M S`` round 5's chosen reaches and today's, fresh9 (once)
``python -m research.studies.llm_route_study round6``    what weigh accepts (W0 / W1 / W2), every tuning file
``python -m research.studies.llm_route_study round7``    near bands × restatements near / continued, 4 a call
``python -m research.studies.llm_route_study batching``  new memories per judging call 1 / 2 / 4 / 8 (calls, tokens)
``python -m research.studies.llm_route_study fresh10 BR BC P``  round 7's choice, today's routing and round 6's W1, fresh10 (once)
``python -m research.studies.llm_route_study round8``    carried-share routing t = 0 / 0.60 / 0.67 / 0.75, fresh6–10,
                                                        exact shipped judgments, both oracles
``python -m research.studies.llm_route_study fresh11 T``  carried share T against 0 through ``memtend eval-judge``,
                                                        fresh11 (once), both oracles
``python -m research.studies.llm_route_study bands11``   three near-band widths, shipped otherwise, fresh11 (after
                                                        the choice: a report), both oracles
``python -m research.studies.llm_route_study cli [T …]`` the shipped defaults through ``memtend eval-judge``
                                                        (each carried share T), held-out files, both oracles

A variant is (``b``, ``c``, ``ride``): pairs left independent with P ≥ t − b are routed (near);
decisions with P < t + c · (1 − t) are routed (doubtful; ``c`` "scaled" is today's b / t; round 2
has one ``c`` for redundant decisions and one for contradictory ones); with
``ride``, a new memory that gets a call also sends its other decisions. The offline judgments come
from ``llm_band_study.offline_judgments`` (made once per file at band 1.0, where every pair the
accurate stage decides is near or doubtful), here cached under /tmp/judgeband/offline; on the
training files also "out of fold" (``judge_oof.py``: the accurate stage's probabilities replaced).
Scoring is ``memtend eval-judge``'s: candidate search, the judge, then the resolution guards.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr

from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.evaluation import score
from mem_assets.dedup.llm_judge_prompt import JudgeRequest
from mem_assets.dedup.offline_judge_features import dated_events
from mem_assets.dedup.pair_judge import Advance, DeepVectors, Judgment, OfflineJudge, RoutedJudge, _judge_by_newer
from mem_assets.dedup.resolution_guards import guard_judgments
from mem_assets.resources import build_judge
from mem_resources.llm import ChatUsage
from research.oracle.server import oracle_server
from research.studies import llm_band_study as band

band.CACHE = Path("/tmp/judgeband/offline")
OOF = Path("/tmp/judgeband/oof.pkl")
CLASSES = ("contradictory", "independent", "redundant")
ROUND_1 = [(b, c, c, ride) for b in (0.30, 0.45) for c in ("scaled", 0.5, 0.75, 1.0) for ride in (False, True)
           if not (c == 1.0 and ride)]
VARIANTS = [(b, red, con, ride) for b in (0.25, 0.30) for red in (0.70, 0.75, 0.85) for con in (0.47, 0.75)
            for ride in (False, True)]
"""Round 2 (llm_route_rule.md): (b, c for redundant decisions, c for contradictory ones, ride)."""
TODAY = (0.30, "scaled", "scaled", False)
ROUND_3 = [((b_r, b_c), m, 0.47, False) for b_r in (0.30, 0.40, 0.50, 0.60) for b_c in (0.20, 0.30)
           for m in (0.70, 0.85)]
"""Round 3: ((near band of redundant, of contradictory), merge reach, supersede reach, no ride)."""
SHIPPED = ((0.30, 0.30), 0.70, 0.47, False)
ROUND_4 = [((0.60, 0.20), m, s, False) for m in (0.70, 1.0) for s in (0.47, 0.75, 1.0)]
"""Round 4: the shipped near bands, merge reach m and supersede reach s (1.0: every decision shown)."""
band.FILES["fresh"] = {name: band.DATA / name / "heldout.jsonl" for name in ("fresh6", "fresh7")}
band.FILES["fresh8"] = {"fresh8": band.DATA / "fresh8" / "heldout.jsonl"}
band.FILES["fresh9"] = {"fresh9": band.DATA / "fresh9" / "heldout.jsonl"}
band.FILES["fresh10"] = {"fresh10": band.DATA / "fresh10" / "heldout.jsonl"}
ROUND_6 = ("none", "near", "decided")
"""Round 6: where ``weigh`` takes the LLM's "redundant" on a pair read offline as a change."""
ROUND_8 = (0.0, 0.60, 0.67, 0.75)
"""Round 8: ``MEMTEND_LLM_NEAR_CARRIED`` (0: today)."""
SHIPPED_CACHE = Path("/tmp/judgeband/shipped")
FRESH11 = band.DATA / "fresh11" / "heldout.jsonl"
ROUND_7 = [((b_r, b_c), 1.0, 1.0, False) for b_r, b_c in ((0.60, 0.20), (0.70, 0.30), (0.80, 0.40))]
"""Round 7: near bands (with round 6's policies "near" and "continued"), four new memories a call."""
PROBABILITIES: dict[tuple[str, str], dict[str, float]] = {}
"""Out-of-fold probabilities of the pairs being scored, for exact per-label near bands."""


def reach(c: float | str, b: float, t: float) -> float:
    """The P under which a decision at threshold ``t`` is routed."""
    return t + (b / t if c == "scaled" else float(c)) * (1 - t)


class Routed(OfflineJudge):
    """Stored judgments (band 1.0) narrowed to a variant."""

    c_redundant: str = "scaled"
    """"scaled" or a float's text (Dagster config takes no union)."""
    c_contradictory: str = "scaled"
    band_contradictory: float | None = None
    """Round 3: the near band of contradictory pairs (``review_band`` is then the redundant one's)."""
    ride: bool = False
    _stored: dict[tuple[str, str], Judgment] = PrivateAttr(default_factory=dict)
    _bars: dict[str, float] = PrivateAttr(default_factory=dict)

    def load(self, stored: dict[tuple[str, str], Judgment], bars: dict[str, float]) -> Routed:
        self._stored, self._bars = stored, bars
        return self

    def bands(self) -> dict[str, float]:
        b_c = self.review_band if self.band_contradictory is None else self.band_contradictory
        return {"redundant": self.review_band, "contradictory": b_c}

    def narrowed(self, judgment: Judgment, pair: tuple[str, str] | None = None) -> Judgment:
        b = self.review_band
        bands = self.bands()
        p = PROBABILITIES.get(pair) if pair is not None else None
        if judgment.near is not None and p is not None:
            close = [(p[k] - self._bars[k], k) for k in bands if p[k] >= self._bars[k] - bands[k]]
            if not close:
                return replace(judgment, near=None, near_probability=None)
            near = max(close)[1]
            return replace(judgment, near=near, near_probability=p[near])
        if judgment.near is not None and judgment.near_probability < self._bars[judgment.near] - bands[judgment.near]:
            return replace(judgment, near=None, near_probability=None)
        c = self.c_redundant if judgment.label == "redundant" else self.c_contradictory
        if judgment.doubtful and judgment.near_probability >= reach(c, b, self._bars[judgment.label]):
            return replace(judgment, doubtful=False)
        return judgment

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        return _judge_by_newer(self, pairs)

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        out = []
        for request in requests:
            stored = [self._stored[pair] for pair in request.pairs()]
            judged = [self.narrowed(j, pair) for j, pair in zip(stored, request.pairs(), strict=True)]
            if self.ride and any(j.near is not None or j.doubtful for j in judged):
                judged = [replace(j, doubtful=True) if s.doubtful else j for j, s in zip(judged, stored, strict=True)]
            out.append(judged)
        return out, ChatUsage()


class Exact(OfflineJudge):
    """The shipped routing's offline judgments, stored: what ``build_judge``'s offline judge gives."""

    _stored: dict[tuple[str, str], Judgment] = PrivateAttr(default_factory=dict)

    def load(self, stored: dict[tuple[str, str], Judgment]) -> Exact:
        self._stored = stored
        return self

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        return _judge_by_newer(self, pairs)

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        return [[self._stored[pair] for pair in request.pairs()] for request in requests], ChatUsage()


def shipped_judgments(name: str, path: Path) -> tuple[list[dict], list[bool], dict[tuple[str, str], Judgment]]:
    """Rows, candidate flags and the offline judgments of the shipped routing (its near bands and
    confirmation reach), cached in /tmp."""
    cache = SHIPPED_CACHE / f"{name}.pkl"
    rows, flags, _ = band.offline_judgments(name, path)
    if cache.exists():
        return rows, flags, pickle.loads(cache.read_bytes())
    settings = band._settings(band._env("http://127.0.0.1:9", 0.30, "uncertain"))
    routed = build_judge(settings, in_dagster=False)
    assert isinstance(routed, RoutedJudge)
    pairs = list(dict.fromkeys((r["a"], r["b"]) for r, flag in zip(rows, flags, strict=True) if flag))
    judged, _ = routed.offline.judge_pairs(pairs)
    stored = dict(zip(pairs, judged, strict=True))
    SHIPPED_CACHE.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(stored))
    return rows, flags, stored


def round8(files: Sequence[str], shares: Sequence[float]) -> list[dict[str, Any]]:
    """Carried-share routing over the exact shipped judgments, both oracles."""
    results = []
    for name in files:
        path = band.DATA / name / "heldout.jsonl"
        rows, flags, stored = shipped_judgments(name, path)
        for oracle_name, wrong in band.ORACLES.items():
            with oracle_server(pairs=[path], wrong=wrong, seed=band.SEED) as oracle:
                routed = build_judge(band._settings(band._env(oracle.base_url, 0.30, "uncertain")), in_dagster=False)
                assert isinstance(routed, RoutedJudge)
                for t in shares:
                    judge = routed.model_copy(update={"offline": Exact().load(stored), "near_carried": t})
                    results.append({"file": name, "source": "shipped", "oracle": oracle_name,
                                    "variant": f"carried {t:g}", "near_carried": t, **scored(rows, flags, judge)})
                    print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return results


def out_of_fold(stored: dict[tuple[str, str], Judgment], probabilities: dict[tuple[str, str], list[float]],
                bars: dict[str, float]) -> dict[tuple[str, str], Judgment]:
    """``stored`` with each accurate-stage model judgment re-derived from out-of-fold probabilities."""
    out = {}
    for pair, judgment in stored.items():
        if not (judgment.near is not None or judgment.doubtful):
            out[pair] = judgment
            continue
        p = dict(zip(CLASSES, probabilities[pair], strict=True))
        PROBABILITIES[pair] = p
        if p["redundant"] >= bars["redundant"] and p["redundant"] >= p["contradictory"]:
            label = "redundant"
        elif p["contradictory"] >= bars["contradictory"]:
            label = "contradictory"
        else:
            label = "independent"
        if label != "independent" and dated_events(*pair):
            out[pair] = replace(judgment, label="independent", near=None, near_probability=None, doubtful=False,
                                reason="two dated events (out of fold)")
        elif label != "independent":
            out[pair] = replace(judgment, label=label, near=None, near_probability=p[label], doubtful=True,
                                reason=f"out of fold: P({label}) = {p[label]:.2f}")
        else:
            near = max(("redundant", "contradictory"), key=lambda k: p[k] - bars[k])
            out[pair] = replace(judgment, label="independent", near=near, near_probability=p[near], doubtful=False,
                                reason=f"out of fold: P({near}) = {p[near]:.2f}")
    return out


def scored(rows: list[dict], flags: list[bool], judge: Any) -> dict[str, Any]:
    judged = [i for i, flag in enumerate(flags) if flag]
    pairs = [(rows[i]["a"], rows[i]["b"]) for i in judged]
    answers, usage = judge.judge_pairs(pairs)
    judgments = guard_judgments(pairs, answers)
    predicted = ["independent"] * len(rows)
    for i, judgment in zip(judged, judgments, strict=True):
        predicted[i] = judgment.label
    result = score([row["label"] for row in rows], predicted)
    new = len({row["b"] for row in rows})
    return {"pairs": len(rows), "new_memories": new,
            "redundant_p": result["classes"]["redundant"]["precision"],
            "redundant_r": result["classes"]["redundant"]["recall"],
            "redundant_f1": result["classes"]["redundant"]["f1"],
            "contradictory_f1": result["classes"]["contradictory"]["f1"],
            "wrong": result["wrong_total"]["count"], "wrong_pct": result["wrong_total"]["percent"],
            "llm_calls": usage.calls, "calls_per_new_memory": round(usage.calls / new, 3),
            "tokens_per_new_memory": round((usage.prompt_tokens + usage.completion_tokens) / new, 1),
            "failures": usage.failures, "routed": sum(j.routed for j in judgments)}


def run(split: str, variants: Sequence[tuple[float, float | str, float | str, bool]], sources: Sequence[str],
        references: bool = True, policies: Sequence[str] = ("none",),
        per_call: Sequence[int] = (1,)) -> list[dict[str, Any]]:
    bars = {k: v for k, v in judge_model.load("accurate").thresholds.items() if k in ("redundant", "contradictory")}
    oof = pickle.loads(OOF.read_bytes()) if "out of fold" in sources else {}
    results = []
    for name, path in band.FILES[split].items():
        rows, flags, shipped = band.offline_judgments(name, path)
        for source in sources:
            PROBABILITIES.clear()
            stored = shipped if source == "shipped" else out_of_fold(shipped, oof[name], bars)
            base = {"file": name, "source": source}
            if references:
                offline = Routed(review_band=0.0).load(stored, bars)
                results.append({**base, "oracle": "–", "variant": "offline only",
                                **scored(rows, flags, offline)})
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
            for oracle_name, wrong in band.ORACLES.items():
                with oracle_server(pairs=[path], wrong=wrong, seed=band.SEED) as oracle:
                    routed = build_judge(band._settings(band._env(oracle.base_url, 0.30, "uncertain")),
                                         in_dagster=False)
                    assert isinstance(routed, RoutedJudge)
                    for (b, red, con, ride), policy, k in ((v, p, k) for v in variants for p in policies
                                                           for k in per_call):
                        b_r, b_c = b if isinstance(b, tuple) else (b, None)
                        offline = Routed(review_band=b_r, band_contradictory=b_c, c_redundant=str(red),
                                         c_contradictory=str(con), ride=ride).load(stored, bars)
                        judge = RoutedJudge(offline=offline, llm=routed.llm.model_copy(update={"memories_per_call": k}),
                                            restatements=policy)
                        results.append({**base, "oracle": oracle_name,
                                        "variant": f"b {b}, c {red} / {con}, ride {'on' if ride else 'off'}"
                                                   + ("" if policy == "none" else f", restatements {policy}")
                                                   + ("" if k == 1 else f", {k} a call"),
                                        "b": b, "c_redundant": red, "c_contradictory": con, "ride": ride,
                                        "restatements": policy, **scored(rows, flags, judge)})
                        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| file | source | oracle | variant | redundant P / R / F1 | contradictory F1 | wrong | calls / new memory |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['file']} ({r['pairs']}) | {r['source']} | {r['oracle']} | {r['variant']} "
                     f"| {r['redundant_p']:.3f} / {r['redundant_r']:.3f} / {r['redundant_f1']:.3f} "
                     f"| {r['contradictory_f1']:.3f} | {r['wrong']} ({r['wrong_pct']:.2f} %) "
                     f"| {r['calls_per_new_memory']:.3f} ({r['llm_calls']}) |")
    return "\n".join(lines)


def choose(results: list[dict[str, Any]]) -> list[tuple[float, float, float, str]]:
    """The rule's ranking: eligible variants by mean redundant F1 (perfect, out of fold), then calls."""
    by: dict[str, list[dict]] = {}
    for r in results:
        if r["variant"] != "offline only":
            by.setdefault(r["variant"], []).append(r)
    ranked = []
    for variant, rs in by.items():
        ok = all(r["calls_per_new_memory"] <= 0.3 and r["wrong_pct"] <= (1.0 if r["oracle"] == "perfect" else 2.0)
                 for r in rs)
        primary = [r for r in rs if r["source"] == "out of fold" and r["oracle"] == "perfect"]
        wrongish = [r for r in rs if r["source"] == "out of fold" and r["oracle"] != "perfect"]
        f1 = sum(r["redundant_f1"] for r in primary) / len(primary)
        calls = sum(r["calls_per_new_memory"] for r in primary) / len(primary)
        f1_wrong = sum(r["redundant_f1"] for r in wrongish) / len(wrongish)
        ranked.append((f1, calls, f1_wrong, f"{variant}{'' if ok else ' (not eligible)'}"))
    return sorted(ranked, key=lambda x: (-x[0], x[1]))


def cli(files: dict[str, Path], variants: Sequence[dict[str, str]] = ({},)) -> None:
    """Files through the product CLI (``memtend eval-judge``) with the shipped routing and each
    variant's settings over it (e.g. ``MEMTEND_LLM_NEAR_CARRIED``), both oracles."""
    for name, path in files.items():
        new = len({row["b"] for row in band.read_pairs(path)})
        for oracle_name, wrong in band.ORACLES.items():
            with oracle_server(pairs=[path], wrong=wrong, seed=band.SEED) as oracle:
                for variant in variants:
                    env = {**os.environ, **band._env(oracle.base_url, 0.30, "uncertain"), **variant}
                    out = subprocess.run([sys.executable, "-m", "mem_assets.cli", "eval-judge", str(path)], env=env,
                                         capture_output=True, text=True, check=True).stdout
                    r = json.loads(out.strip().splitlines()[-1])
                    print(json.dumps({"file": name, "oracle": oracle_name, "variant": variant,
                                      "redundant": r["classes"]["redundant"],
                                      "contradictory_f1": r["classes"]["contradictory"]["f1"], "wrong": r["wrong_total"],
                                      "calls": r["judge_calls"], "calls_per_new_memory": round(r["judge_calls"] / new, 3),
                                      "routed": r["pairs_routed_to_llm"], "carried": r["pairs_routed_carried"]}),
                          flush=True)


def main() -> None:
    split = sys.argv[1]
    if split == "cli":
        cli(band.FILES["heldout"], [{"MEMTEND_LLM_NEAR_CARRIED": t} for t in sys.argv[2:]] or [{}])
        return
    if split == "fresh11":
        cli({"fresh11": FRESH11}, [{"MEMTEND_LLM_NEAR_CARRIED": t} for t in ("0", sys.argv[2])])
        return
    if split == "bands11":
        cli({"fresh11": FRESH11}, [{"MEMTEND_LLM_NEAR_MERGES": m, "MEMTEND_LLM_NEAR_SUPERSEDES": c}
                                   for m, c in (("0.60", "0.20"), ("0.70", "0.30"), ("0.80", "0.40"))])
        return
    if split == "train":
        rounds = {"1": ROUND_1, "2": VARIANTS, "3": ROUND_3}
        results = run("train", rounds[(sys.argv[2:] or ["2"])[0]], ("shipped", "out of fold"))
    elif split == "round4":
        results = run("train", ROUND_4, ("out of fold",)) + run("fresh", ROUND_4, ("shipped",))
    elif split == "round6":
        results = [r for files in ("train", "fresh", "fresh8", "fresh9")
                   for r in run(files, [ROUND_4[-1]], ("out of fold",) if files == "train" else ("shipped",),
                                references=False, policies=ROUND_6)]
    elif split == "round7":
        results = [r for files in ("train", "fresh", "fresh8", "fresh9")
                   for r in run(files, ROUND_7, ("out of fold",) if files == "train" else ("shipped",),
                                references=False, policies=("near", "continued"), per_call=(4,))]
    elif split == "round8":
        results = round8([f"fresh{n}" for n in range(6, 11)], ROUND_8)
    elif split == "batching":
        results = [r for files in ("train", "fresh", "fresh8", "fresh9")
                   for r in run(files, [ROUND_4[-1]], ("out of fold",) if files == "train" else ("shipped",),
                                references=False, per_call=(1, 2, 4, 8))]
    elif split == "fresh10":
        chosen = ((float(sys.argv[2]), float(sys.argv[3])), 1.0, 1.0, False)
        results = (run("fresh10", [chosen], ("shipped",), references=True, policies=(sys.argv[4],), per_call=(4,))
                   + run("fresh10", [ROUND_4[-1]], ("shipped",), references=False, policies=("none", "near"),
                         per_call=(1, 4)))
    elif split == "round5":
        results = run("fresh8", ROUND_4, ("shipped",))
    elif split == "fresh9":
        m, s = (float(x) for x in sys.argv[2:4])
        chosen = ((0.60, 0.20), m, s, False)
        today = ROUND_4[0]
        results = run("fresh9", [chosen] if chosen == today else [chosen, today], ("shipped",))
    elif split == "fresh8":
        m, s = (float(x) for x in sys.argv[2:4])
        chosen = ((0.60, 0.20), m, s, False)
        today = ROUND_4[0]
        results = run("fresh8", [chosen] if chosen == today else [chosen, today], ("shipped",))
    elif split == "heldout3":
        b_r, b_c, m = (float(x) for x in sys.argv[2:5])
        chosen = ((b_r, b_c), m, 0.47, False)
        results = run("heldout", [chosen] if chosen == SHIPPED else [chosen, SHIPPED], ("shipped",))
    else:
        b, ride = float(sys.argv[2]), sys.argv[5] == "on"
        red, con = (c if c == "scaled" else float(c) for c in sys.argv[3:5])
        chosen = (b, red, con, ride)
        results = run("heldout", [chosen] if chosen == TODAY else [chosen, TODAY], ("shipped",))
    Path(f"/tmp/judgeband/route_{'_'.join(sys.argv[1:3])}.json").write_text(json.dumps(results, indent=1))
    print(table(results))
    if split == "train":
        for row in choose(results):
            print(row)


if __name__ == "__main__":
    main()
