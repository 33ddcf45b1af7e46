"""Expand the hand-written groups in research/data/judge/authored/ into labeled pairs and split them.

A group is one block: a language line (``# en``, ``# zh``, ``# mix``), a base memory ``B``, and
memories that say the same (``R``), contradict it and are newer (``C``), or are a different fact
about the same person and topic (``I``). Pairs: B with every other line, and each R with the
other R, C and I lines. ``b`` is the newer memory: a C line is always ``b``; other pairs are
ordered by a hash. Held-out split: whole groups whose base text hashes to 0 mod 4, so no sentence
of a held-out group is ever seen in training.

Run: ``python research/data/judge/build_pairs.py`` (deterministic; rewrites train.jsonl and heldout.jsonl).
"""

from __future__ import annotations

import hashlib
import json
from itertools import combinations
from pathlib import Path

HERE = Path(__file__).parent
LABELS = {"R": "redundant", "C": "contradictory", "I": "independent"}


def _hash(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def _lang(text: str, group_lang: str) -> str:
    if group_lang != "mix":
        return group_lang
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"


def _pair(a: str, b: str, label: str, group_lang: str, keep_order: bool) -> dict:
    if not keep_order and _hash(a + "\x1f" + b) % 2:
        a, b = b, a
    la, lb = _lang(a, group_lang), _lang(b, group_lang)
    return {"a": a, "b": b, "label": label, "lang": la if la == lb else "mixed"}


def groups(path: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    found = []
    for block in path.read_text("utf-8").split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        if not lines:
            continue
        if not lines[0].startswith("# "):
            raise ValueError(f"{path.name}: block without a language line: {lines[0]!r}")
        entries = [(line[0], line[2:].strip()) for line in lines[1:]]
        if entries[0][0] != "B" or any(kind not in "BRCI" for kind, _ in entries):
            raise ValueError(f"{path.name}: bad block starting {lines[1]!r}")
        found.append((lines[0][2:].strip(), entries))
    return found


def pairs_of(group_lang: str, entries: list[tuple[str, str]]) -> list[dict]:
    base = entries[0][1]
    same = [base] + [text for kind, text in entries if kind == "R"]
    pairs = [_pair(a, b, "redundant", group_lang, False) for a, b in combinations(same, 2)]
    for kind, text in entries[1:]:
        if kind == "C":
            pairs += [_pair(s, text, "contradictory", group_lang, True) for s in same]
        elif kind == "I":
            pairs += [_pair(s, text, "independent", group_lang, False) for s in same]
    return pairs


def main() -> None:
    train, heldout = [], []
    for path in sorted((HERE / "authored").glob("*.txt")):
        for group_lang, entries in groups(path):
            target = heldout if _hash(entries[0][1]) % 4 == 0 else train
            for pair in pairs_of(group_lang, entries):
                target.append({**pair, "group": f"{path.stem}:{_hash(entries[0][1]):x}"})
    for name, rows in (("train", train), ("heldout", heldout)):
        with (HERE / f"{name}.jsonl").open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    for name, rows in (("train", train), ("heldout", heldout)):
        counts: dict[tuple[str, str], int] = {}
        for row in rows:
            counts[(row["lang"], row["label"])] = counts.get((row["lang"], row["label"]), 0) + 1
        print(name, len(rows), dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
