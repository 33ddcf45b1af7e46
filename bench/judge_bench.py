"""Speed of the offline judge: 10,000 candidate pairs judged cold (parsing, embedding, features,
model), and again with texts already seen. Pairs are drawn from the training texts, each text in
several pairs as in a real tenant. Prints one JSON object; no Neo4j.

Run: ``python bench/judge_bench.py [--pairs 10000]``
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

from mem_assets.dedup import judge_model
from mem_assets.dedup.pair_features import parse
from mem_resources.embedder import wordllama_embed

TRAIN = Path(__file__).parents[1] / "data" / "judge" / "train.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    args = parser.parse_args()
    rows = [json.loads(line) for line in TRAIN.read_text("utf-8").splitlines() if line.strip()]
    texts = sorted({row[side] for row in rows for side in ("a", "b")})
    rng = random.Random(0)
    pairs = [tuple(rng.sample(texts, 2)) for _ in range(args.pairs)]
    judge_model.load()
    wordllama_embed(["warm up"])
    parse("预热")
    start = time.perf_counter()
    judge_model.predict(pairs)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    judge_model.predict(pairs)
    warm = time.perf_counter() - start
    print(json.dumps({"pairs": len(pairs), "distinct_texts": len({t for p in pairs for t in p}),
                      "cold_seconds": round(cold, 2), "warm_seconds": round(warm, 2),
                      "pairs_per_second_cold": round(len(pairs) / cold)}))


if __name__ == "__main__":
    main()
