"""Score an embedder + judge end to end, as the pipeline decides, on labeled pairs.

Each line of the pairs file is ``{"a": older, "b": newer, "label": ..., ["lang": ...],
["tenant": ...]}``. Pairs without a ``tenant`` are each their own tenant: ``a`` is an activated
memory, ``b`` the new one. Pairs sharing a ``tenant`` form one tenant whose memories are all
their texts, so ``top_k`` competes as in a real graph. Candidates come from the pipeline's own
search (``find_candidates``: threshold, top_k, exact duplicates); the judge labels only the
candidate pairs, and its answers pass the pipeline's resolution guards (``resolution_guards``);
a pair that is never a candidate counts as independent.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import get_args

import numpy as np

from mem_assets.dedup.candidates import NodeVectors, find_candidates
from mem_assets.dedup.pair_judge import JudgeResource
from mem_assets.dedup.relations import CascadeStage
from mem_assets.dedup.resolution_guards import GUARDS, guard_judgments
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import normalize_text

LABELS = ("redundant", "contradictory", "independent")


def read_pairs(path: Path) -> list[dict]:
    rows = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or row.get("label") not in LABELS or not row.get("a") or not row.get("b"):
            raise ValueError(f"{path}:{number}: need a, b and label in {LABELS}")
        rows.append(row)
    return rows


def _candidate_flags(rows: list[dict], embedder: EmbedderResource, threshold: float,
                     top_k: int) -> list[bool]:
    """Whether the pipeline's candidate search pairs each row's two texts."""
    tenants: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        tenants[str(row["tenant"]) if "tenant" in row else f"pair:{i}"].append(i)
    texts = sorted({row[side] for row in rows for side in ("a", "b")})
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    flags = [False] * len(rows)
    for members in tenants.values():
        ids = {text: f"m{n}" for n, text in enumerate(dict.fromkeys(
            t for i in members for t in (rows[i]["a"], rows[i]["b"])))}
        hashes = {text: normalize_text(text) for text in ids}
        active = NodeVectors(list(ids.values()), ["LongTermMemory"] * len(ids),
                             [hashes[t] for t in ids], np.stack([vectors[t] for t in ids]))
        newer = list(dict.fromkeys(rows[i]["b"] for i in members))
        new = NodeVectors([ids[t] for t in newer], ["LongTermMemory"] * len(newer),
                          [hashes[t] for t in newer], np.stack([vectors[t] for t in newer]))
        found = find_candidates(new, active, threshold, top_k)
        paired = set(zip(found["left_id"], found["right_id"], strict=True))
        for i in members:
            key = tuple(sorted((ids[rows[i]["a"]], ids[rows[i]["b"]])))
            flags[i] = key in paired
    return flags


def _percent(count: int, total: int) -> float:
    return round(100.0 * count / total, 2) if total else 0.0


def score(truth: list[str], predicted: list[str]) -> dict:
    """Per-class precision/recall/F1, confusion matrix, accuracy, wrong merges and supersedes."""
    confusion = {t: {p: 0 for p in LABELS} for t in LABELS}
    for t, p in zip(truth, predicted, strict=True):
        confusion[t][p] += 1
    classes = {}
    for label in LABELS:
        tp = confusion[label][label]
        predicted_n = sum(confusion[t][label] for t in LABELS)
        actual_n = sum(confusion[label].values())
        precision = tp / predicted_n if predicted_n else 0.0
        recall = tp / actual_n if actual_n else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        classes[label] = {"precision": round(precision, 4), "recall": round(recall, 4),
                          "f1": round(f1, 4), "support": actual_n}
    total = len(truth)
    merges = confusion["independent"]["redundant"] + confusion["contradictory"]["redundant"]
    supersedes = confusion["independent"]["contradictory"]
    return {
        "pairs": total,
        "accuracy": round(sum(confusion[label][label] for label in LABELS) / total, 4) if total else 0.0,
        "classes": classes,
        "confusion": {"rows_truth_columns_predicted": list(LABELS), **confusion},
        "wrong_merges": {"count": merges, "percent": _percent(merges, total)},
        "wrong_supersedes": {"count": supersedes, "percent": _percent(supersedes, total)},
        "wrong_total": {"count": merges + supersedes, "percent": _percent(merges + supersedes, total)},
    }


def evaluate(rows: Iterable[dict], embedder: EmbedderResource, judge: JudgeResource,
             threshold: float, top_k: int) -> dict:
    """The end-to-end score of ``embedder`` + ``judge`` on labeled pairs (see the module doc)."""
    rows = list(rows)
    flags = _candidate_flags(rows, embedder, threshold, top_k)
    judged = [i for i, flag in enumerate(flags) if flag]
    pairs = [(rows[i]["a"], rows[i]["b"]) for i in judged]
    answers, usage = judge.judge_pairs(pairs)
    judgments = guard_judgments(pairs, answers)
    predicted = ["independent"] * len(rows)
    for i, judgment in zip(judged, judgments, strict=True):
        predicted[i] = judgment.label
    result = score([row["label"] for row in rows], predicted)
    languages = sorted({row.get("lang", "") for row in rows} - {""})
    result["by_language"] = {
        lang: score([r["label"] for r in rows if r.get("lang") == lang],
                    [p for r, p in zip(rows, predicted, strict=True) if r.get("lang") == lang])
        for lang in languages}
    for detail in result["by_language"].values():
        detail.pop("confusion")
    result.update({
        "candidates": len(judged),
        "never_candidates": len(rows) - len(judged),
        "judge_failures": sum(j.failed for j in judgments),
        "guarded": sum(g is not j for g, j in zip(judgments, answers, strict=True)),
        "judge_calls": usage.calls,
        "pairs_routed_to_llm": sum(j.routed for j in judgments),
        "pairs_routed_carried": sum(j.routed_carried for j in judgments),
        "decided_by_llm": sum(j.stage == "llm" and not (j.failed or j.deferred) for j in judgments),
        "pairs_by_stage": {stage: sum(j.cascade == stage for j in judgments) for stage in get_args(CascadeStage)},
        "middle_stage_changed": sum(j.cascade == "middle" and j.changed for j in judgments),
        "accurate_stage_changed": sum(j.cascade == "accurate" and j.changed for j in judgments),
        "threshold": threshold,
        "top_k": top_k,
        "embedder": type(embedder).__name__,
        "judge": judge.fingerprint,
        "guards": GUARDS,
    })
    return result
