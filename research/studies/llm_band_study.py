"""Study: how wide the LLM's uncertain band should be (rule: llm_band_rule.md).

``python -m research.studies.llm_band_study train``    the choice, on the training files
``python -m research.studies.llm_band_study heldout``  the table, on the held-out files (once)
``python -m research.studies.llm_band_study topics``   topic purity with LLM placement (tuning sets)
``python -m research.studies.llm_band_study check FILE BAND``  one band, perfect oracle, through
                                                      ``memtend eval-judge`` and through the replay

The judge is the product's: ``build_judge`` with ``MEMTEND_LLM=openai`` pointed over HTTP at the
research oracle (research/oracle/server.py), perfect and 15 %-wrong. The offline judge's
judgments are computed once per file, at the widest band, and replayed narrowed to each band
(``Replayed``): the band only decides which pairs are ``near`` (independent below a threshold)
or ``doubtful`` (decided above it), so the replay is exact and the accurate judge (~20 ms a
pair) runs once per file. Scoring is ``mem_assets.dedup.evaluation``'s (candidate search first).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr

from mem_assets.dedup.candidates import default_threshold
from mem_assets.dedup.evaluation import _candidate_flags, read_pairs, score
from mem_assets.dedup.llm_judge_prompt import JudgeRequest
from mem_assets.dedup.pair_judge import (
    Advance,
    DeepVectors,
    Judgment,
    OfflineJudge,
    OpenAIJudge,
    RoutedJudge,
)
from mem_assets.resources import build_embedder, build_judge
from mem_resources.llm import ChatUsage
from mem_resources.settings import load_settings
from research.oracle.server import oracle_server

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "research" / "data" / "judge"
FILES = {"train": {"hand-written": DATA / "train.jsonl", "locomo": DATA / "locomo" / "train.jsonl"},
         "heldout": {"hand-written": DATA / "heldout.jsonl", "locomo": DATA / "locomo" / "heldout.jsonl"}}
BANDS = (0.05, 0.15, 0.30)
ORACLES = {"perfect": 0.0, "15% wrong": 0.15}
SEED = 1
WIDEST = 1.0
CACHE = Path("/tmp/llm_band_offline")


#: Routing variants: how far above its threshold a decision is ``doubtful`` (routed to the LLM),
#: given the band and the threshold: never (today), the band itself, or the same share of the room
#: above the threshold as the band is of the room below it.
UPPER = {"below": lambda band, bar: 0.0, "both": lambda band, bar: band,
         "scaled": lambda band, bar: band * (1 - bar) / bar}


class Replayed(OfflineJudge):
    """The offline judge's judgments made once at ``WIDEST``, narrowed to ``review_band``;
    ``routing``: how far above a threshold decisions are doubtful (``UPPER``)."""

    routing: str = "scaled"  # the shipped rule (JudgeModel.doubts)
    _stored: dict[tuple[str, str], Judgment] = PrivateAttr(default_factory=dict)
    _bars: dict[str, float] = PrivateAttr(default_factory=dict)

    def load(self, stored: dict[tuple[str, str], Judgment], bars: dict[str, float]) -> Replayed:
        self._stored, self._bars = stored, bars
        return self

    def narrowed(self, judgment: Judgment) -> Judgment:
        band = self.review_band
        if judgment.near is not None and judgment.near_probability < self._bars[judgment.near] - band:
            return replace(judgment, near=None, near_probability=None)
        bar = self._bars[judgment.label] if judgment.doubtful else 0.0
        if judgment.doubtful and judgment.near_probability >= bar + UPPER[self.routing](band, bar):
            return replace(judgment, doubtful=False, near_probability=None)
        return judgment

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        return [self.narrowed(self._stored[pair]) for pair in pairs], ChatUsage()

    def judge_requests(self, requests: Sequence[JudgeRequest], advance: Advance | None = None,
                       vectors: DeepVectors | None = None) -> tuple[list[list[Judgment]], ChatUsage]:
        return [[self.narrowed(self._stored[pair]) for pair in request.pairs()] for request in requests], ChatUsage()


def _env(base_url: str, band: float, route: str) -> dict[str, str]:
    return {"MEMTEND_LLM": "openai", "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "oracle",
            "MEMTEND_LLM_MODEL": "oracle", "MEMTEND_REVIEW_BAND": str(band), "MEMTEND_LLM_ROUTE": route,
            "MEMTEND_LLM_MAX_CALLS_PER_RUN": "0", "MEMTEND_LLM_MAX_TOKENS_PER_RUN": "0"}


def _settings(env: dict[str, str]):
    os.environ.update(env)
    return load_settings()


def offline_judgments(name: str, path: Path) -> tuple[list[dict], list[bool], dict[tuple[str, str], Judgment]]:
    """Rows, candidate flags and the offline judge's judgments at ``WIDEST``, cached in /tmp."""
    cache = CACHE / f"{path.parent.name}-{path.stem}.pkl"
    rows = read_pairs(path)
    if cache.exists():
        flags, stored = pickle.loads(cache.read_bytes())
        return rows, flags, stored
    settings = _settings({"MEMTEND_LLM": "offline"})
    embedder = build_embedder(settings, in_dagster=False)
    flags = _candidate_flags(rows, embedder, default_threshold(embedder), 5)
    offline = OfflineJudge(model=settings.offline_judge, gate=settings.judge_gate,
                           models_dir=str(settings.models_dir), review_band=WIDEST,
                           confirm_merges=1.0, confirm_supersedes=1.0)
    pairs = list(dict.fromkeys((r["a"], r["b"]) for r, flag in zip(rows, flags, strict=True) if flag))
    started = time.monotonic()
    judged, _ = offline.judge_pairs(pairs)
    print(f"{name}: offline judge on {len(pairs)} pairs in {time.monotonic() - started:.0f} s", file=sys.stderr)
    stored = dict(zip(pairs, judged, strict=True))
    CACHE.mkdir(exist_ok=True)
    cache.write_bytes(pickle.dumps((flags, stored)))
    return rows, flags, stored


def scored(rows: list[dict], flags: list[bool], judge: Any) -> dict[str, Any]:
    """``evaluation.evaluate``'s figures, from the candidate flags computed once."""
    judged = [i for i, flag in enumerate(flags) if flag]
    judgments, usage = judge.judge_pairs([(rows[i]["a"], rows[i]["b"]) for i in judged])
    predicted = ["independent"] * len(rows)
    for i, judgment in zip(judged, judgments, strict=True):
        predicted[i] = judgment.label
    result = score([row["label"] for row in rows], predicted)
    new = len({row["b"] for row in rows})
    return {"pairs": len(rows), "new_memories": new,
            "redundant_f1": result["classes"]["redundant"]["f1"],
            "redundant_p": result["classes"]["redundant"]["precision"],
            "redundant_r": result["classes"]["redundant"]["recall"],
            "contradictory_f1": result["classes"]["contradictory"]["f1"],
            "wrong": result["wrong_total"]["count"], "wrong_pct": result["wrong_total"]["percent"],
            "wrong_merges": result["wrong_merges"]["count"], "wrong_supersedes": result["wrong_supersedes"]["count"],
            "llm_calls": usage.calls, "calls_per_new_memory": round(usage.calls / new, 3),
            "tokens": usage.prompt_tokens + usage.completion_tokens, "failures": usage.failures,
            "routed": sum(j.routed for j in judgments)}


def run(split: str, routings: Sequence[str]) -> list[dict[str, Any]]:
    results = []
    for name, path in FILES[split].items():
        rows, flags, stored = offline_judgments(name, path)
        model_bars = None
        for oracle_name, wrong in ORACLES.items():
            with oracle_server(pairs=[path], wrong=wrong, seed=SEED) as oracle:
                settings = _settings(_env(oracle.base_url, 0.15, "uncertain"))
                routed = build_judge(settings, in_dagster=False)
                assert isinstance(routed, RoutedJudge)
                if model_bars is None:
                    from mem_assets.dedup import offline_judge_model as judge_model

                    thresholds = judge_model.load(routed.offline.model).thresholds
                    assert thresholds.get("redundant_zh", thresholds["redundant"]) == thresholds["redundant"]
                    model_bars = {"redundant": thresholds["redundant"], "contradictory": thresholds["contradictory"]}
                base = {"file": name, "oracle": oracle_name}
                results.append({**base, "routing": "offline only", "band": None,
                                **scored(rows, flags, Replayed(review_band=0.0).load(stored, model_bars))})
                for routing in routings:
                    for band in BANDS:
                        offline = Replayed(model=routed.offline.model, review_band=band,
                                           routing=routing).load(stored, model_bars)
                        judge = RoutedJudge(offline=offline, llm=routed.llm)
                        results.append({**base, "routing": routing, "band": band, **scored(rows, flags, judge)})
                        print(json.dumps(results[-1]), file=sys.stderr)
                every = build_judge(_settings(_env(oracle.base_url, 0.15, "all")), in_dagster=False)
                assert isinstance(every, OpenAIJudge)
                results.append({**base, "routing": "all", "band": None, **scored(rows, flags, every)})
                print(json.dumps(results[-1]), file=sys.stderr)
    return results


def table(results: list[dict[str, Any]]) -> str:
    lines = [("| file | oracle | routing | band | redundant P / R / F1 | contradictory F1 | wrong merges + supersedes "
              "| LLM calls / new memory | pairs routed |"), "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['file']} ({r['pairs']}) | {r['oracle']} | {r['routing']} | {r['band'] or '–'} "
                     f"| {r['redundant_p']:.3f} / {r['redundant_r']:.3f} / {r['redundant_f1']:.3f} "
                     f"| {r['contradictory_f1']:.3f} | {r['wrong']} ({r['wrong_pct']:.2f} %) "
                     f"| {r['calls_per_new_memory']:.3f} ({r['llm_calls']}) | {r['routed']} |")
    return "\n".join(lines)


def check(path: Path, band: float) -> None:
    """The replay against the product CLI, perfect oracle, routing as shipped."""
    rows, flags, stored = offline_judgments(path.stem, path)
    with oracle_server(pairs=[path]) as oracle:
        env = {**os.environ, **_env(oracle.base_url, band, "uncertain")}
        out = subprocess.run([sys.executable, "-m", "mem_assets.cli", "eval-judge", str(path)], env=env,
                             capture_output=True, text=True, check=True).stdout
        cli = json.loads(out.strip().splitlines()[-1])
        settings = _settings(_env(oracle.base_url, band, "uncertain"))
        routed = build_judge(settings, in_dagster=False)
        from mem_assets.dedup import offline_judge_model as judge_model

        t = judge_model.load(routed.offline.model).thresholds
        replay = scored(rows, flags, RoutedJudge(offline=Replayed(model=routed.offline.model, review_band=band).load(
            stored, {"redundant": t["redundant"], "contradictory": t["contradictory"]}), llm=routed.llm))
    print(json.dumps({"cli": {"redundant_f1": cli["classes"]["redundant"]["f1"],
                              "contradictory_f1": cli["classes"]["contradictory"]["f1"],
                              "wrong": cli["wrong_total"]["count"], "llm_calls": cli["judge_calls"],
                              "routed": cli["pairs_routed_to_llm"]},
                      "replay": {k: replay[k] for k in ("redundant_f1", "contradictory_f1", "wrong", "llm_calls",
                                                        "routed")}}))


TOPIC_FILES = {"fresh3": ROOT / "research" / "data" / "eval" / "fresh3" / "topics.jsonl",
               "locomo": ROOT / "research" / "data" / "eval" / "locomo" / "topics_tune.jsonl",
               "fresh4": ROOT / "research" / "data" / "eval" / "fresh4" / "topics.jsonl"}
"""``fresh4`` is the held-out set: read once, after the topic band was chosen on the other two."""


def topics(files: Sequence[str] = ("fresh3", "locomo"), runs_wanted: Sequence[str] = ("offline", *ORACLES),
           bands: Sequence[float] = BANDS) -> list[dict[str, Any]]:
    """``memtend eval-topics [--llm]`` per tuning set: offline, then each band
    (``MEMTEND_TOPIC_LLM_BAND``) with each oracle answering from the set's own labels."""
    results = []
    for name in files:
        path = TOPIC_FILES[name]
        memories = sum(1 for line in path.read_text("utf-8").splitlines() if line.strip())
        runs: list[tuple[str, float | None, float]] = [("offline", None, 0.0)] if "offline" in runs_wanted else []
        runs += [(oracle_name, band, wrong) for oracle_name, wrong in ORACLES.items() if oracle_name in runs_wanted
                 for band in bands]
        for oracle_name, band, wrong in runs:
            with oracle_server(topics=[path], wrong=wrong, seed=SEED) as oracle:
                env = {**os.environ, **_env(oracle.base_url, 0.30, "uncertain")}
                if band is not None:
                    env["MEMTEND_TOPIC_LLM_BAND"] = str(band)
                else:
                    env["MEMTEND_LLM"] = "offline"
                command = [sys.executable, "-m", "mem_assets.cli", "eval-topics", str(path)]
                out = subprocess.run(command + (["--llm"] if band is not None else []), env=env,
                                     capture_output=True, text=True, check=True).stdout
            report = json.loads(out.strip().splitlines()[-1])
            llm = report.get("llm", {})
            results.append({"file": name, "memories": memories, "oracle": oracle_name, "band": band,
                            "purity": report["purity"], "placed": report.get("placed"),
                            "topics": report.get("topics"), "calls": llm.get("llm_placement_calls", 0),
                            "routed": llm.get("llm_placement_routed", 0),
                            "calls_per_memory": round(llm.get("llm_placement_calls", 0) / memories, 3)})
            print(json.dumps(results[-1]), file=sys.stderr)
    return results


def main() -> None:
    if sys.argv[1] == "topics":
        args = [a.split(",") for a in sys.argv[2:5]]
        results = topics(*args[:2], *[[float(b) for b in band] for band in args[2:]])
        Path("/tmp/llm_band_topics.json").write_text(json.dumps(results, indent=1))
        for r in results:
            print(f"| {r['file']} ({r['memories']}) | {r['oracle']} | {r['band'] or '–'} | {r['purity']} "
                  f"| {r['placed']} | {r['calls_per_memory']:.3f} ({r['calls']}, {r['routed']} routed) |")
        return
    if sys.argv[1] == "check":
        check(Path(sys.argv[2]), float(sys.argv[3]))
        return
    split = sys.argv[1]
    results = run(split, tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else tuple(UPPER))
    Path(f"/tmp/llm_band_{split}.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
