"""Study: a middle stage in the judge cascade (rule: research/studies/judge_middle_rule.md).

``python -m research.studies.judge_middle_study oof``      out-of-fold probabilities of the accurate,
                                          middle and fast recipes on train.jsonl (``judge_gate_study.oof``,
                                          the same folds), to /tmp/judge_middle_oof.npz
``python -m research.studies.judge_middle_study locomo``   the 640 LoCoMo training pairs: judge-v13 (out-of-fold
                                          cross-encoder columns), the shipped middle model, judge-v2,
                                          to /tmp/judge_middle_locomo.npz
``python -m research.studies.judge_middle_study report``   the grid of (L, R, C) and the choice (training only).
``python -m research.studies.judge_middle_study heldout``  once, after the bounds ship: both held-out files
                                          through ``memtend eval-judge``'s path (``evaluation.evaluate``)
                                          with and without the middle stage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.offline_judge_features import DEEP_FEATURE_NAMES, FEATURE_NAMES, dated_events
from mem_assets.dedup.offline_judge_model import GATES, both_chinese, load
from mem_resources.memory_model import normalize_text
from research.studies import judge_gate_study as gate_study
from research.training import judge_trees as training

OOF = Path("/tmp/judge_middle_oof.npz")
LOCOMO = Path("/tmp/judge_middle_locomo.npz")
HELDOUT = (training.TRAIN_FILE.parent / "heldout.jsonl", training.REAL_TRAIN_FILE.parent / "heldout.jsonl")
CHEAP = len(FEATURE_NAMES)
MIDDLE = CHEAP + len(DEEP_FEATURE_NAMES)
LOWS = [*np.round(np.arange(0.01, 0.31, 0.01), 2), None]
HIGHS = [*np.round(np.arange(0.50, 1.00, 0.01), 2), None]
AGREE = 0.99
F1_LOSS = 0.005
MET_SHARE = 0.10
R, C = training.CLASSES.index("redundant"), training.CLASSES.index("contradictory")
RULE_SETS = ("train OOF", "locomo train")


def oof() -> None:
    gate_study.OOF = OOF
    gate_study.oof(middle=True)


def locomo() -> None:
    rows = training.read_pairs(gate_study.LOCOMO_TRAIN)
    _, features, swapped = training.training_features(rows)
    accurate, middle, fast = load("accurate"), load("middle"), load("fast")
    candidate = features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    np.savez(LOCOMO, accurate=training._as_pipeline(accurate.pair_probabilities(features, swapped), candidate, exact),
             middle=middle.pair_probabilities(features[:, :MIDDLE], swapped[:, :MIDDLE]),
             fast=fast.pair_probabilities(features[:, :CHEAP], swapped[:, :CHEAP]), candidate=candidate, exact=exact,
             chinese=both_chinese(features), truth=np.array([r["label"] for r in rows]),
             a=np.array([r["a"] for r in rows]), b=np.array([r["b"] for r in rows]))


class Set:
    """One training set: truth, today's cascade (fast gate + accurate stage), the middle model's
    probabilities on the pairs the fast gate leaves open."""

    def __init__(self, truth, accurate, fast, middle, judged, chinese, a, b) -> None:
        thresholds = load("accurate").thresholds
        self.truth, self.judged = truth, judged
        overruled = np.array([dated_events(x, y) for x, y in zip(a, b, strict=True)])
        decided = training.apply_model_thresholds(accurate, thresholds, chinese)
        decided = np.where(np.isin(decided, training.JUDGED) & overruled, "independent", decided)
        low = GATES["accurate"][1]
        self.fast_closed = judged & (fast[:, R] < low) & (fast[:, C] < low)
        self.base = np.where(self.fast_closed, "independent", decided)
        self.open = judged & ~self.fast_closed
        self.pr, self.pc, self.overruled = middle[:, R], middle[:, C], overruled
        self.base_wrong = wrong(truth, self.base)
        self.base_f1 = f1(truth, self.base)

    def regions(self, low, redundant, contradictory):
        none = np.zeros(len(self.truth), bool)
        lo = self.open & (self.pr < low) & (self.pc < low) if low is not None else none
        red = self.open & (self.pr >= redundant) & (self.pr >= self.pc) if redundant is not None else none
        con = self.open & ~red & (self.pc >= contradictory) if contradictory is not None else none
        return lo, red, con

    def labels(self, low, redundant, contradictory) -> tuple[np.ndarray, np.ndarray]:
        lo, red, con = self.regions(low, redundant, contradictory)
        out = self.base.copy()
        out[lo] = "independent"
        out[red] = "redundant"
        out[con] = "contradictory"
        out[(red | con) & self.overruled] = "independent"
        return out, lo | red | con

    def evaluate(self, low, redundant, contradictory) -> dict:
        out, answered = self.labels(low, redundant, contradictory)
        judged = int(self.judged.sum())
        changed = int((self.judged & (out != self.base)).sum())
        added = int((answered & wrong(self.truth, out) & ~self.base_wrong).sum())
        scores = f1(self.truth, out)
        return {"judged": judged, "fast": int(self.fast_closed.sum()), "middle": int(answered.sum()),
                "accurate": int((self.open & ~answered).sum()), "changed": changed, "added_wrong": added,
                "wrong_before": int(self.base_wrong.sum()), "wrong_after": int(wrong(self.truth, out).sum()),
                "f1_before": self.base_f1, "f1_after": scores,
                "ok": changed <= (1 - AGREE) * judged and added == 0
                and all(b - s <= F1_LOSS + 1e-9 for b, s in zip(self.base_f1, scores, strict=True))}


def wrong(truth: np.ndarray, label: np.ndarray) -> np.ndarray:
    return ((label == "redundant") & (truth != "redundant")) | ((label == "contradictory") & (truth == "independent"))


def f1(truth: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    out = []
    for label in training.JUDGED:
        tp = int(((predicted == label) & (truth == label)).sum())
        p, t = int((predicted == label).sum()), int((truth == label).sum())
        out.append(round(2 * tp / (p + t), 4) if p + t else 0.0)
    return out[0], out[1]


def _sets() -> dict[str, Set]:
    o = np.load(OOF)
    lo = np.load(LOCOMO)
    return {"train OOF": Set(o["truth"], o["accurate"][0], o["gate"][0], o["middle"][0], o["candidate"] & ~o["exact"],
                             o["chinese"], o["a"], o["b"]),
            "locomo train": Set(lo["truth"], lo["accurate"], lo["fast"], lo["middle"], lo["candidate"] & ~lo["exact"],
                                lo["chinese"], lo["a"], lo["b"])}


def _side_ok(sets: dict[str, Set], low, redundant, contradictory) -> bool:
    """No wrong resolution added by this side alone on any set (sides are disjoint: a necessary condition)."""
    return all(s.evaluate(low, redundant, contradictory)["added_wrong"] == 0 for s in sets.values())


def report() -> None:
    sets = _sets()
    for name, s in sets.items():
        print(f"== {name}: today's cascade {s.evaluate(None, None, None)}")
    for side, grid in (("low", LOWS), ("redundant", HIGHS), ("contradictory", HIGHS)):
        print(f"-- {side} side alone: bound: per set middle answered / changed / added wrong / F1 (r, c)")
        for bound in grid[:-1]:
            args = {"low": (bound, None, None), "redundant": (None, bound, None),
                    "contradictory": (None, None, bound)}[side]
            line = []
            for name, s in sets.items():
                r = s.evaluate(*args)
                line.append(f"{name}: {r['middle']}/{r['changed']}/{r['added_wrong']}/{r['f1_after']}")
            print(f"{bound:.2f}  " + " | ".join(line))
    lows = [x for x in LOWS if x is None or _side_ok(sets, x, None, None)]
    reds = [x for x in HIGHS if x is None or _side_ok(sets, None, x, None)]
    cons = [x for x in HIGHS if x is None or _side_ok(sets, None, None, x)]
    best = None
    for low in lows:
        for redundant in reds:
            for contradictory in cons:
                results = {name: sets[name].evaluate(low, redundant, contradictory) for name in RULE_SETS}
                if not all(r["ok"] for r in results.values()):
                    continue
                key = (sum(r["middle"] for r in results.values()), redundant or 2.0, contradictory or 2.0,
                       -(low or 0.0))
                if best is None or key > best[0]:
                    best = (key, low, redundant, contradictory, results)
    assert best is not None
    _, low, redundant, contradictory, results = best
    reached = results["train OOF"]["middle"] + results["train OOF"]["accurate"]
    share = results["train OOF"]["middle"] / reached if reached else 0.0
    print(f"CHOICE: L = {low}, R = {redundant}, C = {contradictory}; answers {share:.1%} of the pairs reaching "
          f"the middle stage on train OOF: rule {'MET' if share >= MET_SHARE else 'NOT MET'}")
    for name, r in results.items():
        print(f"  {name}: {r}")


def heldout() -> None:
    """Once: both held-out files, today's cascade and the one with the middle stage, through the
    path ``memtend eval-judge`` takes (candidate search, judge, resolution guards)."""
    from mem_assets.dedup.candidates import default_threshold
    from mem_assets.dedup.evaluation import evaluate, read_pairs
    from mem_assets.dedup.pair_judge import OfflineJudge
    from mem_assets.resources import build_embedder
    from mem_resources.settings import load_settings

    settings = load_settings()
    embedder = build_embedder(settings, in_dagster=False)
    out = {}
    for path in HELDOUT:
        rows = read_pairs(path)
        for name, judge in (("with", OfflineJudge(middle=True)), ("without", OfflineJudge(middle=False))):
            result = evaluate(rows, embedder, judge, default_threshold(embedder), 5)
            out[f"{path.parent.name}/{path.name} {name}"] = {
                "redundant_f1": result["classes"]["redundant"]["f1"],
                "contradictory_f1": result["classes"]["contradictory"]["f1"],
                "wrong_merges": result["wrong_merges"], "wrong_supersedes": result["wrong_supersedes"],
                "wrong_total": result["wrong_total"], "candidates": result["candidates"],
                "pairs_by_stage": result["pairs_by_stage"], "middle_stage_changed": result["middle_stage_changed"],
                "accurate_stage_changed": result["accurate_stage_changed"], "judge": result["judge"]}
            print(json.dumps({f"{path.parent.name}/{path.name} {name}": out[f"{path.parent.name}/{path.name} {name}"]}),
                  flush=True)


if __name__ == "__main__":
    {"oof": oof, "locomo": locomo, "report": report, "heldout": heldout}[sys.argv[1]]()
