"""Scoring: the first reading of a fresh conversation set through the product CLI
(research/studies/fresh6_rule.md, fresh7_rule.md).

The judge (``memtend eval-judge``) on all the set's labeled candidate pairs and on each language's,
offline and routed to the research oracle (perfect, 15 % wrong); then topics (``memtend
eval-topics``) offline and ``--llm`` with both oracles. Shipped defaults; nothing is chosen here.

    nice -n 10 python -m research.studies.fresh_scoring fresh7 [judge] [topics]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from research.oracle.server import oracle_server
from research.studies import llm_band_study as band

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "research" / "data"
RUNS = {"offline": None, **band.ORACLES}


def _cli(command: list[str], oracle_url: str | None) -> dict[str, Any]:
    env = {**os.environ, **band._env(oracle_url or "http://127.0.0.1:9/v1", 0.30, "uncertain")}
    if oracle_url is None:
        env["MEMTEND_LLM"] = "offline"
    out = subprocess.run([sys.executable, "-m", "mem_assets.cli", *command], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def judge(name: str) -> None:
    pairs = DATA / "judge" / name / "heldout.jsonl"
    rows = [json.loads(line) for line in pairs.read_text("utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        files = {"all": pairs}
        for lang in ("en", "zh"):
            files[lang] = Path(tmp) / f"{lang}.jsonl"
            files[lang].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows
                                           if r["lang"] == lang), "utf-8")
        for part_name, path in files.items():
            part = [r for r in rows if part_name == "all" or r["lang"] == part_name]
            new = len({(r["group"], r["b"]) for r in part})
            for run, wrong in RUNS.items():
                if wrong is None:
                    r = _cli(["eval-judge", str(path)], None)
                else:
                    with oracle_server(pairs=[pairs], wrong=wrong, seed=band.SEED) as oracle:
                        r = _cli(["eval-judge", str(path)], oracle.base_url)
                print(json.dumps({"file": part_name, "pairs": len(part),
                                  "redundant_pairs": sum(x["label"] == "redundant" for x in part),
                                  "contradictory_pairs": sum(x["label"] == "contradictory" for x in part),
                                  "run": run, "redundant": r["classes"]["redundant"],
                                  "contradictory": r["classes"]["contradictory"], "wrong": r["wrong_total"],
                                  "calls": r.get("judge_calls", 0),
                                  "calls_per_new_memory": round(r.get("judge_calls", 0) / new, 3)}), flush=True)


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
