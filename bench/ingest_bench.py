"""Ingest throughput against the raw write limit of the same Neo4j, and peak memory.

For each scale (default 10k items into one fresh tenant):
- ``ingest``: the real path (stream-parse JSONL, validate, hash ids, existence check, embed,
  MERGE long-term + working nodes with UNWIND, ledger, working-memory trim), items/s end to end;
- ``raw``: the same node rows (precomputed, untimed) through a bare ``UNWIND … CREATE`` into
  another tenant, timing only the writes: the database's limit for this schema (the baseline);
- their ratio, and the peak RSS increase over the phase's start (sampled every 10 ms).

The embedder is the configured one (``MEMTEND_EMBEDDER``, default the offline WordLlama), so the
figures include embedding; the load average is printed with them.

Each scale also prints the models' passes per item and the model floor (passes x per-pass cost
in this run) against the ingest's time.

The ratio is raw seconds over ingest seconds (target >= 0.9, issue 44); the slowest single
existence check and write of the run are printed (target < 2 s, issue 14) against the slowest
raw batch write of the same size, and the 1-minute load before and after.

    python -m bench.ingest_bench [--scales 20000 100000] [--batch-size 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.measure import (
    PeakRss,
    Result,
    bench_tenant,
    drop_bench_tenant,
    measured,
    model_floor,
    raw_create_seconds,
    report,
)
from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.loading import ingest_tenant
from mem_assets.ingest.memory_nodes import build_nodes, plan
from mem_assets.ingest.parsing import MemoryItemIn
from mem_assets.resources import build_embedder
from mem_resources import model_passes
from mem_resources.embedder import EmbedderResource
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.memory_model import utc_now
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

RAW_CREATE = ("UNWIND $rows AS row CREATE (m:Node:MemoryItem) SET m = row.props, "
              "m.created_at = datetime(row.created_at), m.updated_at = datetime(row.updated_at)")
SUBJECTS = ["The user", "The user's sister", "The user's manager", "The user's dog", "用户", "用户的朋友"]
VERBS = ["likes", "visited", "plans to buy", "is learning", "mentioned", "喜欢", "去过", "正在学习"]
OBJECTS = ["green tea", "Kyoto", "a road bike", "Rust", "jazz piano", "sourdough bread", "北京烤鸭",
           "围棋", "马拉松", "a vintage camera", "Python", "hiking boots", "上海", "oolong tea"]


def synthetic_items(n: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    for i in range(n):
        text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (note {seed}-{i})."
        yield {"memory": text, "key": f"note {i}", "tags": ["bench", rng.choice(["a", "b", "c"])],
               "confidence": round(rng.random(), 2), "sources": [{"type": "chat", "role": "user",
                                                                 "content": text}]}


def raw_write_seconds(neo4j: Neo4jResource, path: Path, tenant: str, batch_size: int,
                      embedder: EmbedderResource) -> tuple[float, float]:
    """Time only ``UNWIND $rows AS row CREATE`` of the exact rows ingest writes (rows built
    untimed, one batch at a time so memory stays flat): total and slowest batch seconds."""
    times: list[float] = []
    batch: list[MemoryItemIn] = []

    def flush() -> float:
        planned = plan(tenant, batch)
        nodes = build_nodes(tenant, planned, embedder.embed([p.item.memory for p in planned]), utc_now())
        return raw_create_seconds(neo4j, ingest_queries.wire_rows(nodes), len(nodes), RAW_CREATE)

    with path.open(encoding="utf-8") as handle:
        for line in handle:
            batch.append(MemoryItemIn.model_validate_json(line))
            if len(batch) == batch_size:
                times.append(flush())
                batch = []
    if batch:
        times.append(flush())
    return sum(times), max(times)


def run_scale(neo4j: Neo4jResource, embedder: EmbedderResource, n: int, batch_size: int,
              workdir: Path) -> dict:
    inbox_root = workdir / f"inbox-{n}"
    tenant, raw_tenant = bench_tenant(f"bench_ingest_{n}"), bench_tenant(f"bench_raw_{n}")
    for t in (tenant, raw_tenant):
        drop_bench_tenant(neo4j, t)
    folder = inbox_root / tenant
    folder.mkdir(parents=True)
    path = folder / "items.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for item in synthetic_items(n, seed=n):
            out.write(json.dumps(item, ensure_ascii=False) + "\n")
    inbox = InboxResource(root=str(inbox_root), quarantine_dir=str(workdir / "quarantine"))

    started = model_passes.snapshot()
    with PeakRss() as ingest_rss, measured() as ingest:
        report = ingest_tenant(tenant, neo4j, embedder, inbox, batch_size, 8000, 20)
    passes = model_passes.since(started)
    assert report.new == n, report
    with PeakRss() as raw_rss:
        ingest.baseline_s, slowest_raw_s = raw_write_seconds(neo4j, path, raw_tenant, batch_size, embedder)
    for t in (tenant, raw_tenant):
        drop_bench_tenant(neo4j, t)
    return {"items": n, "measured": ingest, "slowest_check_s": report.slowest_check_s,
            "slowest_write_s": report.slowest_write_s, "slowest_raw_write_s": slowest_raw_s,
            "ingest_peak_rss_growth_mib": ingest_rss.growth_mib,
            "raw_peak_rss_growth_mib": raw_rss.growth_mib, "model_passes": passes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[10_000],
                        help="items per run; the issue's scales are 20000 100000")
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    settings = load_settings()
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(settings), embedding_dimension=settings.dimension)
    embedder = build_embedder(settings, in_dagster=False)
    print(f"embedder {type(embedder).__name__} ({embedder.dimension} dims)")
    with tempfile.TemporaryDirectory() as tmp:
        run_scale(neo4j, embedder, 2000, args.batch_size, Path(tmp))  # JVM and query-plan warm-up
    print(f"{'items':>8} {'ingest/s':>10} {'raw/s':>10} {'ratio':>6} {'ingest s':>9} {'raw s':>7} "
          f"{'max check s':>12} {'max write s':>12} {'RSS+ ingest MiB':>16} {'RSS+ raw MiB':>13} "
          f"{'load before->after':>19}")
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.scales:
            r = run_scale(neo4j, embedder, n, args.batch_size, Path(tmp))
            m = r["measured"]
            slowest = max(r["slowest_check_s"], r["slowest_write_s"])
            results += [
                Result(f"ingest, {n} items", n / m.seconds, "items/s", n / m.baseline_s,
                       "a bare UNWIND ... CREATE of the same rows", target=">= 0.9x the baseline (issue 44)",
                       met=m.vs_baseline >= 0.9, higher_is_better=True),
                Result(f"slowest single existence check or write, {n} items", slowest, "s",
                       r["slowest_raw_write_s"], "the slowest bare UNWIND ... CREATE batch of the same size",
                       target="< 2 s (issue 14)", met=slowest < 2)]
            print(f"{r['items']:>8} {n / m.seconds:>10.0f} {n / m.baseline_s:>10.0f} "
                  f"{m.vs_baseline:>6.2f} {m.seconds:>9.1f} {m.baseline_s:>7.1f} "
                  f"{r['slowest_check_s']:>12.2f} {r['slowest_write_s']:>12.2f} "
                  f"{r['ingest_peak_rss_growth_mib']:>16.1f} {r['raw_peak_rss_growth_mib']:>13.1f} "
                  f"{m.load_before:>9.1f} -> {m.load_after:<5.1f}", flush=True)
            results.append(model_floor("ingest_bench", r["model_passes"], n, m.seconds, f"ingest, {n} items"))
    neo4j.close()
    report("ingest_bench", results)


if __name__ == "__main__":
    main()
