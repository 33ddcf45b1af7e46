"""What one tick of ``dedup_sensor`` costs on a large graph: its one cross-tenant read.

The sensor must find nodes that other writers put straight into Neo4j, so it reads every
``MemoryItem`` once per tick (30 s) and keeps the unchecked ones (``queries.pending_by_tenant``).
Seeded (untimed): T tenants of N checked memories each, plus U unchecked ones per tenant. Timed:
the sensor's read (median of 5, after one warm-up), against a same-run baseline: a label scan that
reads one property of every node (``WHERE n.user_name IS NOT NULL RETURN count(*)``), the floor of
any read that must look at each node. The bench tenants are removed afterwards. The project
states no target beyond the read fitting the sensor's 30 s interval, which the summary judges.

    python -m bench.sensor_bench [--tenants 100] [--nodes 10000] [--unchecked 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bench.measure import Result, drop_bench_tenant, raw_create_seconds, report
from mem_assets.dedup import queries
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(tenant: str, nodes: int, unchecked: int) -> list[dict]:
    """Memories as ingest leaves them after dedup: checked after their last update, except the
    last ``unchecked`` ones."""
    out = []
    for k in range(nodes + unchecked):
        at = T0 + timedelta(seconds=k)
        row = {"user_name": tenant, "id": f"mem:{tenant}:{k}", "memory": f"memory {k}", "status": "activated",
               "memory_type": "LongTermMemory", "created_at": at, "updated_at": at}
        if k < nodes:
            row["dedup_checked_at"] = at + timedelta(minutes=1)
        out.append(row)
    return out


def median_seconds(neo4j: Neo4jResource, read: Callable) -> tuple[float, object]:
    with neo4j.session() as session:
        result = session.execute_read(read)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            result = session.execute_read(read)
            times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=10_000, help="checked memories per tenant")
    parser.add_argument("--unchecked", type=int, default=5, help="unchecked memories per tenant")
    args = parser.parse_args()
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    run = uuid.uuid4().hex[:6]
    tenants = [f"bench_sensor_{run}_{k}" for k in range(args.tenants)]
    try:
        seeded = 0.0
        for tenant in tenants:
            seeded += raw_create_seconds(neo4j, rows(tenant, args.nodes, args.unchecked), batch_size=10_000)
        with neo4j.session() as session:
            total = session.run("MATCH (n:MemoryItem) RETURN count(n) AS n").single()["n"]
        tick, pending = median_seconds(neo4j, queries.pending_by_tenant)
        scan, _ = median_seconds(neo4j, lambda tx: tx.run("MATCH (n:MemoryItem) WHERE n.user_name IS NOT NULL "
                                                       "RETURN count(*) AS n").single()["n"])
        ours = set(tenants)
        mine = {t: ids for t, ids in pending.items() if t in ours}
        assert len(mine) == args.tenants and all(len(ids) == args.unchecked for ids in mine.values())
        print(json.dumps({"memory_items_in_database": total, "bench_tenants": args.tenants,
                          "unchecked_per_tenant": args.unchecked, "seed_seconds": round(seeded, 1),
                          "sensor_read_seconds": round(tick, 3), "one_property_scan_seconds": round(scan, 3),
                          "vs_baseline": round(scan / tick, 2) if tick else None,
                          "share_of_a_30_s_tick": round(tick / 30, 4)}))
        report("sensor_bench", [Result(
            f"dedup_sensor read, {total} memory nodes in the database", tick, "s", scan,
            "a label scan reading one property of every memory node",
            target="< 30 s, the sensor's interval (no tighter target stated)", met=tick < 30)])
    finally:
        for tenant in tenants:
            drop_bench_tenant(neo4j, tenant)
        neo4j.close()


if __name__ == "__main__":
    main()
