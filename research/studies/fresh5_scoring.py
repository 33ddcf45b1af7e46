"""The one reading of the held-out topic set fresh5 (research/data/eval/fresh5/README.md).

``python -m research.studies.fresh5_scoring``: ``memtend eval-topics`` with the shipped defaults,
offline, then with the shipped LLM topic routing against the research oracle answering from the
set's labels, perfect and 15 % wrong (seed 1). One JSON line per run on stdout. The defaults before
this session's choices were scored once, offline, from the commit before them (6ed4078).

``python -m research.studies.fresh5_scoring bands 0.15,0.45``: the LLM runs again at other topic
bands (``MEMTEND_TOPIC_LLM_BAND``), for the guide's table of band widths; read after the default
was chosen, never to choose it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from research.oracle.server import oracle_server

ROOT = Path(__file__).resolve().parents[2]
FRESH5 = ROOT / "research" / "data" / "eval" / "fresh5" / "topics.jsonl"
LLM_ENV = {"MEMTEND_LLM": "openai", "OPENAI_API_KEY": "oracle", "MEMTEND_LLM_MODEL": "oracle",
           "MEMTEND_LLM_MAX_CALLS_PER_RUN": "0", "MEMTEND_LLM_MAX_TOKENS_PER_RUN": "0"}


def run(env: dict[str, str], llm: bool) -> dict:
    command = [sys.executable, "-m", "mem_assets.cli", "eval-topics", str(FRESH5), *(["--llm"] if llm else [])]
    out = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    memories = sum(1 for line in FRESH5.read_text("utf-8").splitlines() if line.strip())
    oracles = (("perfect", 0.0), ("15% wrong", 0.15))
    if sys.argv[1:2] == ["bands"]:
        runs = [(name, wrong, band) for band in sys.argv[2].split(",") for name, wrong in oracles]
    else:
        runs = [("offline", None, None)] + [(name, wrong, None) for name, wrong in oracles]
    for name, wrong, band in runs:
        if wrong is None:
            report = run({"MEMTEND_LLM": "offline"}, llm=False)
        else:
            with oracle_server(topics=[FRESH5], wrong=wrong, seed=1) as oracle:
                extra = {"MEMTEND_TOPIC_LLM_BAND": band} if band else {}
                report = run({**LLM_ENV, "OPENAI_BASE_URL": oracle.base_url, **extra}, llm=True)
        llm = report.get("llm", {})
        print(json.dumps({"run": name, "band": band, "memories": memories, "purity": report["purity"], "placed": report["placed"],
                          "topics": report.get("topics"), "by_language": report.get("by_language"),
                          "placement_calls": llm.get("llm_placement_calls", 0),
                          "calls_per_memory": round(llm.get("llm_placement_calls", 0) / memories, 3),
                          "llm": llm}), flush=True)


if __name__ == "__main__":
    main()
