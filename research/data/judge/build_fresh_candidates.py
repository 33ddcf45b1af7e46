"""Candidate pairs from a fresh conversation set (fresh6, fresh7), as the pipeline's dedup search meets them.

The same population as LoCoMo's (``locomo/build_candidates.py``): per speaker (one tenant),
observations in session order; each in turn is the new memory ``b`` and ``find_candidates``
(WordLlama, default threshold, top_k 5) searches the speaker's earlier observations for ``a``.
Every candidate pair is labeled (no sampling), so the file is the whole population.

    python research/data/judge/build_fresh_candidates.py fresh7 sample    # conv_*.jsonl -> unlabeled.jsonl
    python research/data/judge/build_fresh_candidates.py fresh7 assemble  # + labels_*.jsonl -> heldout.jsonl

The conversation files and their language are the set's ``SETS`` entry; a set's folder holds them.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from mem_assets.dedup.candidates import default_threshold
from mem_resources.embedder import WordLlamaEmbedder
from research.data.judge.locomo.build_candidates import candidate_pairs, read_jsonl, write_jsonl

HERE = Path(__file__).resolve().parent
SETS = {"fresh6": {"a": "en", "b": "en", "c": "zh"}, "fresh7": {"d": "en", "e": "en", "f": "zh"},
        "fresh8": {"g": "en", "h": "en", "i": "zh"}, "fresh9": {"j": "en", "k": "en", "l": "zh"},
        "fresh10": {"m": "en", "n": "en", "o": "zh"},
        "fresh11": {"p": "en", "q": "en", "r": "zh"}}


def population(name: str) -> list[dict]:
    embedder = WordLlamaEmbedder()
    threshold = default_threshold(embedder)
    pairs = []
    for conv, lang in SETS[name].items():
        by_speaker: dict[str, list[dict]] = {}
        for row in read_jsonl(HERE / name / f"conv_{conv}.jsonl"):
            by_speaker.setdefault(row["speaker"], []).append(
                {"text": row["text"], "date": row["date"], "session": row["session"], "dia_id": str(row["session"])})
        for speaker, items in by_speaker.items():
            vectors = embedder.embed([item["text"] for item in items])
            for pair in candidate_pairs(0, speaker, items, vectors, threshold):
                pair["id"] = f"{conv}-{pair['id'].split('-', 1)[1]}"
                pair["group"] = f"{name}-{conv}-{speaker}"
                pair["lang"] = lang
                pairs.append(pair)
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", choices=sorted(SETS))
    parser.add_argument("step", choices=["sample", "assemble"])
    args = parser.parse_args()
    here = HERE / args.set
    if args.step == "sample":
        pairs = population(args.set)
        write_jsonl(here / "unlabeled.jsonl", pairs)
        print(f"unlabeled.jsonl: {len(pairs)} candidate pairs", dict(Counter(p["group"] for p in pairs)))
        return
    labels = {r["id"]: r["label"] for path in sorted(here.glob("labels_*.jsonl")) for r in read_jsonl(path)}
    rows = read_jsonl(here / "unlabeled.jsonl")
    missing = [r["id"] for r in rows if r["id"] not in labels]
    if missing:
        raise SystemExit(f"{len(missing)} pairs unlabeled, e.g. {missing[:3]}")
    out = [{"a": r["a"], "b": r["b"], "label": labels[r["id"]], "lang": r["lang"], "speaker": r["speaker"],
            "group": r["group"], "a_date": r["a_date"], "b_date": r["b_date"], "cosine": r["cosine"],
            "id": r["id"]} for r in rows]
    write_jsonl(here / "heldout.jsonl", out)
    print(f"heldout.jsonl: {len(out)} pairs", dict(Counter(r["label"] for r in out)))


if __name__ == "__main__":
    main()
