"""Does a cycle of one language place the same without e5? (issue 44 items 1 and 6)

    python -m research.studies.one_language_space_check [--cache /tmp/e5once]

Each set's tenants are split by language (``tenant/en``, ``tenant/zh``), so every cycle holds one
language, as a single-language tenant's does. Then the kept vector is either whole (e5 ``query:``
⊕ both encoders: what the product made before one-language spaces) or holds only the memory's own
encoder part, the rest zeros (what it makes now for a one-language cycle), scored through eval-topics' code path with the shipped thresholds.
Every figure of the report must be equal; the script exits 1 otherwise. Vectors come from
e5_once_study's cache (made there when absent).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mem_assets.reorg.evaluation import EvalItem, evaluate_topics, read_items
from mem_assets.reorg.placement_thresholds import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS, EMBEDDER_PARAMS
from mem_assets.reorg.topic_space import language
from research.studies.e5_once_study import TUNING, parts
from research.studies.placement_cascade_study import Cached

ROOT = Path(__file__).resolve().parents[2]
SETS = {**TUNING, "fresh5": "fresh5/topics.jsonl"}


def split_by_language(items: list[EvalItem]) -> list[EvalItem]:
    return [item.model_copy(update={"tenant": f"{item.tenant}/{language(item.text)}"}) for item in items]


def report(items: list[EvalItem], data: dict[str, np.ndarray], whole: bool) -> dict:
    texts = [i.text for i in items]
    own = np.array([[language(t) == lang for lang in ("en", "zh")] for t in texts])
    first = data["query"] if whole else np.zeros_like(data["query"])
    en = data["en"] if whole else data["en"] * own[:, :1]
    zh = data["zh"] if whole else data["zh"] * own[:, 1:]
    kept = dict(zip(texts, np.hstack([first, en, zh]), strict=True))
    wl = dict(zip(texts, data["wl"], strict=True))
    result = evaluate_topics(items, Cached(wl), EMBEDDER_PARAMS, (), E5_PARAMS, Cached(kept).embed, ("en", "zh"),
                             COMBINED_PARAMS, cross=CROSS_PARAMS, cascade=None)
    return result.model_dump(exclude={"near_duplicates"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path("/tmp/e5once"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    differing = 0
    for name, path in SETS.items():
        items = split_by_language(read_items(ROOT / "research/data/eval" / path))
        data = parts(name, [i.text for i in items], args.cache)
        whole, own = report(items, data, True), report(items, data, False)
        same = whole == own
        differing += not same
        print(json.dumps({"set": name, "memories": len(items), "tenants": whole["tenants"],
                          "purity": whole["purity"], "placed": whole["placed"], "identical": same,
                          **({} if same else {"own_part_only": {k: own[k] for k in ("purity", "placed", "topics")}})}),
              flush=True)
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
