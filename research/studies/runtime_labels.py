"""The shipped judge's label (and review-queue ``near``) for every pair of some files, with
whatever code is on PYTHONPATH.

    PYTHONPATH=<tree> python research/studies/runtime_labels.py OUT.json FILE ...
    python research/studies/runtime_labels.py --compare BEFORE.json AFTER.json

Run once with the code before a change and once with it (e.g. a worktree of the commit before),
then compare: per file the labels that moved, with their truth, and both runs' scores. This is
how a runtime change (onnxruntime -> OpenVINO, 2026-12-06) shows what decisions it moved
(issue 44 item 6), without keeping the old runtime's code in the product. eval-judge's path:
the pipeline's candidate search, the shipped judge, the resolution guards.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def labels(out: Path, files: list[str]) -> None:
    from mem_assets.dedup.candidates import default_threshold
    from mem_assets.dedup.evaluation import _candidate_flags, read_pairs
    from mem_assets.dedup.resolution_guards import guard_judgments
    from mem_assets.resources import build_judge
    from mem_resources import embedder
    from mem_resources.settings import load_settings

    embed = embedder.WordLlamaEmbedder()
    judge = build_judge(load_settings(), in_dagster=False)
    result = {}
    for file in files:
        rows = read_pairs(Path(file))
        flags = _candidate_flags(rows, embed, default_threshold(embed), 5)
        judged = [i for i, flag in enumerate(flags) if flag]
        pairs = [(rows[i]["a"], rows[i]["b"]) for i in judged]
        answers, _ = judge.judge_pairs(pairs)
        predicted = ["independent"] * len(rows)
        near: list[str | None] = [None] * len(rows)
        for i, judgment, answer in zip(judged, guard_judgments(pairs, answers), answers, strict=True):
            predicted[i], near[i] = judgment.label, answer.near
        result[file] = {"truth": [row["label"] for row in rows], "predicted": predicted, "near": near}
        print(file, len(rows), flush=True)
    out.write_text(json.dumps(result))


def _brief(truth: list[str], predicted: list[str]) -> dict:
    from mem_assets.dedup.evaluation import score

    s = score(truth, predicted)
    return {"R_F1": s["classes"]["redundant"]["f1"], "C_F1": s["classes"]["contradictory"]["f1"],
            "R_precision": s["classes"]["redundant"]["precision"],
            "wrong": f'{s["wrong_merges"]["count"]} + {s["wrong_supersedes"]["count"]}'}


def compare(before: Path, after: Path) -> None:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    for file in old:
        truth, a, b = old[file]["truth"], old[file]["predicted"], new[file]["predicted"]
        moved = Counter(f"{a[i]}->{b[i]} (truth {truth[i]})" for i in range(len(truth)) if a[i] != b[i])
        near_a, near_b = old[file].get("near"), new[file].get("near")
        near_moved = None if near_a is None or near_b is None else sum(x != y for x, y in zip(near_a, near_b, strict=True))
        print(json.dumps({"file": file, "pairs": len(truth), "moved": sum(moved.values()), "changes": dict(moved),
                          "review_queue_moved": near_moved,
                          "before": _brief(truth, a), "after": _brief(truth, b)}))


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        labels(Path(sys.argv[1]), sys.argv[2:])
