"""Study: the offline judge and the hashing embedder's candidate threshold on the hand-labeled
pairs of tests/data/labeled_pairs.jsonl (moved out of bench/dedup_bench.py, which measures speed
only). Prints the judge's precision and recall per label, and candidate recall per threshold,
with the calibration behind ``mem_assets.dedup.candidates.HASHING_THRESHOLD``: the highest 0.05
step keeping every clear-cut redundant or contradictory pair. Changes nothing.

    python research/studies/labeled_pairs_study.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mem_assets.dedup.candidates import HASHING_THRESHOLD
from mem_assets.dedup.offline_judge_model import predict
from mem_resources.embedder import hashing_embed

LABELS = ("redundant", "contradictory", "independent")
LABELED = Path(__file__).resolve().parents[2] / "tests" / "data" / "labeled_pairs.jsonl"


def judge_quality(rows: list[dict]) -> None:
    predicted = [d.label for d in predict([(r["a"], r["b"]) for r in rows])]
    print(f"## Offline judge (the shipped model) on {len(rows)} labeled pairs "
          f"({sum(r['lang'] == 'zh' for r in rows)} zh, {sum(r['lang'] == 'en' for r in rows)} en)")
    print("| label | precision | recall | support |\n|---|---|---|---|")
    for label in LABELS:
        tp = sum(p == label and r["label"] == label for p, r in zip(predicted, rows, strict=True))
        pp = sum(p == label for p in predicted)
        support = sum(r["label"] == label for r in rows)
        print(f"| {label} | {tp / pp if pp else 0:.2f} | {tp / support:.2f} | {support} |")
    clear = [(p, r) for p, r in zip(predicted, rows, strict=True) if r["clear"]]
    print(f"clear-cut pairs right: {sum(p == r['label'] for p, r in clear)}/{len(clear)}; "
          f"accuracy overall {sum(p == r['label'] for p, r in zip(predicted, rows, strict=True)) / len(rows):.2f}")


def hashing_threshold(rows: list[dict]) -> None:
    cosines = []
    for r in rows:
        a, b = hashing_embed([r["a"], r["b"]], 384)
        cosines.append(float(a @ b))
    cos = np.asarray(cosines)
    related = np.asarray([r["label"] != "independent" for r in rows])
    clear_mask = np.asarray([r["clear"] for r in rows])
    print("\n## Hashing-embedder threshold (candidate recall of redundant+contradictory pairs)")
    print("| threshold | recall (all) | recall (clear-cut) | independent pairs passing |\n|---|---|---|---|")
    for t in (0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
        print(f"| {t:.2f} | {(cos[related] >= t).mean():.2f} | {(cos[related & clear_mask] >= t).mean():.2f} "
              f"| {(cos[~related] >= t).mean():.2f} |")
    grid = [round(x, 2) for x in np.arange(0.05, 0.96, 0.05)]
    keeps_all = [t for t in grid if (cos[related & clear_mask] >= t - 1e-9).all()]
    print(f"calibrated: highest 0.05 step keeping every clear-cut pair = {max(keeps_all):.2f} "
          f"(shipped default HASHING_THRESHOLD = {HASHING_THRESHOLD})")


if __name__ == "__main__":
    labeled = [json.loads(line) for line in LABELED.read_text("utf-8").splitlines()]
    judge_quality(labeled)
    hashing_threshold(labeled)
