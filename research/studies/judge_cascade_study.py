"""Study: the judge cascade's band (rule: research/studies/judge_cascade_rule.md).

``python -m research.studies.judge_cascade_study oof``     out-of-fold probabilities of the accurate
                                          recipe and of the fast recipe on train.jsonl (the same
                                          folds as ``judge_gate_study oof``), to /tmp/judge_cascade_oof.npz
``python -m research.studies.judge_cascade_study locomo``  the 640 LoCoMo training pairs: judge-v13
                                          (out-of-fold cross-encoder columns) and judge-v2, to
                                          /tmp/judge_cascade_locomo.npz
``python -m research.studies.judge_cascade_study report``  the grid of (R, C) and the choice.

Training data only: the held-out files are never read here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.offline_judge_features import FEATURE_NAMES, dated_events
from mem_assets.dedup.offline_judge_model import GATES, both_chinese, load
from mem_resources.memory_model import normalize_text
from research.studies import judge_gate_study as gate_study
from research.training import judge_trees as training

OOF = Path("/tmp/judge_cascade_oof.npz")
LOCOMO = Path("/tmp/judge_cascade_locomo.npz")
CHEAP = len(FEATURE_NAMES)
GRID = [*np.round(np.arange(0.50, 1.00, 0.01), 2), None]
CHANGE_BUDGET = 0.01
R, C, I = (training.CLASSES.index(k) for k in ("redundant", "contradictory", "independent"))


def oof() -> None:
    gate_study.OOF = OOF
    gate_study.oof()


def locomo() -> None:
    rows = training.read_pairs(gate_study.LOCOMO_TRAIN)
    _, features, swapped = training.training_features(rows)
    accurate, fast = load("accurate"), load("fast")
    pa = accurate.pair_probabilities(features, swapped)
    pf = fast.pair_probabilities(features[:, :CHEAP], swapped[:, :CHEAP])
    candidate = features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    np.savez(LOCOMO, accurate=training._as_pipeline(pa, candidate, exact), fast=pf, candidate=candidate,
             exact=exact, chinese=both_chinese(features), truth=np.array([r["label"] for r in rows]),
             a=np.array([r["a"] for r in rows]), b=np.array([r["b"] for r in rows]))


def cascade(fast: np.ndarray, low: float, redundant: float | None, contradictory: float | None) -> np.ndarray:
    """Which stage answers each pair by the fast probabilities: 'low', 'redundant',
    'contradictory' (the fast stage) or 'accurate'."""
    pr, pc = fast[:, R], fast[:, C]
    stage = np.full(len(fast), "accurate", dtype=object)
    stage[(pr < low) & (pc < low)] = "low"
    red = (pr >= redundant) & (pr >= pc) if redundant is not None else np.zeros(len(fast), bool)
    con = ~red & (pc >= contradictory) if contradictory is not None else np.zeros(len(fast), bool)
    stage[red] = "redundant"
    stage[con] = "contradictory"
    return stage


def labels(decided: np.ndarray, stage: np.ndarray, overruled: np.ndarray) -> np.ndarray:
    out = decided.copy()
    out[stage == "low"] = "independent"
    out[stage == "redundant"] = "redundant"
    out[stage == "contradictory"] = "contradictory"
    out[np.isin(stage, ["redundant", "contradictory"]) & overruled] = "independent"
    return out


def wrong(truth: np.ndarray, label: np.ndarray) -> np.ndarray:
    return ((label == "redundant") & (truth != "redundant")) | ((label == "contradictory") & (truth == "independent"))


def evaluate(truth, decided, fast, judged, overruled, low, redundant, contradictory) -> dict:
    stage = cascade(fast, low, redundant, contradictory)
    stage[~judged] = "none"
    out = labels(decided, stage, overruled)
    high = np.isin(stage, ["redundant", "contradictory"])
    rc = np.isin(decided, training.JUDGED) & judged
    changed_high = high & (out != decided)
    added_wrong = high & wrong(truth, out) & ~wrong(truth, decided)
    changed_all = judged & (out != decided)
    return {"pairs": int(judged.sum()), "low": int((stage == "low").sum()), "high": int(high.sum()),
            "accurate": int((stage == "accurate").sum()), "rc": int(rc.sum()),
            "changed_high": int(changed_high.sum()), "changed_all": int(changed_all.sum()),
            "added_wrong": int(added_wrong.sum()),
            "removed_wrong": int((high & wrong(truth, decided) & ~wrong(truth, out)).sum()),
            "wrong_before": int(wrong(truth, decided).sum()), "wrong_after": int(wrong(truth, out).sum()),
            "f1": _f1(truth, out), "f1_before": _f1(truth, decided)}


def _f1(truth, predicted) -> tuple[float, float]:
    from sklearn.metrics import f1_score
    return tuple(round(float(x), 3) for x in f1_score(truth, predicted, labels=list(training.JUDGED), average=None,
                                                       zero_division=0))


def _sets() -> dict[str, tuple]:
    thresholds = load("accurate").thresholds
    sets = {}
    o = np.load(OOF)
    truth, judged = o["truth"], o["candidate"] & ~o["exact"]
    a, b = o["a"], o["b"]
    decided = training.apply_model_thresholds(o["accurate"][0], thresholds, np.zeros(len(a), bool))
    overruled = np.array([dated_events(x, y) for x, y in zip(a, b, strict=True)])
    decided = np.where(np.isin(decided, training.JUDGED) & overruled, "independent", decided)
    sets["train OOF (fast recipe in fold)"] = (truth, decided, o["gate"][0], judged, overruled)
    sets["train, judge-v2 in-sample"] = (truth, decided, o["fast"], judged, overruled)
    lo = np.load(LOCOMO)
    truth, judged = lo["truth"], lo["candidate"] & ~lo["exact"]
    overruled = np.array([dated_events(x, y) for x, y in zip(lo["a"], lo["b"], strict=True)])
    decided = training.apply_model_thresholds(lo["accurate"], thresholds, lo["chinese"])
    decided = np.where(np.isin(decided, training.JUDGED) & overruled, "independent", decided)
    sets["locomo train"] = (truth, decided, lo["fast"], judged, overruled)
    return sets


def report() -> None:
    low = GATES["accurate"][1]
    sets = _sets()
    rule_sets = ("train OOF (fast recipe in fold)", "locomo train")
    for name, data in sets.items():
        base = evaluate(*data, low, None, None)
        print(f"== {name}: {base}")
    best = None
    for redundant in GRID:
        for contradictory in GRID:
            results = {name: evaluate(*sets[name], low, redundant, contradictory) for name in rule_sets}
            ok = all(r["changed_high"] <= CHANGE_BUDGET * r["rc"] and r["added_wrong"] == 0 for r in results.values())
            if not ok:
                continue
            cheap = sum(r["high"] for r in results.values())
            key = (cheap, redundant or 2.0, contradictory or 2.0)
            if best is None or key > best[0]:
                best = (key, redundant, contradictory, results)
    for side in ("redundant", "contradictory"):
        print(f"-- {side} side alone (other off), per bound: name: high / changed / added wrong / rc")
        for bound in GRID[:-1]:
            args = (bound, None) if side == "redundant" else (None, bound)
            line = []
            for name in (*rule_sets, "train, judge-v2 in-sample"):
                r = evaluate(*sets[name], low, *args)
                line.append(f"{name[:12]}: {r['high']}/{r['changed_high']}/{r['added_wrong']}/{r['rc']}")
            print(f"{bound:.2f}  " + " | ".join(line))
    assert best is not None
    print(f"CHOICE: R = {best[1]}, C = {best[2]}")
    for name in sets:
        print(f"  {name}: {evaluate(*sets[name], low, best[1], best[2])}")


def bench() -> None:
    """Pairs per stage of the shipped cascade on the dedup bench's template texts (2k new x 20k,
    candidates as the pipeline's numpy search finds them; no labels, no accurate stage run)."""
    from bench.dedup_bench import bench_texts
    from mem_assets.dedup.offline_judge_features import PairFeaturizer
    from mem_assets.dedup.offline_judge_model import gate
    from mem_resources.embedder import wordllama_embed

    old, new = bench_texts(20_000, 2_000)
    pairs = gate_study.tenant_pairs(old, new)
    judged = [(a, b) for a, b in pairs if normalize_text(a) != normalize_text(b)]
    both = PairFeaturizer(wordllama_embed).cheap(judged + [(b, a) for a, b in judged])
    shipped = gate("accurate", cascade=True)
    fast = shipped.model.pair_probabilities(both[:len(judged)], both[len(judged):])
    answers = shipped.answers(fast)
    opened = [pair for pair, answer in zip(judged, answers, strict=True) if answer is None]
    print(f"bench 2k x 20k: {len(pairs)} pairs, {len(pairs) - len(judged)} exact, low {answers.count('independent')}, "
          f"sure repeat {answers.count('redundant')}, sure contradiction {answers.count('contradictory')}, "
          f"accurate {len(opened)}; texts needing e5 {len({t for pair in opened for t in pair})} "
          f"of {len({t for pair in judged for t in pair})}")


if __name__ == "__main__":
    {"oof": oof, "locomo": locomo, "report": report, "bench": bench}[sys.argv[1]]()
