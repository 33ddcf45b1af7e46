"""Speed of the offline judge on bench-like candidate pairs (prints figures; not a test; no Neo4j).

Texts come from ``dedup_bench.synthetic_texts`` (half English, half Chinese, with near repeats and
city conflicts as there); each new text is paired with its ``--top-k`` nearest existing texts by
WordLlama cosine, as the candidate search does, so a text sits in several pairs. Timed:

1. end to end, cold: ``judge_model.predict`` (both orders of every pair, as the offline judge)
   with the fast model, then with the accurate one (multilingual-e5 too) on the first
   ``--accurate-pairs`` pairs, then the accurate judge's cascade as shipped (fast gate) and
   with its opt-in middle stage (``MEMTEND_JUDGE_MIDDLE``) on those pairs, with the pairs each stage answered, their
   texts' e5 vectors given as kept (the pipeline keeps them on the nodes: paid once per memory);
2. the fast model's work split by stage, cold again: parse, embed, feature rows, tree predict;
3. ``judgment_cache.build_requests`` over those pairs as a frame.

Each line carries the 1-minute load average before and after it (``measure.measured``). The
project states no target of its own for the judge (its time is part of dedup's, bench/dedup_bench.py);
the summary gives ms per pair against same-run baselines: for the fast model, WordLlama embedding
of the pairs' distinct texts alone (the floor of any judge reading them); for the accurate one, the
fast model on the same pairs. The accurate judge behind two gate bounds is a study:
research/studies/judge_gate_cost_study.py.

    python -m bench.judge_bench [--pairs 20000] [--accurate-pairs 2000] [--top-k 5]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import pandas as pd

from bench.dedup_bench import CITIES, ZH_CITIES, friend_name, synthetic_texts
from bench.measure import Result, measured, report
from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_features as pair_features
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.judgment_cache import build_requests
from mem_assets.dedup.offline_judge_features import PairFeaturizer, parse
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR


def bench_pairs(count: int, top_k: int) -> list[tuple[str, str]]:
    """(older, newer) pairs: ``count / top_k`` new texts, each with its nearest existing ones."""
    rng = random.Random(count)
    new_count = max(1, count // top_k)
    texts = synthetic_texts(new_count * 5, rng)
    rng.shuffle(texts)
    old, new = texts[new_count:], texts[:new_count]
    for i in range(0, new_count - 3, 20):
        new[i + 1] = rng.choice(old).replace("。", "!").replace(".", " too.")
        city, (en_name, zh_name) = i % len(CITIES), friend_name(i // 20)
        old[i % len(old)] = f"The user's friend {en_name} lives in {CITIES[city]}."
        new[i + 2] = f"The user's friend {en_name} lives in {CITIES[(city + 1) % len(CITIES)]}."
        old[(i + 3) % len(old)] = f"用户的朋友{zh_name}住在{ZH_CITIES[city]}。"
        new[i + 3] = f"用户的朋友{zh_name}住在{ZH_CITIES[(city + 1) % len(ZH_CITIES)]}。"
    old = list(dict.fromkeys(old))
    new = [t for t in dict.fromkeys(new) if t not in set(old)]
    old_vectors, new_vectors = wordllama_embed(old), wordllama_embed(new)
    pairs = []
    for lo in range(0, len(new), 512):
        scores = new_vectors[lo:lo + 512] @ old_vectors.T
        nearest = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
        pairs.extend((old[j], new[lo + i]) for i, row in enumerate(nearest) for j in row)
    return pairs[:count]


def cold() -> None:
    """Forget every parsed text and word (all memo caches of the featurizer module) and every pair
    the cross-encoders read (each is kept per process), loading them again untimed."""
    for value in vars(pair_features).values():
        if hasattr(value, "cache_clear"):
            value.cache_clear()
    cross_encoder.load.cache_clear()
    for language in judge_model.load("accurate").cross_encoders:
        cross_encoder.load(DEFAULT_MODELS_DIR, language)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--accurate-pairs", type=int, default=2_000)
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()
    pairs = bench_pairs(args.pairs, args.top_k)
    both = [*pairs, *((b, a) for a, b in pairs)]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    parse("预热")
    print(f"## {len(pairs)} pairs, {len(texts)} distinct texts "
          f"({sum(parse(t).zh for t in texts)} Chinese); features in both orders")
    ms_per_pair: dict[str, float] = {}
    for label, kind, subset in (("fast", "fast", pairs), ("accurate", "accurate", pairs[:args.accurate_pairs]),
                                ("fast on the accurate's pairs", "fast", pairs[:args.accurate_pairs])):
        cold()
        distinct = len({t for pair in subset for t in pair})
        with measured() as total:
            judge_model.predict(subset, judge_model.load(kind))
        ms_per_pair[label] = 1000 * total.seconds / len(subset)
        print(f"{total.line(f'end to end (predict, {label} model, {len(subset)} pairs)')}; "
              f"{len(subset) / total.seconds:.0f} pairs/s, {1000 * total.seconds / len(subset):.3f} ms/pair, "
              f"{1000 * total.seconds / distinct:.2f} ms/distinct text")
    subset = pairs[:args.accurate_pairs]
    kept = dict(zip(distinct := list(dict.fromkeys(t for pair in subset for t in pair)), e5_embed(distinct),
                    strict=True))
    for label, middle in (("cascade, defaults", None),
                          ("cascade with the middle stage", judge_model.middle_gate("accurate"))):
        cold()
        with measured() as total:
            decided = judge_model.predict(subset, judge_model.load(), judge_model.featurizer(True, kept),
                                          judge_model.gate("accurate", cascade=True), middle=middle)
        ms_per_pair[label] = 1000 * total.seconds / len(subset)
        stages = {stage: sum(d.stage == stage for d in decided) for stage in ("exact", "fast", "middle", "accurate")}
        print(f"{total.line(f'end to end (predict, accurate {label}, {len(subset)} pairs)')}; "
              f"{1000 * total.seconds / len(subset):.3f} ms/pair; pairs per stage {stages}")
    model = judge_model.load("fast")

    cold()
    featurizer = PairFeaturizer(wordllama_embed)
    stages = {}
    with measured() as stages["parse"]:
        for text in texts:
            parse(text)
    with measured() as stages["embed (+ per-text arrays)"]:
        featurizer._prepare(texts)
    with measured() as stages["feature rows"]:
        features = featurizer.matrix(both)
    with measured() as stages["tree predict"]:
        model.decide(model.pair_probabilities(features[:len(pairs)], features[len(pairs):]))
    frame = pd.DataFrame({"left_id": [f"o{hash(a)}" for a, _ in pairs], "right_id": [f"n{hash(b)}" for _, b in pairs],
                          "left_text": [a for a, _ in pairs], "right_text": [b for _, b in pairs]})
    with measured() as stages["build_requests"]:
        build_requests(frame)
    for name, figure in stages.items():
        print(f"  {figure.line(name)}")
    print(f"  stages sum (without build_requests): "
          f"{sum(f.seconds for n, f in stages.items() if n != 'build_requests'):.2f} s")
    with measured() as embed_only:
        wordllama_embed(texts)
    report("judge_bench", [
        Result(f"fast judge end to end, cold, {len(pairs)} pairs", ms_per_pair["fast"], "ms/pair",
               1000 * embed_only.seconds / len(pairs), "WordLlama embedding of the pairs' distinct texts alone"),
        Result(f"accurate judge end to end, cold, {min(args.accurate_pairs, len(pairs))} pairs",
               ms_per_pair["accurate"], "ms/pair", ms_per_pair["fast on the accurate's pairs"],
               "the fast judge on the same pairs"),
        Result(f"accurate cascade with the middle stage, e5 kept, {min(args.accurate_pairs, len(pairs))} pairs",
               ms_per_pair["cascade with the middle stage"], "ms/pair", ms_per_pair["cascade, defaults"],
               "the default cascade (no middle stage) on the same pairs")])



if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - start:.1f} s")
