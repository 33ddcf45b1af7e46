"""Scoring: the first reading of a fresh conversation set through the product CLI
(research/studies/fresh6_rule.md, fresh7_rule.md).

The judge (``memtend eval-judge``) on all the set's labeled candidate pairs (and per language),
offline and routed to the research oracle (perfect, 15 % wrong); then topics (``memtend
eval-topics``) offline and ``--llm`` with both oracles. Shipped defaults; nothing is chosen here.

    nice -n 10 python -m research.studies.fresh_scoring fresh7 [judge] [topics]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from research.oracle.server import oracle_server
from research.studies import llm_band_study as band

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "research" / "data"
LABELS = ("redundant", "contradictory", "independent")
RUNS = {"offline": None, **band.ORACLES}


def _cli(command: list[str], oracle_url: str | None) -> dict[str, Any]:
    env = {**os.environ, **band._env(oracle_url or "http://127.0.0.1:9/v1", 0.30, "uncertain")}
    if oracle_url is None:
        env["MEMTEND_LLM"] = "offline"
    out = subprocess.run([sys.executable, "-m", "mem_assets.cli", *command], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def f1_interval(confusion: dict[str, dict[str, int]], label: str = "redundant", draws: int = 2000,
                seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval of ``label``'s F1 over pairs: the pairs are resampled with
    replacement, which for F1 is a multinomial draw over the confusion matrix's cells."""
    cells = [(t, p) for t in confusion if t in LABELS for p in LABELS]
    counts = np.array([confusion[t][p] for t, p in cells], dtype=float)
    rng = np.random.default_rng(seed)
    samples = rng.multinomial(int(counts.sum()), counts / counts.sum(), size=draws)
    tp = samples[:, cells.index((label, label))]
    predicted = sum(samples[:, cells.index((t, label))] for t in LABELS)
    actual = sum(samples[:, cells.index((label, p))] for p in LABELS)
    f1 = np.where(predicted + actual > 0, 2 * tp / np.maximum(predicted + actual, 1), 0.0)
    low, high = np.percentile(f1, [2.5, 97.5])
    return round(float(low), 3), round(float(high), 3)


def judge(name: str) -> None:
    pairs = DATA / "judge" / name / "heldout.jsonl"
    rows = [json.loads(line) for line in pairs.read_text("utf-8").splitlines() if line.strip()]
    new = len({(r["group"], r["b"]) for r in rows})
    counts = {label: sum(r["label"] == label for r in rows) for label in LABELS}
    for run, wrong in RUNS.items():
        if wrong is None:
            r = _cli(["eval-judge", str(pairs)], None)
        else:
            with oracle_server(pairs=[pairs], wrong=wrong, seed=band.SEED) as oracle:
                r = _cli(["eval-judge", str(pairs)], oracle.base_url)
        print(json.dumps({"set": name, "pairs": len(rows), "labels": counts, "run": run,
                          "redundant": r["classes"]["redundant"], "redundant_f1_95": f1_interval(r["confusion"]),
                          "contradictory": r["classes"]["contradictory"], "wrong": r["wrong_total"],
                          "by_language": {lang: {"redundant_f1": d["classes"]["redundant"]["f1"],
                                                 "contradictory_f1": d["classes"]["contradictory"]["f1"],
                                                 "wrong": d["wrong_total"]} for lang, d in r["by_language"].items()},
                          "confusion": r["confusion"], "calls": r.get("judge_calls", 0) if wrong is not None else 0,
                          "calls_per_new_memory": round(r.get("judge_calls", 0) / new, 3) if wrong is not None else 0}),
              flush=True)


def topics(name: str) -> None:
    path = DATA / "eval" / name / "topics.jsonl"
    memories = sum(1 for line in path.read_text("utf-8").splitlines() if line.strip())
    for run, wrong in RUNS.items():
        if wrong is None:
            report = _cli(["eval-topics", str(path)], None)
        else:
            with oracle_server(topics=[path], wrong=wrong, seed=band.SEED) as oracle:
                report = _cli(["eval-topics", str(path), "--llm"], oracle.base_url)
        llm = report.get("llm", {})
        print(json.dumps({"run": run, "memories": memories, "purity": report["purity"], "placed": report.get("placed"),
                          "topics": report.get("topics"), "calls": llm.get("llm_placement_calls", 0),
                          "calls_per_memory": round(llm.get("llm_placement_calls", 0) / memories, 3)}), flush=True)


if __name__ == "__main__":
    steps = sys.argv[2:] or ["judge", "topics"]
    if "judge" in steps:
        judge(sys.argv[1])
    if "topics" in steps:
        topics(sys.argv[1])
