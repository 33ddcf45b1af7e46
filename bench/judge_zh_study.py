"""Study: Chinese paraphrases for the accurate judge (judge-v7's recipe), by a rule fixed before
any score (docs/dedup.md): T = thresholds per language, W = Chinese word-level features, WT = both.

``python bench/judge_zh_study.py oof W SEEDS``  out-of-fold probabilities of W in training.py's
    folds (``judge_query_study.oof``: 5 group folds per shuffle, same easy negatives, parameters
    and seeds), then (with shuffle 0) W fitted on all training pairs. v7's own out-of-fold files
    come from ``judge_query_study.py oof v7 SEEDS`` (same cache).
``python bench/judge_zh_study.py report SEEDS``  v7, T, W, WT: thresholds (training.py's rule on the
    pooled shuffles; T and WT: en and zh each by the same rule on their own rows, mixed pairs keep
    the global pair), mean redundant / contradictory F1 and wrong % (all, en, zh), the 640 LoCoMo
    training pairs (each pair its own tenant; v7 and T: the shipped judge-v7), and the verdict.
``python bench/judge_zh_study.py speed``  W's cost per pair on the training pairs, and jieba's
    first load (prefix dictionary built from the wheel's dict.txt, then from jieba's cache file).

W (``W_NAMES``), for pairs of two Chinese texts (other pairs: the word overlap and containment
already in the 68, and -1 for the span features): overlap and containment of jieba's search-mode
sub-words ("乌龙茶" also gives "乌龙") with subject, stop words and punctuation removed; and over the
aligned differing spans of the content words (SequenceMatcher, as ``diff_blocks``): the least and
mean WordLlama cosine of replaced spans, characters the two differing spans share, differing words
found elsewhere on the other side (moved, not changed), differing words whose sub-words the other
side has, and the share of characters that differ. Training data only: data/judge/heldout.jsonl and
data/judge/locomo/heldout.jsonl are never read.
"""

from __future__ import annotations

import json
import logging
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from functools import lru_cache

import jieba
import judge_query_study as base
import numpy as np

from mem_assets.dedup import judge_model, training
from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.pair_features import _CJK, _SUBJECT_WORDS, _ZH_STOP, FEATURE_NAMES, _normalize, parse
from mem_resources.memory_model import normalize_text

jieba.setLogLevel(logging.WARNING)

W_NAMES = ("w_sub_jaccard", "w_sub_contain_min", "w_sub_contain_max", "w_span_cos_min", "w_span_cos_mean",
           "w_span_char_overlap", "w_span_moved", "w_span_sub_covered_min", "w_span_chars_max")
V7 = base.COLUMNS["v7"]
LANGUAGES = ("en", "zh")
V7_LOCOMO_WRONG = 24


def _content(word: str, subject: str) -> bool:
    return bool(word) and (word[0].isalnum() or bool(_CJK.match(word))) and word not in _ZH_STOP \
        and word not in _SUBJECT_WORDS and word != subject


@lru_cache(maxsize=65536)
def subwords(text: str) -> frozenset[str]:
    """jieba search-mode words of a text (a long word and its dictionary sub-words), content only."""
    subject = parse(text).subject
    return frozenset(w for w in (p.strip().lower() for p in jieba.cut_for_search(_normalize(text)))
                     if _content(w, subject))


@lru_cache(maxsize=65536)
def _pieces(word: str) -> frozenset[str]:
    return frozenset({word} | {p for p in jieba.cut_for_search(word) if len(p) >= 2})


def _span_cos(left: np.ndarray, right: np.ndarray) -> float:
    x, y = left.mean(axis=0), right.mean(axis=0)
    return float(x @ y / (np.sqrt(x @ x) * np.sqrt(y @ y) + 1e-9))


def word_row(a: str, b: str, older: np.ndarray, newer: np.ndarray, cheap_row: np.ndarray) -> list[float]:
    """``W_NAMES`` of an older ``a`` and newer ``b``; ``older`` / ``newer``: WordLlama vectors of
    their content tokens (``parse(...).tokens``); ``cheap_row``: the pair's 68 features."""
    pa, pb = parse(a), parse(b)
    if not (pa.zh and pb.zh):
        return [float(cheap_row[FEATURE_NAMES.index(n)]) for n in ("jaccard", "contain_min", "contain_max")] \
            + [-1.0] * (len(W_NAMES) - 3)
    sa, sb = subwords(a), subwords(b)
    shared = len(sa & sb)
    contain_a, contain_b = (shared / len(s) if s else 0.0 for s in (sa, sb))
    ops = [op for op in SequenceMatcher(None, pa.tokens, pb.tokens, autojunk=False).get_opcodes() if op[0] != "equal"]
    cosines = [_span_cos(older[i1:i2], newer[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag == "replace"]
    diff_a = [t for _, i1, i2, _, _ in ops for t in pa.tokens[i1:i2]]
    diff_b = [t for _, _, _, j1, j2 in ops for t in pb.tokens[j1:j2]]
    chars_a, chars_b = set("".join(diff_a)), set("".join(diff_b))
    moved = sum(t in pb.tokens for t in diff_a) + sum(t in pa.tokens for t in diff_b)
    covered = [sum(bool(_pieces(t) & other) for t in diff) / len(diff) if diff else 1.0
               for diff, other in ((diff_a, sb), (diff_b, sa))]
    share = [len("".join(diff)) / max(1, len("".join(tokens))) for diff, tokens in ((diff_a, pa.tokens), (diff_b, pb.tokens))]
    return [shared / len(sa | sb) if sa or sb else 0.0, min(contain_a, contain_b), max(contain_a, contain_b),
            min(cosines) if cosines else 1.0, float(np.mean(cosines)) if cosines else 1.0,
            len(chars_a & chars_b) / min(len(chars_a), len(chars_b)) if chars_a and chars_b else 0.0,
            moved / max(1, len(diff_a) + len(diff_b)), min(covered), max(share)]


class WordFeaturizer(base.StudyFeaturizer):
    """judge-v7's 72 columns, then ``W_NAMES``."""

    def words(self, pairs: Sequence[tuple[str, str]], cheap: np.ndarray) -> np.ndarray:
        texts = self.cheap._texts
        return np.array([word_row(a, b, texts[a].words, texts[b].words, row)
                         for (a, b), row in zip(pairs, cheap, strict=True)], dtype=np.float64)

    def matrix(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        cheap = self.cheap.cheap(pairs)
        return np.hstack([self.passage.with_deep(pairs, cheap), self.words(pairs, cheap)])


def _word_featurizer(rows: list[dict]) -> WordFeaturizer:
    texts = [r[side] for r in rows for side in ("a", "b")]
    return WordFeaturizer(base._vectors("passage", base.e5_embed, texts), {}, V7)


def language(a: str, b: str) -> str:
    za, zb = bool(_CJK.search(a)), bool(_CJK.search(b))
    return "zh" if za and zb else "en" if not (za or zb) else "mixed"


def thresholds_by_language(runs: list[np.ndarray], truth: np.ndarray, languages: np.ndarray,
                           per_language: bool) -> dict[str, dict[str, float]]:
    pooled, tiled, where = np.vstack(runs), np.tile(truth, len(runs)), np.tile(languages, len(runs))
    chosen = {"all": training.choose_thresholds(pooled, tiled)}
    for lang in LANGUAGES:
        chosen[lang] = training.choose_thresholds(pooled[where == lang], tiled[where == lang]) if per_language \
            else chosen["all"]
    return chosen


def predict(probabilities: np.ndarray, languages: np.ndarray, chosen: Mapping[str, Mapping[str, float]]) -> np.ndarray:
    predicted = np.empty(len(probabilities), dtype=object)
    for lang in set(languages):
        mask = languages == lang
        pair = chosen.get(lang, chosen["all"])
        predicted[mask] = training.apply_thresholds(probabilities[mask], pair["redundant"], pair["contradictory"])
    return predicted.astype(str)


def _locomo(model: str, chosen: Mapping[str, Mapping[str, float]]) -> dict:
    rows = training.read_pairs(base.LOCOMO_TRAIN)
    featurizer = base._featurizer(rows, V7) if model == "v7" else _word_featurizer(rows)
    features, swapped = base._both_orders(featurizer, rows)
    if model == "v7":
        probabilities = judge_model.load("accurate").pair_probabilities(features, swapped)
    else:
        fitted = pickle.loads((base.WORK / f"final_{model}.pkl").read_bytes())
        probabilities = judge_model.symmetrize(fitted.predict_proba(features), fitted.predict_proba(swapped),
                                               training.CLASSES)
    exact = np.array([normalize_text(r["a"]) == normalize_text(r["b"]) for r in rows])
    probabilities = training._as_pipeline(probabilities, features[:, 0] >= WORDLLAMA_THRESHOLD, exact)
    predicted = predict(probabilities, np.array([language(r["a"], r["b"]) for r in rows]), chosen)
    truth = np.array([r["label"] for r in rows])
    return {"pairs": len(rows),
            "wrong_merges": int(((predicted == "redundant") & (truth != "redundant")).sum()),
            "wrong_supersedes": int(((predicted == "contradictory") & (truth == "independent")).sum()),
            "redundant_found": int(((predicted == "redundant") & (truth == "redundant")).sum()),
            "redundant": int((truth == "redundant").sum())}


CANDIDATES = {"v7": ("v7", False), "T": ("v7", True), "W": ("W", False), "WT": ("W", True)}


def report(seeds: Sequence[int]) -> None:
    rows = training.read_pairs(training.TRAIN_FILE)
    truth = np.array([r["label"] for r in rows])
    languages = np.array([language(r["a"], r["b"]) for r in rows])
    out = {}
    for name, (model, per_language) in CANDIDATES.items():
        paths = [base.WORK / f"oof_{model}_{seed}.npy" for seed in seeds]
        if not all(p.exists() for p in paths):
            continue
        runs = [np.load(p) for p in paths]
        chosen = thresholds_by_language(runs, truth, languages, per_language)
        scores = []
        for probabilities in runs:
            predicted = predict(probabilities, languages, chosen)
            scores.append({part: training._scores(truth[mask], predicted[mask]) for part, mask in (
                ("all", np.ones(len(rows), bool)), ("en", languages == "en"), ("zh", languages == "zh"))})
        mean = {part: {key: round(float(np.mean([s[part][label]["f1"] for s in scores])), 3)
                       for key, label in (("redundant_f1", "redundant"), ("contradictory_f1", "contradictory"))}
                | {"wrong_percent": round(float(np.mean([s[part]["wrong_percent"] for s in scores])), 2)}
                for part in ("all", "en", "zh")}
        per_shuffle = [[s["all"]["redundant"]["f1"], s["all"]["contradictory"]["f1"], s["all"]["wrong_percent"]]
                       for s in scores]
        fitted = model == "v7" or (base.WORK / f"final_{model}.pkl").exists()
        out[name] = {"pairs": len(rows), "shuffles": list(seeds), "thresholds": chosen, "mean": mean,
                     "per_shuffle": per_shuffle, "locomo_train": _locomo(model, chosen) if fitted else None}
    out["verdict"] = verdict(out)
    print(json.dumps(out, indent=1))


def verdict(out: Mapping[str, dict]) -> dict:
    """The rule of docs/dedup.md, fixed before any score."""
    v7 = out["v7"]["mean"]
    checks = {}
    for name in ("T", "W", "WT"):
        if name not in out or out[name]["locomo_train"] is None:
            continue
        mean, locomo = out[name]["mean"], out[name]["locomo_train"]
        total = mean["all"]["redundant_f1"] + mean["all"]["contradictory_f1"]
        checks[name] = {
            "sum": round(total, 3),
            "sum_ok": total >= v7["all"]["redundant_f1"] + v7["all"]["contradictory_f1"] + 0.02 - 1e-9,
            "each_f1_ok": all(mean["all"][k] >= v7["all"][k] - 0.005 - 1e-9
                              for k in ("redundant_f1", "contradictory_f1")),
            "wrong_ok": mean["all"]["wrong_percent"] <= v7["all"]["wrong_percent"] + 0.1 + 1e-9
            and all(mean[lang]["wrong_percent"] <= 2.0 for lang in LANGUAGES),
            "locomo_ok": locomo["wrong_merges"] + locomo["wrong_supersedes"] <= V7_LOCOMO_WRONG}
    qualified = [n for n, c in checks.items() if all(v for k, v in c.items() if k.endswith("_ok"))]
    return {"checks": checks, "ships": max(qualified, key=lambda n: checks[n]["sum"]) if qualified else None}


_LOAD = """
import logging, sys, time, jieba
jieba.setLogLevel(logging.WARNING)
tokenizer = jieba.Tokenizer()
tokenizer.tmp_dir = sys.argv[1]
start = time.perf_counter()
tokenizer.initialize()
print(time.perf_counter() - start)
"""


def speed() -> None:
    rows = training.read_pairs(training.TRAIN_FILE)
    pairs = [(r["a"], r["b"]) for r in rows] + [(r["b"], r["a"]) for r in rows]
    featurizer = WordFeaturizer({}, {}, V7)
    cheap = featurizer.cheap.cheap(pairs)
    start = time.perf_counter()
    featurizer.words(pairs, cheap)
    first = time.perf_counter() - start
    start = time.perf_counter()
    featurizer.words(pairs, cheap)
    again = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as cache:
        load = [float(subprocess.run([sys.executable, "-c", _LOAD, cache], capture_output=True, text=True,
                                     check=True).stdout) for _ in range(2)]
    zh = sum(language(a, b) == "zh" for a, b in pairs)
    print(json.dumps({"pairs": len(pairs), "zh_pairs": zh, "texts": len({t for p in pairs for t in p}),
                      "ms_per_pair_first": round(1000 * first / len(pairs), 4),
                      "ms_per_pair_texts_cached": round(1000 * again / len(pairs), 4),
                      "jieba_load_s_no_cache": round(load[0], 2), "jieba_load_s_from_cache": round(load[1], 2)},
                     indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "oof":
        base.oof(sys.argv[2], [int(s) for s in sys.argv[3].split(",")], _word_featurizer)
    elif sys.argv[1] == "speed":
        speed()
    else:
        report([int(s) for s in sys.argv[2].split(",")])
