"""Does making a memory's other-language encoder part only when it is offered abroad change any
placement? (issue 44 items 1 and 6; research/NOTES.md §2.12)

Runs the product's own path, ``tending.tend_many`` (ingest, dedup, reorganization), on the local
Neo4j for a set of two-language tenants, night after night, then writes per tenant every active
topic as the sorted texts of its members (level 1) and of its level-1 children's members (level
2), the memories left unplaced, and the model passes of the runs. Run it once at each commit to
compare (``git worktree``), then ``compare`` the two outputs:

    python -m research.studies.lazy_encoder_part_check run OUT.json [--tenants 8] [--nights 2]
    python -m research.studies.lazy_encoder_part_check compare BEFORE.json AFTER.json

Tenants: ``--tenants`` of the fleet bench's nights (``bench.fleet_bench.night_texts``, English and
Chinese mixed), plus the topic tuning set research/data/eval/topics.jsonl as one tenant whose
nights are its three batches. Tenants have fixed names (memory ids, and so every
tie-break, depend on them) and are dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import dagster as dg

from bench.fleet_bench import ROOT, RunFigures, night_texts
from bench.measure import drop_bench_tenant
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

TOPICS = ROOT / "research" / "data" / "eval" / "topics.jsonl"


def _nights(tenants: int, nights: int) -> list[dict[int, list[str]]]:
    """Per night, each tenant's new texts (tenant number ``tenants`` is the topic tuning set)."""
    rows = [json.loads(line) for line in TOPICS.read_text(encoding="utf-8").splitlines()]
    batches = sorted({row["batch"] for row in rows})
    out = []
    for night in range(1, max(nights, len(batches)) + 1):
        of_night = {seed: night_texts(seed, 100, night) for seed in range(tenants)} if night <= nights else {}
        if night <= len(batches):
            of_night[tenants] = [row["text"] for row in rows if row["batch"] == batches[night - 1]]
        out.append(of_night)
    return out


def _forest(neo4j: Neo4jResource, tenant: str) -> dict[str, object]:
    with neo4j.session() as session:
        rows = session.run(
            """
            MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'})
            OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {user_name: $tenant})
            RETURN t.id AS id, coalesce(t.reorg_level, 1) AS level, collect(c.id) AS children
            """, tenant=tenant).data()
        texts = dict(session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE coalesce(m.type, '') <> 'topic' "
            "RETURN m.id AS id, m.memory AS memory", tenant=tenant).values())
        unplaced = sorted(session.run(
            """
            MATCH (m:MemoryItem {user_name: $tenant, status: 'activated'})
            WHERE coalesce(m.type, '') <> 'topic' AND m.memory_type <> 'WorkingMemory'
              AND NOT EXISTS { MATCH (:MemoryItem {type: 'topic', status: 'activated'})-[:PARENT]->(m) }
            RETURN m.memory AS memory
            """, tenant=tenant).value())
    by_id = {row["id"]: row for row in rows}

    def members(tid: str) -> list[str]:
        row = by_id[tid]
        if row["level"] == 1:
            return sorted(texts[c] for c in row["children"] if c in texts)
        return sorted(text for c in row["children"] if c in by_id for text in members(c))

    return {"level1": sorted(members(t) for t, row in by_id.items() if row["level"] == 1),
            "level2": sorted(members(t) for t, row in by_id.items() if row["level"] == 2),
            "unplaced": unplaced}


def run(out: Path, tenants: int, nights: int) -> None:
    from mem_assets.tending import tend_many

    work = Path(tempfile.mkdtemp(prefix="memtend-lazy-"))
    os.environ.update(MEMTEND_INBOX=str(work / "inbox"), MEMTEND_QUARANTINE=str(work / "quarantine"),
                      MEMTEND_IO_BASE=str(work / "tables"), MEMTEND_AUTOMATION="off", DAGSTER_HOME=str(work))
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", work / "dagster.yaml")
    names = {seed: f"lazy_check_{seed:02d}" for seed in range(tenants + 1)}
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    figures = RunFigures()
    try:
        with dg.DagsterInstance.from_config(str(work)) as instance:
            instance.add_dynamic_partitions("tenants", list(names.values()))
            for night, texts in enumerate(_nights(tenants, nights), start=1):
                shutil.rmtree(work / "inbox", ignore_errors=True)
                for seed, of_tenant in texts.items():
                    folder = work / "inbox" / names[seed]
                    folder.mkdir(parents=True)
                    (folder / f"day{night}.jsonl").write_text("\n".join(
                        json.dumps({"memory": text, "created_at": f"2026-11-{night:02d}T08:00:00Z"},
                                   ensure_ascii=False) for text in of_tenant), encoding="utf-8")
                tend_many([names[seed] for seed in texts], instance, workers=2)
                print(f"night {night}: {len(texts)} tenants tended", flush=True)
            for record in instance.get_run_records():
                figures.add(instance, record)
        assert not figures.failed, figures.failed
        forests = {str(seed): _forest(neo4j, name) for seed, name in names.items()}
        passes = {model: p.items for model, p in sorted(figures.passes.items())}
        out.write_text(json.dumps({"forests": forests, "passes": passes}, ensure_ascii=False, indent=0),
                       encoding="utf-8")
        print(json.dumps(passes, indent=1))
    finally:
        for name in names.values():
            drop_bench_tenant(neo4j, name)
        neo4j.close()
        shutil.rmtree(work, ignore_errors=True)


def compare(before: Path, after: Path) -> None:
    a, b = (json.loads(path.read_text(encoding="utf-8")) for path in (before, after))
    differing = Counter()
    for seed, forest in a["forests"].items():
        other = b["forests"][seed]
        for part in ("level1", "level2", "unplaced"):
            if forest[part] != other[part]:
                differing[part] += 1
    sizes = {seed: (len(f["level1"]), len(f["level2"]), len(f["unplaced"])) for seed, f in a["forests"].items()}
    print(f"tenants {len(a['forests'])}; (level-1 topics, level-2 topics, unplaced) per tenant before: {sizes}")
    print("tenants whose forest differs:", dict(differing) or "none")
    for model in sorted(set(a["passes"]) | set(b["passes"])):
        print(f"  {model:40s} {a['passes'].get(model, 0):8d} -> {b['passes'].get(model, 0):8d}")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("out", type=Path)
    one.add_argument("--tenants", type=int, default=8)
    one.add_argument("--nights", type=int, default=2)
    two = sub.add_parser("compare")
    two.add_argument("before", type=Path)
    two.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.tenants, args.nights)
    else:
        compare(args.before, args.after)


if __name__ == "__main__":
    main()
