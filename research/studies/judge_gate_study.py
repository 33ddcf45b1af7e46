"""Study: skip e5 for pairs the cheap features already call clearly independent.

``python research/studies/judge_gate_study.py oof``   out-of-fold probabilities of the accurate recipe and
                                           of a gate (the fast recipe, 68 cheap features) in the
                                           same folds as ``training.cross_validate`` (with its
                                           out-of-fold cross-encoder columns), saved to
                                           /tmp/judge_gate_oof.npz.
``python research/studies/judge_gate_study.py sets``  candidate sets (dedup bench 2k x 10k, fleet 100 x
                                           100, LoCoMo train population) with cheap-gate
                                           probabilities, saved to /tmp/judge_gate_sets.npz.
``python research/studies/judge_gate_study.py report`` tables from both.

Training data only: research/data/judge/heldout.jsonl and research/data/judge/locomo/heldout.jsonl are never read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research" / "data" / "judge" / "locomo"))

from mem_assets.dedup.candidates import (
    WORDLLAMA_THRESHOLD,
    NodeVectors,
    find_candidates,
)
from mem_assets.dedup.offline_judge_features import DEEP_FEATURE_NAMES, FEATURE_NAMES, PairFeaturizer
from mem_assets.dedup.offline_judge_model import both_chinese, load, symmetrize
from mem_assets.dedup.offline_judge_model import featurizer as accurate_featurizer
from mem_resources.embedder import wordllama_embed
from mem_resources.memory_model import normalize_text
from research.training import judge_trees as training

CHEAP = len(FEATURE_NAMES)
MIDDLE = CHEAP + len(DEEP_FEATURE_NAMES)
OOF = Path("/tmp/judge_gate_oof.npz")
SETS = Path("/tmp/judge_gate_sets.npz")
LOCOMO_TRAIN = Path(__file__).resolve().parents[2] / "research" / "data" / "judge" / "locomo" / "train.jsonl"
SHUFFLES = (0,)
"""One of training.py's three shuffles: each fold refits the accurate recipe (minutes on two cores)."""
GATES = np.round(np.arange(0.01, 0.31, 0.01), 2)


def oof(middle: bool = False) -> None:
    """With ``middle``, the middle recipe (``FEATURE_NAMES`` + ``DEEP_FEATURE_NAMES``, the
    accurate recipe's parameters) is refitted in the same folds too (``judge_middle_study``)."""
    rows = training.read_pairs(training.TRAIN_FILE)
    featurizer, features, swapped = training.training_features(rows)
    truth = np.array([r["label"] for r in rows])
    groups = np.array([r["group"] for r in rows])
    candidate = features[:, FEATURE_NAMES.index("sem_cos")] >= WORDLLAMA_THRESHOLD
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    accurate, gate, mid = [], [], []
    for seed in SHUFFLES:
        pa = np.zeros((len(rows), 3))
        pg = np.zeros((len(rows), 3))
        pm = np.zeros((len(rows), 3))
        for fit_rows, test_rows in GroupKFold(5, shuffle=True, random_state=seed).split(features, truth, groups):
            negatives = training.easy_negatives([rows[i] for i in fit_rows], featurizer, seed)
            model = training._fit(features[fit_rows], swapped[fit_rows], truth[fit_rows], negatives,
                                  training.PARAMS["accurate"])
            pa[test_rows] = symmetrize(model.predict_proba(features[test_rows]),
                                       model.predict_proba(swapped[test_rows]), training.CLASSES)
            cheap = training._fit(features[fit_rows][:, :CHEAP], swapped[fit_rows][:, :CHEAP], truth[fit_rows],
                                  negatives[:, :CHEAP], training.PARAMS["fast"])
            pg[test_rows] = symmetrize(cheap.predict_proba(features[test_rows][:, :CHEAP]),
                                       cheap.predict_proba(swapped[test_rows][:, :CHEAP]), training.CLASSES)
            if middle:
                deep = training._fit(features[fit_rows][:, :MIDDLE], swapped[fit_rows][:, :MIDDLE], truth[fit_rows],
                                     negatives[:, :MIDDLE], training.PARAMS["middle"])
                pm[test_rows] = symmetrize(deep.predict_proba(features[test_rows][:, :MIDDLE]),
                                           deep.predict_proba(swapped[test_rows][:, :MIDDLE]), training.CLASSES)
            print(f"seed {seed}: fold done", flush=True)
        accurate.append(training._as_pipeline(pa, candidate, exact))
        gate.append(pg)
        mid.append(pm)
    fast = load("fast").pair_probabilities(features[:, :CHEAP], swapped[:, :CHEAP])
    np.savez(OOF, accurate=np.array(accurate), gate=np.array(gate), fast=fast, truth=truth, candidate=candidate,
             exact=exact, a=np.array([r["a"] for r in rows]), b=np.array([r["b"] for r in rows]),
             chinese=both_chinese(features), **({"middle": np.array(mid)} if middle else {}))


def tenant_pairs(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    """(older, newer) candidate pairs of one tenant, as the pipeline's numpy search finds them."""
    texts = old + new
    vectors = wordllama_embed(texts)
    ids = [f"m{i}" for i in range(len(texts))]
    hashes = [normalize_text(t) for t in texts]
    active = NodeVectors(ids, ["LongTermMemory"] * len(ids), hashes, vectors)
    n = len(old)
    fresh = NodeVectors(ids[n:], ["LongTermMemory"] * len(new), hashes[n:], vectors[n:])
    found = find_candidates(fresh, active, WORDLLAMA_THRESHOLD, 5)
    pairs = []
    for left, right in zip(found["left_id"], found["right_id"], strict=True):
        i, j = sorted((int(left[1:]), int(right[1:])))
        pairs.append((texts[i], texts[j]))
    return pairs


def fleet_pairs(tenants: int = 100, memories: int = 100) -> list[tuple[str, str, int]]:
    from bench.fleet_bench import night_texts

    pairs = []
    for seed in range(tenants):
        texts = list(dict.fromkeys(night_texts(seed, memories, 1)))
        pairs.extend((a, b, seed) for a, b in tenant_pairs([], texts))
    return pairs


def locomo_population() -> list[tuple[str, str, int]]:
    from build_candidates import SPLITS, population  # noqa: F401

    rows = population(Path("/work/locomo_allowed"))["train"]
    tenant = {g: n for n, g in enumerate(sorted({r["group"] for r in rows}))}
    return [(r["a"], r["b"], tenant[r["group"]]) for r in rows]


def sets() -> None:
    from bench.dedup_bench import bench_texts

    fast = load("fast")
    out = {}
    old, new = bench_texts(10_000, 2_000)
    named = {"bench": [(a, b, 0) for a, b in tenant_pairs(old, new)], "fleet": fleet_pairs(),
             "locomo_pop": locomo_population(),
             "locomo_train": [(r["a"], r["b"], 0) for r in training.read_pairs(LOCOMO_TRAIN)]}
    for name, pairs in named.items():
        featurizer = PairFeaturizer(wordllama_embed)
        both = featurizer.matrix([(a, b) for a, b, _ in pairs] + [(b, a) for a, b, _ in pairs])
        forward, backward = both[:len(pairs)], both[len(pairs):]
        out[f"{name}_fast"] = fast.pair_probabilities(forward, backward)
        out[f"{name}_cheap"] = both
        out[f"{name}_a"] = np.array([a for a, _, _ in pairs])
        out[f"{name}_b"] = np.array([b for _, b, _ in pairs])
        out[f"{name}_tenant"] = np.array([t for _, _, t in pairs])
        print(name, len(pairs), "pairs", flush=True)
    np.savez(SETS, **out)


def _gate_table(truth, decided, judged, gate_p, a, b, label):
    """Per g: pairs gated, R/C decisions lost (all / right ones), wrong resolutions removed, texts."""
    r, c = training.CLASSES.index("redundant"), training.CLASSES.index("contradictory")
    rc = np.isin(decided, training.JUDGED)
    wrong = ((decided == "redundant") & (truth != "redundant")) | ((decided == "contradictory") & (truth == "independent"))
    texts = set(a[judged]) | set(b[judged])
    print(f"== {label}: {judged.sum()} judged pairs, {rc.sum()} R/C decisions ({wrong.sum()} wrong), {len(texts)} texts")
    for g in GATES:
        gated = judged & (np.maximum(gate_p[:, r], gate_p[:, c]) < g)
        opened = judged & ~gated
        needed = set(a[opened]) | set(b[opened])
        lost = gated & rc
        print(f"g={g:.2f} gated {gated.sum()} ({100 * gated.sum() / judged.sum():.1f}%) lost R/C {lost.sum()}"
              f" ({100 * lost.sum() / max(rc.sum(), 1):.2f}%; right {(lost & ~wrong).sum()}, wrong removed"
              f" {(lost & wrong).sum()}) texts needing e5 {len(needed)} (saved {100 * (1 - len(needed) / max(len(texts), 1)):.1f}%)")


def report() -> None:
    thresholds = load("accurate").thresholds
    o = np.load(OOF)
    truth, judged = o["truth"], o["candidate"] & ~o["exact"]
    for s, (accurate, gate) in enumerate(zip(o["accurate"], o["gate"], strict=True)):
        decided = training.apply_thresholds(accurate, thresholds["redundant"], thresholds["contradictory"])
        _gate_table(truth, decided, judged, gate, o["a"], o["b"], f"OOF shuffle {s}, gate = fast recipe in fold")
        if s == 0:
            _gate_table(truth, decided, judged, o["fast"], o["a"], o["b"], "OOF shuffle 0, gate = judge-v2 (in-sample)")


def locomo() -> None:
    """The 640 labeled LoCoMo train pairs: judge-v6 as shipped, gate = judge-v2."""
    rows = training.read_pairs(LOCOMO_TRAIN)
    pairs = [(r["a"], r["b"]) for r in rows]
    accurate, fast = load("accurate"), load("fast")
    featurizer = accurate_featurizer()
    both = featurizer.matrix(pairs + [(b, a) for a, b in pairs])
    n = len(pairs)
    decided = np.array([label for label, _ in accurate.decide(accurate.pair_probabilities(both[:n], both[n:]))])
    exact = np.array([normalize_text(a) == normalize_text(b) for a, b in pairs])
    decided[exact] = "redundant"
    gate_p = fast.pair_probabilities(both[:n, :CHEAP], both[n:, :CHEAP])
    _gate_table(np.array([r["label"] for r in rows]), decided, ~exact, gate_p, np.array([a for a, _ in pairs]),
                np.array([b for _, b in pairs]), "LoCoMo train (640 labeled), judge-v6, gate = judge-v2")


def savings() -> None:
    """e5 passes the judge-v2 gate saves on the candidate sets (no labels)."""
    d = np.load(SETS)
    r, c = training.CLASSES.index("redundant"), training.CLASSES.index("contradictory")
    for name in ("bench", "fleet", "locomo_pop"):
        a, b, p = d[f"{name}_a"], d[f"{name}_b"], d[f"{name}_fast"]
        judged = np.array([normalize_text(x) != normalize_text(y) for x, y in zip(a, b, strict=True)])
        texts = set(a[judged]) | set(b[judged])
        print(f"== {name}: {len(a)} pairs, {judged.sum()} judged, {len(texts)} texts")
        for g in GATES:
            opened = judged & (np.maximum(p[:, r], p[:, c]) >= g)
            needed = set(a[opened]) | set(b[opened])
            print(f"g={g:.2f} gated {(judged & ~opened).sum()} ({100 * (judged & ~opened).sum() / judged.sum():.1f}%)"
                  f" texts needing e5 {len(needed)} (saved {100 * (1 - len(needed) / len(texts)):.1f}%)")


if __name__ == "__main__":
    {"oof": oof, "sets": sets, "report": report, "locomo": locomo, "savings": savings}[sys.argv[1]]()
