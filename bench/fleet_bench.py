"""A night of many small tenants: N tenants x M new memories tended (ingest, dedup, reorganize,
schema check) through the path `memtend tend` takes: `tend_memory` executed in-process, one run per
tenant, one after another, in one warm process, on a fresh Dagster instance (SQLite) and the local
Neo4j. Reported: total wall time, per run the wall time, the compute of its steps (step durations
from the instance) and the rest (run overhead: run/event storage, step orchestration), the
projection to 1,000 tenants, and the machine load before and after.

The daemon path (sensor/schedule-launched runs) adds one process start per run on top: see
bench/run_overhead_bench.py for that fixed cost.

    python bench/fleet_bench.py [--tenants 20] [--memories 100]
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
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memtend-fleet-"))
    run = uuid.uuid4().hex[:6]
    tenants = [f"fleet_{run}_{i:04d}" for i in range(args.tenants)]
    _write_inbox(work / "inbox", tenants, args.memories)
    os.environ.update(MEMTEND_INBOX=str(work / "inbox"), MEMTEND_QUARANTINE=str(work / "quarantine"),
                      MEMTEND_IO_BASE=str(work / "tables"), MEMTEND_AUTOMATION="off")
    (work / "home").mkdir()
    shutil.copy(ROOT / "dagster.yaml", work / "home" / "dagster.yaml")

    from mem_assets.cli import QUIET_LOGGING
    from mem_assets.definitions import defs, tend_memory_job

    job = defs.resolve_job_def(tend_memory_job.name)
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    load_before = os.getloadavg()
    walls: list[float] = []
    computes: list[float] = []
    steps: dict[str, list[float]] = {}
    print(f"fleet: {args.tenants} tenants x {args.memories} memories, tend_memory in-process, load "
          f"{load_before[0]:.1f}")
    try:
        with dg.DagsterInstance.from_config(str(work / "home")) as instance:
            instance.add_dynamic_partitions("tenants", tenants)
            started = time.perf_counter()
            for tenant in tenants:
                begun = time.perf_counter()
                result = job.execute_in_process(partition_key=tenant, instance=instance, run_config=QUIET_LOGGING)
                walls.append(time.perf_counter() - begun)
                assert result.success, f"{tenant}: run {result.run_id} failed"
                timed = {step.step_key: step.end_time - step.start_time
                         for step in instance.get_run_step_stats(result.run_id)
                         if step.end_time and step.start_time}
                computes.append(sum(timed.values()))
                for key, seconds in timed.items():
                    steps.setdefault(key, []).append(seconds)
            total = time.perf_counter() - started
    finally:
        for tenant in tenants:
            drop_bench_tenant(neo4j, tenant)
        shutil.rmtree(work, ignore_errors=True)
    overheads = [wall - compute for wall, compute in zip(walls, computes, strict=True)]
    load_after = os.getloadavg()
    print(f"  total               {total:8.1f} s")
    print(f"  per run, median     {statistics.median(walls):8.2f} s wall = "
          f"{statistics.median(computes):.2f} s step compute + {statistics.median(overheads):.2f} s overhead")
    slowest = sorted(steps.items(), key=lambda item: -statistics.median(item[1]))[:6]
    print("  slowest steps       " + ", ".join(f"{key} {statistics.median(times):.2f} s" for key, times in slowest))
    print(f"  first run           {walls[0]:8.2f} s (imports and caches warm up)")
    print(f"  1,000 tenants       {1000 * total / args.tenants / 60:8.1f} min projected (target < 30 min)")
    print(f"  load average        {load_before[0]:.1f} -> {load_after[0]:.1f} (1 min), 2 cores")


if __name__ == "__main__":
    main()
