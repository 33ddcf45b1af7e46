"""Speed of the offline judge on bench-like candidate pairs (prints figures; not a test; no Neo4j).

Texts come from ``dedup_bench.synthetic_texts`` (half English, half Chinese, with near repeats and
city conflicts as there); each new text is paired with its ``--top-k`` nearest existing texts by
WordLlama cosine, as the candidate search does, so a text sits in several pairs. Timed:

1. end to end, cold: ``judge_model.predict`` (both orders of every pair, as the offline judge)
   with the fast model, then with the accurate one (multilingual-e5 too) on the first
   ``--accurate-pairs`` pairs;
2. the fast model's work split by stage, cold again: parse, embed, feature rows, tree predict;
3. ``judging.build_requests`` over those pairs as a frame;
4. with ``--gate-pairs FILE`` (labeled pairs as ``memtend eval-judge`` reads them, e.g. research/data/judge/locomo/train.jsonl:
   real conversations, where the gate fires far more than on the bench's template texts): the
   accurate judge behind the shipped e5 gate and behind ``--baseline-bound``, cold each time, twice.

Each line carries the 1-minute load average before and after it (``measure.measured``).

    python bench/judge_bench.py [--pairs 20000] [--accurate-pairs 2000] [--top-k 5]
                                [--gate-pairs FILE] [--baseline-bound 0.19]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from dedup_bench import CITIES, ZH_CITIES, friend_name, synthetic_texts
from measure import measured

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mem_assets.dedup import offline_judge_features as pair_features
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.evaluation import read_pairs
from mem_assets.dedup.judgment_cache import build_requests
from mem_assets.dedup.offline_judge_features import PairFeaturizer, parse
from mem_resources.embedder import wordllama_embed


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
    """Forget every parsed text and word (all memo caches of the featurizer module)."""
    for value in vars(pair_features).values():
        if hasattr(value, "cache_clear"):
            value.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--accurate-pairs", type=int, default=2_000)
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--gate-pairs", type=Path)
    parser.add_argument("--baseline-bound", type=float, default=0.19)
    args = parser.parse_args()
    pairs = bench_pairs(args.pairs, args.top_k)
    both = [*pairs, *((b, a) for a, b in pairs)]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    parse("预热")
    print(f"## {len(pairs)} pairs, {len(texts)} distinct texts "
          f"({sum(parse(t).zh for t in texts)} Chinese); features in both orders")
    for kind, subset in (("fast", pairs), ("accurate", pairs[:args.accurate_pairs])):
        cold()
        distinct = len({t for pair in subset for t in pair})
        with measured() as total:
            judge_model.predict(subset, judge_model.load(kind))
        print(f"{total.line(f'end to end (predict, {kind} model, {len(subset)} pairs)')}; "
              f"{len(subset) / total.seconds:.0f} pairs/s, {1000 * total.seconds / len(subset):.3f} ms/pair, "
              f"{1000 * total.seconds / distinct:.2f} ms/distinct text")
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
    if args.gate_pairs:
        gate_cost(args.gate_pairs, args.baseline_bound)


def gate_cost(path: Path, baseline_bound: float) -> None:
    """The accurate judge behind the shipped gate and behind ``baseline_bound`` on the same pairs,
    cold each time; two rounds, since the first pass of a process pays the ONNX sessions' warm-up."""
    pairs = [(r["a"], r["b"]) for r in read_pairs(path)]
    shipped = judge_model.gate()
    assert shipped is not None
    seconds = {}
    for round_ in (1, 2):
        for gate in (dataclasses.replace(shipped, below=baseline_bound), shipped):
            cold()
            with measured() as total:
                decisions = judge_model.predict(pairs, judge_model.load("accurate"), gate=gate)
            seconds[gate.below] = total.seconds
            gated = sum(d.gated is not None for d in decisions)
            print(f"{total.line(f'round {round_}: accurate judge, gate at {gate.below} ({len(pairs)} pairs of {path.name})')}"
                  f"; {gated} gated, {1000 * total.seconds / len(pairs):.2f} ms/pair")
    print(f"  round 2, shipped gate / gate at {baseline_bound}: {seconds[shipped.below] / seconds[baseline_bound]:.2f}x")

if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"wall {time.perf_counter() - start:.1f} s")
