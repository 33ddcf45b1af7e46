"""Tenant backup, drop and restore throughput against raw reads/writes of the same Neo4j, and
peak memory, for tenants of 10k and 100k memories (dense embeddings of the configured size).

For each scale, into one fresh tenant (untimed set-up: ``raw write``, a bare ``UNWIND … CREATE``
of the memory rows — the database's write limit for this schema — which is also the baseline):
- ``backup``: the real path (keyset pages, relationships, gzip'd JSON lines, manifest), nodes/s,
  against ``raw read`` (one streamed ``MATCH … RETURN labels(n), properties(n)`` of the same
  memories, results discarded);
- ``drop``: backup again, then the batched delete of exactly the backed-up ids;
- ``restore``: verify the backup (one full read; ``verify`` is its share of the time), then
  MERGE nodes and relationships back, against ``raw write``; then a fresh backup's checksum must
  equal the first one;
- peak RSS increase over each phase's start (sampled every 10 ms): flat from 10k to 100k means
  memory does not grow with the tenant.

The project states no speed target: the summary gives backup against raw read and restore against
raw write, and judges the one stated property, memory does not grow with the tenant
(docs/lifecycle.md): the largest phase RSS growth at the largest scale within 16 MiB of the
smallest scale's (the 1,000-memory warm-up's with one scale).

    python -m bench.lifecycle_bench [--scales 10000 100000] [--dimension 256]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.measure import PeakRss, Result, bench_tenant, drop_bench_tenant, report
from mem_assets.lifecycle.operations import backup_tenant, drop_tenant, restore_tenant
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.memory_model import (
    MemoryItem,
    MemoryMetadata,
    memory_id,
    payload_hash,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

WRITE_BATCH = 1000
MEMORIES_PER_TOPIC = 100
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def memory_rows(tenant: str, start: int, count: int, dimension: int,
                rng: np.random.Generator) -> list[dict]:
    vectors = rng.standard_normal((count, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = []
    for i, vector in zip(range(start, start + count), vectors, strict=True):
        text = f"Bench memory {i}: the user mentioned topic {i % 97} on day {i % 365}."
        digest = payload_hash(tenant, "LongTermMemory", text)
        item = MemoryItem(id=memory_id(digest), memory=text, metadata=MemoryMetadata(
            user_name=tenant, payload_hash=digest, embedding=vector.tolist(), tags=["bench"],
            key=f"k{i}", created_at=T0 + timedelta(seconds=i), updated_at=T0 + timedelta(seconds=i)))
        rows.append({"props": item.to_properties(), "topic": f"topic:{i // MEMORIES_PER_TOPIC}"})
    return rows


def seed(neo4j: Neo4jResource, tenant: str, n: int, dimension: int) -> float:
    """n memories, one Topic per 100 with a PARENT edge each; returns seconds spent writing."""
    rng = np.random.default_rng(n)
    elapsed = 0.0
    with neo4j.session() as session:
        for start in range(0, n, WRITE_BATCH):
            rows = memory_rows(tenant, start, min(WRITE_BATCH, n - start), dimension, rng)
            began = time.perf_counter()
            session.execute_write(lambda tx, rows=rows: tx.run(
                """
                UNWIND $rows AS row
                CREATE (m:Node:MemoryItem) SET m = row.props
                MERGE (t:Topic {user_name: $tenant, id: row.topic})
                CREATE (m)-[:PARENT]->(t)
                """, rows=rows, tenant=tenant).consume())
            elapsed += time.perf_counter() - began
    return elapsed


def raw_read_seconds(neo4j: Neo4jResource, tenant: str) -> float:
    """Properties, not Node objects: a result keeps every Node it hydrated (``result.graph()``)."""
    began = time.perf_counter()
    with neo4j.session(fetch_size=1000) as session:
        for _ in session.run("MATCH (n:MemoryItem {user_name: $tenant}) "
                             "RETURN labels(n), properties(n)", tenant=tenant):
            pass
    return time.perf_counter() - began


def run_scale(neo4j: Neo4jResource, n: int, dimension: int, root: Path) -> dict:
    tenant = bench_tenant(f"bench_lifecycle_{n}")
    raw_write_s = seed(neo4j, tenant, n, dimension)
    nodes = n + -(-n // MEMORIES_PER_TOPIC)
    raw_read_s = raw_read_seconds(neo4j, tenant)
    with PeakRss() as backup_rss:
        backup = backup_tenant(neo4j, root, tenant, keep_last=2)
    size = sum(f.stat().st_size for f in backup.path.iterdir())
    with PeakRss() as drop_rss:
        dropped = drop_tenant(neo4j, root, tenant, keep_last=2)
    with PeakRss() as restore_rss:
        restored = restore_tenant(neo4j, root, tenant)
    again = backup_tenant(neo4j, root, tenant, keep_last=2)
    assert backup.manifest.counts.nodes == restored.nodes == dropped.nodes_deleted == nodes
    drop_bench_tenant(neo4j, tenant)
    return {
        "nodes": nodes, "rels": backup.manifest.counts.relationships,
        "backup_nps": nodes / backup.seconds, "raw_read_nps": n / raw_read_s,
        "drop_nps": nodes / dropped.seconds,
        "restore_nps": nodes / restored.seconds, "raw_write_nps": n / raw_write_s,
        "verify_share": restored.verify_seconds / restored.seconds,
        "backup_mib": size / 2**20,
        "backup_rss": backup_rss.growth_mib, "drop_rss": drop_rss.growth_mib,
        "restore_rss": restore_rss.growth_mib,
        "max_rss": max(backup_rss.growth_mib, drop_rss.growth_mib, restore_rss.growth_mib),
        "round_trip": "equal" if again.manifest.checksum == backup.manifest.checksum else "DIFFERS",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dimension", type=int, default=None,
                        help="embedding size; default the configured embedder's, which the live vector index holds")
    args = parser.parse_args()
    settings = load_settings()
    args.dimension = args.dimension or settings.dimension
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(settings), embedding_dimension=args.dimension)
    with tempfile.TemporaryDirectory() as tmp:
        warm_up = run_scale(neo4j, 1000, args.dimension, Path(tmp))  # JVM and query-plan warm-up
    print(f"{'nodes':>7} {'backup/s':>9} {'raw rd/s':>9} {'ratio':>6} {'drop/s':>8} "
          f"{'restore/s':>10} {'verify':>7} {'raw wr/s':>9} {'ratio':>6} {'MiB':>6} "
          f"{'RSS+ backup':>12} {'RSS+ drop':>10} {'RSS+ restore':>13} {'round trip':>10}")
    runs: list[dict] = []
    summary: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.scales:
            r = run_scale(neo4j, n, args.dimension, Path(tmp))
            runs.append(r)
            summary += [
                Result(f"backup, {r['nodes']} nodes", r["backup_nps"], "nodes/s", r["raw_read_nps"],
                       "a raw streamed MATCH ... RETURN properties of the memories", higher_is_better=True),
                Result(f"restore (verify + MERGE), {r['nodes']} nodes", r["restore_nps"], "nodes/s",
                       r["raw_write_nps"], "the raw UNWIND ... CREATE that built the tenant", higher_is_better=True)]
            print(f"{r['nodes']:>7} {r['backup_nps']:>9.0f} {r['raw_read_nps']:>9.0f} "
                  f"{r['backup_nps'] / r['raw_read_nps']:>6.2f} {r['drop_nps']:>8.0f} "
                  f"{r['restore_nps']:>10.0f} {r['verify_share']:>7.0%} {r['raw_write_nps']:>9.0f} "
                  f"{r['restore_nps'] / r['raw_write_nps']:>6.2f} {r['backup_mib']:>6.0f} "
                  f"{r['backup_rss']:>12.1f} {r['drop_rss']:>10.1f} {r['restore_rss']:>13.1f} "
                  f"{r['round_trip']:>10}", flush=True)
    neo4j.close()
    print(f"process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    smallest = min(runs, key=lambda r: r["nodes"]) if len(runs) > 1 else warm_up
    largest = max(runs, key=lambda r: r["nodes"])
    summary.append(Result(
        f"largest phase RSS growth (backup, drop, restore) at {largest['nodes']} nodes", largest["max_rss"], "MiB",
        smallest["max_rss"], f"the same at {smallest['nodes']} nodes",
        target="memory does not grow with the tenant (docs/lifecycle.md): within 16 MiB of the smaller scale's",
        met=largest["max_rss"] <= smallest["max_rss"] + 16))
    report("lifecycle_bench", summary)


if __name__ == "__main__":
    main()
