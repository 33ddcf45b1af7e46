"""Join the hand labels (labels.tsv) to the LoCoMo observation texts and write the topic sets.

    python research/data/eval/locomo/build_topics.py [--source /work/locomo_allowed] [--out research/data/eval/locomo]

Reads only ``full-conv-{26,30,41,42,43}.json``; writes ``topics_tune.jsonl`` (conversations 26,
30, 41) and ``topics_heldout.jsonl`` (42, 43), one ``{"text", "topic", "batch", "tenant"}`` line per
observation. An observation is keyed by conversation, session, speaker, dia_id (list ids joined by
",") and ``n``, its position among the observations with the same first four keys. Every
observation must have exactly one label and every label an observation. Batches: each
conversation's sessions in three consecutive, near-equal runs (19 sessions: 1-7, 8-13, 14-19).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
TUNE = (26, 30, 41)
HELD_OUT = (42, 43)
BATCHES = 3

Key = tuple[int, int, str, str, int]


def observations(source: Path, conv: int) -> list[tuple[Key, str, int]]:
    """(key, text, batch) of every observation of one conversation, in session order."""
    data = json.loads((source / f"full-conv-{conv}.json").read_text(encoding="utf-8"))
    sessions = sorted(data["observation"], key=lambda name: int(name.split("_")[1]))
    seen: Counter[tuple[int, int, str, str]] = Counter()
    rows = []
    for name in sessions:
        session = int(name.split("_")[1])
        batch = 1 + BATCHES * (session - 1) // len(sessions)
        for speaker, facts in data["observation"][name].items():
            for text, dia in facts:
                dia_id = ",".join(dia) if isinstance(dia, list) else dia
                base = (conv, session, speaker, dia_id)
                rows.append(((*base, seen[base]), text, batch))
                seen[base] += 1
    return rows


def read_labels(path: Path) -> dict[Key, str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {(int(r["conv"]), int(r["session"]), r["speaker"], r["dia_id"], int(r["n"])): r["topic"]
                for r in csv.DictReader(handle, delimiter="\t")}


def build(source: Path, labels: dict[Key, str], convs: tuple[int, ...]) -> list[dict[str, object]]:
    items = []
    for conv in convs:
        for key, text, batch in observations(source, conv):
            items.append({"text": text, "topic": labels.pop(key), "batch": batch,
                          "tenant": f"locomo-{conv}-{key[2].lower()}"})
    owners: dict[str, set[object]] = {}
    for item in items:
        owners.setdefault(str(item["topic"]), set()).add(item["tenant"])
    shared = [topic for topic, tenants in owners.items() if len(tenants) > 1]
    if shared:
        raise SystemExit(f"topics shared by two tenants: {shared}")
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=Path("/work/locomo_allowed"))
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    labels = read_labels(HERE / "labels.tsv")
    for name, convs in (("topics_tune.jsonl", TUNE), ("topics_heldout.jsonl", HELD_OUT)):
        items = build(args.source, labels, convs)
        with (args.out / name).open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
        print(f"{name}: {len(items)} items, {len({i['topic'] for i in items})} topics, "
              f"{len({i['tenant'] for i in items})} tenants")
    if labels:
        raise SystemExit(f"{len(labels)} labels match no observation, e.g. {next(iter(labels))}")


if __name__ == "__main__":
    main()
