"""A night of many small tenants: N tenants x M new memories tended (ingest, dedup, reorganize,
schema check) through the path `memtend tend [--workers W]` takes: `tend_memory` executed
in-process, one run per tenant, one after another in each of W warm processes, on a fresh Dagster
instance (SQLite) and the local Neo4j. Reported: total wall time, per run the wall time, the compute of its steps (step durations
from the instance) and the rest (run overhead: run/event storage, step orchestration), the
projection to 1,000 tenants, and the machine load before and after.

The daemon path (sensor/schedule-launched runs) adds one process start per run on top: see
bench/run_overhead_bench.py for that fixed cost.

    python bench/fleet_bench.py [--tenants 20] [--memories 100] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import dagster as dg
from measure import drop_bench_tenant
from reorg_bench import synthetic_texts

from mem_resources.local_neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]


def _write_inbox(inbox: Path, tenants: list[str], memories: int) -> None:
    for seed, tenant in enumerate(tenants):
        folder = inbox / tenant
        folder.mkdir(parents=True)
        texts = synthetic_texts(memories, seed)
        texts[-memories // 10:] = texts[:memories // 10]
        (folder / "day.jsonl").write_text("\n".join(
            json.dumps({"memory": text, "created_at": "2026-11-30T08:00:00Z"}, ensure_ascii=False)
            for text in texts), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="one fleet per value (the first is the baseline of the ratios)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memtend-fleet-"))
    os.environ.update(MEMTEND_INBOX=str(work / "inbox"), MEMTEND_QUARANTINE=str(work / "quarantine"),
                      MEMTEND_IO_BASE=str(work / "tables"), MEMTEND_AUTOMATION="off")
    baseline = None
    try:
        for number, workers in enumerate(args.workers):
            total = fleet(work, number, args.tenants, args.memories, workers)
            baseline = baseline or total
            print(f"  vs {args.workers[0]} worker(s)    {baseline / total:8.2f}x throughput")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fleet(work: Path, number: int, tenants_n: int, memories: int, workers: int) -> float:
    """One fleet of fresh tenants on a fresh instance (its own DAGSTER_HOME); the inbox is shared."""
    run = uuid.uuid4().hex[:6]
    tenants = [f"fleet_{run}_{i:04d}" for i in range(tenants_n)]
    _write_inbox(work / "inbox", tenants, memories)
    home = work / f"home{number}"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)

    from mem_assets.tending import tend_many

    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    load_before = os.getloadavg()
    walls: list[float] = []
    computes: list[float] = []
    steps: dict[str, list[float]] = {}
    print(f"fleet: {tenants_n} tenants x {memories} memories, tend_memory in-process in {workers} "
          f"worker process(es), load {load_before[0]:.1f}")
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.add_dynamic_partitions("tenants", tenants)
            started = time.perf_counter()
            outcomes = tend_many(tenants, instance, workers=workers)
            total = time.perf_counter() - started
            for outcome in outcomes:
                walls.append(outcome.seconds)
                assert outcome.success, f"{outcome.tenant}: run {outcome.run_id} failed"
                timed = {step.step_key: step.end_time - step.start_time
                         for step in instance.get_run_step_stats(outcome.run_id)
                         if step.end_time and step.start_time}
                computes.append(sum(timed.values()))
                for key, seconds in timed.items():
                    steps.setdefault(key, []).append(seconds)
    finally:
        for tenant in tenants:
            drop_bench_tenant(neo4j, tenant)
    overheads = [wall - compute for wall, compute in zip(walls, computes, strict=True)]
    load_after = os.getloadavg()
    print(f"  total               {total:8.1f} s")
    print(f"  per run, median     {statistics.median(walls):8.2f} s wall = "
          f"{statistics.median(computes):.2f} s step compute + {statistics.median(overheads):.2f} s overhead")
    slowest = sorted(steps.items(), key=lambda item: -statistics.median(item[1]))[:6]
    print("  slowest steps       " + ", ".join(f"{key} {statistics.median(times):.2f} s" for key, times in slowest))
    print(f"  first run           {walls[0]:8.2f} s (imports and caches warm up)")
    print(f"  1,000 tenants       {1000 * total / tenants_n / 60:8.1f} min projected (target < 30 min)")
    print(f"  load average        {load_before[0]:.1f} -> {load_after[0]:.1f} (1 min), {os.cpu_count()} cores")
    return total


if __name__ == "__main__":
    main()
