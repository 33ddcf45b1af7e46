"""Context-graph ingest throughput against plain memory ingest, schema export time, peak memory.

For each scale (default 2k and 10k records into one fresh tenant):
- ``context``: the real path (stream-parse context JSONL, validate, place with the tenant config,
  memories through the memtend planner/embedder/writer, MERGE characters, conversations, scenes,
  claims and the twelve relationship types, supersede conflicting claims), records/s end to end;
- ``plain``: the same memory texts through the plain ``memory_items`` ingest into another tenant
  (the baseline: what the context adds on top of writing the memories), and their ratio;
- ``export``: the tenant's schema export (three aggregating Cypher queries), and the export of
  every tenant in the database, in seconds;
- the peak RSS increase over the phase's start.

The project states no target for the context graph; the summary gives context records/s against
plain items/s of the same texts (the same-run baseline) at each scale.

    python -m bench.context_bench [--scales 2000 10000] [--batch-size 2000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.measure import PeakRss, Result, bench_tenant, drop_bench_tenant, report
from mem_assets.context_graph import schema_export as schema_doc
from mem_assets.context_graph.loading import ingest_context
from mem_assets.context_graph.records import ContextConfig, TenantContext
from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.loading import ingest_tenant
from mem_resources.embedder import HashingEmbedder
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

PREDICATES = [("LIVES_IN", "location"), ("FAVORITE", "tea"), ("HOBBY", "outdoor"), ("SELF_TRAIT", "writing")]
OBJECTS = ["上海", "北京", "oolong", "green tea", "散步", "cycling", "不太擅长说话", "likes poems"]
CONFIG = ContextConfig(default=TenantContext(
    user_id="xnne", agent_id="congyin", scene="chill_ai_chat",
    single_valued_predicates=["LIVES_IN", "FAVORITE"]))


def synthetic_records(n: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    for i in range(n):
        role = rng.choice(["[User]", "[Agent]"])
        conversation = f"ch{i % 20:02d}" if i % 2 else f"2026-02-{1 + i % 28:02d}"
        record = {"memory": f"{role} note {seed}-{i}: {rng.choice(OBJECTS)}",
                  "created_at": f"2026-02-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                  "conversation": conversation}
        if i % 3 != 2:
            predicate, domain = rng.choice(PREDICATES)
            record["claims"] = [{"predicate": predicate, "domain": domain, "object": rng.choice(OBJECTS),
                                 "confidence": round(rng.random(), 2), "topic": rng.choice(OBJECTS)}]
        yield record


def run_scale(neo4j: Neo4jResource, n: int, batch_size: int, workdir: Path) -> dict:
    inbox_root = workdir / f"inbox-{n}"
    tenant, plain_tenant = bench_tenant(f"bench_context_{n}"), bench_tenant(f"bench_plain_{n}")
    for t in (tenant, plain_tenant):
        drop_bench_tenant(neo4j, t)
    (inbox_root / tenant / "context").mkdir(parents=True)
    (inbox_root / plain_tenant).mkdir(parents=True)
    with (inbox_root / tenant / "context" / "records.jsonl").open("w", encoding="utf-8") as context_out, \
         (inbox_root / plain_tenant / "items.jsonl").open("w", encoding="utf-8") as plain_out:
        for record in synthetic_records(n, seed=n):
            context_out.write(json.dumps(record, ensure_ascii=False) + "\n")
            plain_out.write(json.dumps({"memory": record["memory"], "created_at": record["created_at"]},
                                       ensure_ascii=False) + "\n")
    embedder = HashingEmbedder(dimension=neo4j.embedding_dimension)
    inbox = InboxResource(root=str(inbox_root), quarantine_dir=str(workdir / "quarantine"))

    with PeakRss() as context_rss:
        start = time.perf_counter()
        report = ingest_context(tenant, neo4j, embedder, inbox, CONFIG, batch_size, 20)
        context_s = time.perf_counter() - start
    assert report.accepted == n and report.rejected == 0, report
    with PeakRss() as plain_rss:
        start = time.perf_counter()
        ingest_tenant(plain_tenant, neo4j, embedder, inbox, batch_size, 8000, 20)
        plain_s = time.perf_counter() - start
    with PeakRss() as export_rss:
        start = time.perf_counter()
        document = schema_doc.export_document(neo4j, tenant)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        schema_doc.export_document(neo4j, None)
        export_all_s = time.perf_counter() - start
    nodes = sum(node.count for node in document.node_types)
    for t in (tenant, plain_tenant):
        drop_bench_tenant(neo4j, t)
    return {"records": n, "context_per_s": n / context_s, "plain_per_s": n / plain_s,
            "ratio": plain_s / context_s, "nodes": nodes, "export_s": export_s,
            "export_all_s": export_all_s, "superseded": len(report.superseded),
            "context_rss": context_rss.growth_mib, "export_rss": export_rss.growth_mib,
            "plain_rss": plain_rss.growth_mib}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[2_000, 10_000])
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args()
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    with tempfile.TemporaryDirectory() as tmp:
        run_scale(neo4j, 500, args.batch_size, Path(tmp))  # JVM and query-plan warm-up
    print(f"{'records':>8} {'context/s':>10} {'plain/s':>9} {'ratio':>6} {'nodes':>7} "
          f"{'export s':>9} {'export all s':>13} {'superseded':>11} {'RSS+ ctx MiB':>13} {'RSS+ export MiB':>16}")
    summary: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.scales:
            r = run_scale(neo4j, n, args.batch_size, Path(tmp))
            summary.append(Result(f"context ingest, {n} records", r["context_per_s"], "records/s", r["plain_per_s"],
                                  "plain memory_items ingest of the same texts", higher_is_better=True))
            print(f"{r['records']:>8} {r['context_per_s']:>10.0f} {r['plain_per_s']:>9.0f} {r['ratio']:>6.2f} "
                  f"{r['nodes']:>7} {r['export_s']:>9.2f} {r['export_all_s']:>13.2f} {r['superseded']:>11} "
                  f"{r['context_rss']:>13.1f} {r['export_rss']:>16.1f}", flush=True)
    neo4j.close()
    report("context_bench", summary)


if __name__ == "__main__":
    main()
