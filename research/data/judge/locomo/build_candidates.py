"""Candidate pairs from LoCoMo observations, as the pipeline's dedup search meets them.

Per speaker (one tenant), observations in session order; each one in turn is the new memory
``b`` and ``find_candidates`` (WordLlama, default threshold, top_k 5) searches the speaker's
earlier observations (same-session earlier lines included) for ``a``. The split is fixed by
conversation: 42 and 43 held out, 26, 30 and 41 train.

    python research/data/judge/locomo/build_candidates.py sample     # population + unlabeled samples
    python research/data/judge/locomo/build_candidates.py assemble   # samples + labels_*.jsonl -> {train,heldout}.jsonl

Input: /work/locomo_allowed/full-conv-<n>.json (or --source). Fixed seeds; the same input gives
the same files.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np

from mem_assets.dedup.candidates import NodeVectors, default_threshold, find_candidates
from mem_resources.embedder import WordLlamaEmbedder
from mem_resources.memory_model import normalize_text

HERE = Path(__file__).resolve().parent
SPLITS = {"train": (26, 30, 41), "heldout": (42, 43)}
TOP_K = 5
HELDOUT_SAMPLE = 520
TRAIN_HIGH = 0.65
TRAIN_HIGH_SHARE = 0.5
TRAIN_SAMPLE = 640
SEED = 20261201


def session_date(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56'."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").strftime("%Y-%m-%dT%H:%M")


def observations(conv: dict) -> dict[str, list[dict]]:
    """Per speaker, observations in session then line order, with their session's date."""
    by_speaker: dict[str, list[dict]] = {}
    sessions = sorted(conv["observation"], key=lambda k: int(re.search(r"\d+", k).group()))
    for key in sessions:
        number = int(re.search(r"\d+", key).group())
        date = session_date(conv["conversation"][f"session_{number}_date_time"])
        for speaker, facts in conv["observation"][key].items():
            for fact, dia_id in facts:
                by_speaker.setdefault(speaker, []).append(
                    {"text": fact, "date": date, "session": number, "dia_id": str(dia_id)})
    return by_speaker


def candidate_pairs(conv_id: int, speaker: str, items: list[dict], vectors: np.ndarray,
                    threshold: float) -> list[dict]:
    """Every (earlier a, new b) pair the pipeline's search reports, b taken one at a time."""
    ids = [f"o{i}" for i in range(len(items))]
    hashes = [normalize_text(item["text"]) for item in items]
    group = f"locomo-{conv_id}-{speaker}"
    pairs = []
    for j in range(1, len(items)):
        new = NodeVectors([ids[j]], ["LongTermMemory"], [hashes[j]], vectors[j:j + 1])
        active = NodeVectors(ids[:j + 1], ["LongTermMemory"] * (j + 1), hashes[:j + 1], vectors[:j + 1])
        found = find_candidates(new, active, threshold, TOP_K)
        for left, right, score in zip(found["left_id"], found["right_id"], found["score"], strict=True):
            i = int((right if left == ids[j] else left)[1:])
            a, b = items[i], items[j]
            pairs.append({"id": f"{conv_id}-{speaker}-{i}-{j}", "a": a["text"], "b": b["text"],
                          "speaker": speaker, "group": group, "a_date": a["date"], "b_date": b["date"],
                          "a_dia": a["dia_id"], "b_dia": b["dia_id"], "cosine": round(float(score), 4)})
    return pairs


def population(source: Path) -> dict[str, list[dict]]:
    embedder = WordLlamaEmbedder()
    threshold = default_threshold(embedder)
    result = {}
    for split, convs in SPLITS.items():
        pairs = []
        for conv_id in convs:
            conv = json.loads((source / f"full-conv-{conv_id}.json").read_text("utf-8"))
            for speaker, items in observations(conv).items():
                vectors = embedder.embed([item["text"] for item in items])
                pairs.extend(candidate_pairs(conv_id, speaker, items, vectors, threshold))
        result[split] = pairs
    return result


def sample(pairs: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Held-out: uniform. Train: half from cosine >= TRAIN_HIGH (all of them if fewer), rest uniform."""
    heldout = random.Random(SEED).sample(pairs["heldout"], HELDOUT_SAMPLE)
    rng = random.Random(SEED + 1)
    high = [p for p in pairs["train"] if p["cosine"] >= TRAIN_HIGH]
    low = [p for p in pairs["train"] if p["cosine"] < TRAIN_HIGH]
    take_high = min(len(high), int(TRAIN_SAMPLE * TRAIN_HIGH_SHARE))
    train = rng.sample(high, take_high) + rng.sample(low, TRAIN_SAMPLE - take_high)
    order = {p["id"]: n for n, p in enumerate(pairs["train"] + pairs["heldout"])}
    return {"train": sorted(train, key=lambda p: order[p["id"]]),
            "heldout": sorted(heldout, key=lambda p: order[p["id"]])}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["sample", "assemble"])
    parser.add_argument("--source", type=Path, default=Path("/work/locomo_allowed"))
    args = parser.parse_args()
    if args.step == "sample":
        pairs = population(args.source)
        for split, rows in pairs.items():
            cos = np.array([p["cosine"] for p in rows])
            print(f"{split}: {len(rows)} candidate pairs, cosine >= {TRAIN_HIGH}: {(cos >= TRAIN_HIGH).sum()},"
                  f" exact: {sum(normalize_text(p['a']) == normalize_text(p['b']) for p in rows)}")
        for split, rows in sample(pairs).items():
            write_jsonl(HERE / f"sample_{split}.jsonl", rows)
            print(f"sample_{split}.jsonl: {len(rows)} pairs")
        return
    for split in SPLITS:
        labels = {r["id"]: r["label"] for r in read_jsonl(HERE / f"labels_{split}.jsonl")}
        rows = read_jsonl(HERE / f"sample_{split}.jsonl")
        missing = [r["id"] for r in rows if r["id"] not in labels]
        if missing:
            raise SystemExit(f"{split}: {len(missing)} pairs unlabeled, e.g. {missing[:3]}")
        out = [{"a": r["a"], "b": r["b"], "label": labels[r["id"]], "lang": "en", "speaker": r["speaker"],
                "group": r["group"], "a_date": r["a_date"], "b_date": r["b_date"], "cosine": r["cosine"],
                "id": r["id"]} for r in rows]
        write_jsonl(HERE / f"{split}.jsonl", out)
        print(f"{split}.jsonl: {len(out)} pairs", dict(Counter(r["label"] for r in out)))


if __name__ == "__main__":
    main()
