"""Resolution guards before/after on the judge's held-out files (rule:
research/studies/resolution_guards_rule.md).

The guards are a pure function of the two texts and the judge's label, applied after the judge.
So the judge runs once per file, unguarded, as `memtend eval-judge` runs it (same candidate
search, same judge), its per-pair labels are kept in a cache file, and "after" is the guards
applied to those labels. `memtend eval-judge` on the same file gives the "after" figures directly;
this script adds the "before" and how many decisions each guard changed.

Run: ``python -m research.studies.resolution_guards_study FILE.jsonl... [--cache DIR]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from pathlib import Path

from mem_assets.dedup.evaluation import _candidate_flags, read_pairs, score
from mem_assets.resources import build_embedder, build_judge
from mem_resources.settings import load_settings


def _key(row: dict) -> str:
    return hashlib.sha256(f"{row['a']}\x1f{row['b']}\x1f{row.get('tenant', '')}".encode()).hexdigest()[:20]


def unguarded(rows: list[dict], cache: Path) -> list[str]:
    """The judge's labels as eval-judge decides them, before the guards (cached by pair)."""
    known = {}
    if cache.exists():
        known = {r["key"]: r["label"] for r in map(json.loads, cache.read_text("utf-8").splitlines())}
    todo = [i for i, row in enumerate(rows) if _key(row) not in known]
    if todo:
        settings = load_settings()
        embedder, judge = build_embedder(settings, in_dagster=False), build_judge(settings, in_dagster=False)
        from mem_assets.dedup.candidates import default_threshold

        flags = _candidate_flags(rows, embedder, default_threshold(embedder), 5)
        judged = [i for i in todo if flags[i]]
        judgments, _ = judge.judge_pairs([(rows[i]["a"], rows[i]["b"]) for i in judged])
        labels = {i: "independent" for i in todo}
        labels.update({i: j.label for i, j in zip(judged, judgments, strict=True)})
        with cache.open("a", encoding="utf-8") as out:
            for i in todo:
                known[_key(rows[i])] = labels[i]
                out.write(json.dumps({"key": _key(rows[i]), "label": labels[i]}) + "\n")
    return [known[_key(row)] for row in rows]


def _brief(result: dict) -> dict:
    c = result["classes"]
    return {"redundant_f1": c["redundant"]["f1"], "redundant_p": c["redundant"]["precision"],
            "redundant_r": c["redundant"]["recall"], "contradictory_f1": c["contradictory"]["f1"],
            "contradictory_p": c["contradictory"]["precision"], "contradictory_r": c["contradictory"]["recall"],
            "wrong_merges": result["wrong_merges"]["count"], "wrong_supersedes": result["wrong_supersedes"]["count"]}


def study(path: Path, cache_dir: Path) -> dict:
    from mem_assets.dedup.resolution_guards import guard

    rows = read_pairs(path)
    before = unguarded(rows, cache_dir / (path.parent.name + "_" + path.stem + ".jsonl"))
    pairs = [(row["a"], row["b"]) for row in rows]
    verdicts = guard(pairs, before)
    after = [v.label for v in verdicts]
    truth = [row["label"] for row in rows]
    changed = Counter(v.guard for v in verdicts if v.guard)
    right = Counter(v.guard for v, t in zip(verdicts, truth, strict=True) if v.guard and t == "independent")
    examples = [{"a": row["a"], "b": row["b"], "truth": t, "judge": b, "guard": v.guard}
                for row, t, b, v in zip(rows, truth, before, verdicts, strict=True) if v.guard]
    return {"file": str(path), "pairs": len(rows), "before": _brief(score(truth, before)),
            "after": _brief(score(truth, after)), "changed_by_guard": dict(changed),
            "changed_and_truly_independent": dict(right), "changed": examples}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/resolution_guards_study"))
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    for path in args.files:
        print(json.dumps(study(path, args.cache), ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
