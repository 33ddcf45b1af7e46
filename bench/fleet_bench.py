"""A night of many small tenants: N tenants x M new memories tended (ingest, dedup, reorganize,
schema check) through the path `memtend tend [--workers W]` takes: `tend_memory` executed
in-process, one run per tenant, one after another in each of W warm processes, on a fresh Dagster
instance (SQLite) and the local Neo4j. Reported: total wall time, per run the wall time, the compute of its steps (step durations
from the instance) and the rest (run overhead: run/event storage, step orchestration), the
projection to 1,000 tenants, and the machine load before and after.

The daemon path (sensor/schedule-launched runs) adds one process start per run on top: see
bench/run_overhead_bench.py for that fixed cost.

Target (issue 14): 1,000 tenants x 100 new memories in < 30 min, judged on the projection when a
run has >= 20 tenants of 100 memories. The summary's figure is the last ``--workers`` value's
fleet; its same-run baseline the first's (default: 2 workers against 1).

    python -m bench.fleet_bench [--tenants 20] [--memories 100] [--workers 1 2] [--nights 1]

With ``--nights 2`` the same tenants get a second day of new memories: the steady state of a
fleet, where dedup compares new memories with ones judged on earlier nights.
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
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from bench.measure import Result, drop_bench_tenant, report
from bench.reorg_bench import synthetic_texts
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]


def night_texts(seed: int, memories: int, night: int) -> list[str]:
    """Night ``night`` (1, 2, ...) of tenant number ``seed``: ``memories`` new texts, the last 10%
    of them repeats of the night's first ones."""
    texts = [f"{text} [night {night}]" if night > 1 else text
             for text in synthetic_texts(memories, seed + 10_000 * (night - 1))]
    texts[-memories // 10:] = texts[:memories // 10]
    return texts


def _write_inbox(inbox: Path, tenants: list[str], memories: int, night: int) -> None:
    for seed, tenant in enumerate(tenants):
        folder = inbox / tenant
        folder.mkdir(parents=True, exist_ok=True)
        texts = night_texts(seed, memories, night)
        (folder / f"day{night}.jsonl").write_text("\n".join(
            json.dumps({"memory": text, "created_at": f"2026-11-{night:02d}T08:00:00Z"}, ensure_ascii=False)
            for text in texts), encoding="utf-8")


def _judge_vectors(instance: dg.DagsterInstance, run_id: str) -> tuple[int, int]:
    """(made, reused) e5 text vectors of the run's ``relation_judgments``."""
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = event.asset_materialization
        if materialization and materialization.asset_key == dg.AssetKey("relation_judgments"):
            meta = materialization.metadata
            made, reused = meta.get("text_vectors_made"), meta.get("text_vectors_reused")
            return (made.value if made else 0), (reused.value if reused else 0)
    return 0, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="one fleet per value (the first is the baseline of the ratios)")
    parser.add_argument("--nights", type=int, default=1,
                        help="nights per fleet: from the second on, tenants already hold earlier nights' memories")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memtend-fleet-"))
    os.environ.update(MEMTEND_INBOX=str(work / "inbox"), MEMTEND_QUARANTINE=str(work / "quarantine"),
                      MEMTEND_IO_BASE=str(work / "tables"), MEMTEND_AUTOMATION="off")
    nights: list[list[float]] = []
    try:
        for number, workers in enumerate(args.workers):
            nights.append(fleet(work, number, args.tenants, args.memories, workers, args.nights))
            print(f"  vs {args.workers[0]} worker(s)    {nights[0][0] / nights[-1][0]:8.2f}x throughput")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def projected_min(total: float) -> float:
        return 1000 * total / args.tenants / 60

    at_scale = args.memories == 100 and args.tenants >= 20
    single = len(args.workers) == 1
    report("fleet_bench", [Result(
        f"{args.workers[-1]} worker(s), night {night + 1}: 1,000 tenants x {args.memories} projected from "
        f"{args.tenants}", projected_min(nights[-1][night]), "min",
        None if single else projected_min(nights[0][night]),
        "a single --workers value" if single else f"{args.workers[0]} worker(s) on the same night",
        target="< 30 min for 1,000 tenants x 100 new memories (issue 14)",
        met=projected_min(nights[-1][night]) < 30 if at_scale else None,
        unjudged=f"run at {args.tenants} tenants x {args.memories} memories") for night in range(args.nights)])


def fleet(work: Path, number: int, tenants_n: int, memories: int, workers: int, nights: int) -> list[float]:
    """One fleet of fresh tenants on a fresh instance (its own DAGSTER_HOME), tended ``nights``
    times; returns each night's total seconds."""
    run = uuid.uuid4().hex[:6]
    tenants = [f"fleet_{run}_{i:04d}" for i in range(tenants_n)]
    home = work / f"home{number}"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)

    from mem_assets.tending import tend_many

    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    totals = []
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.add_dynamic_partitions("tenants", tenants)
            for night in range(1, nights + 1):
                _write_inbox(work / "inbox", tenants, memories, night)
                totals.append(_night(instance, tenants, memories, workers, night, tend_many))
    finally:
        for tenant in tenants:
            drop_bench_tenant(neo4j, tenant)
    return totals


def _night(instance: dg.DagsterInstance, tenants: list[str], memories: int, workers: int, night: int,
           tend_many: Callable) -> float:
    load_before = os.getloadavg()
    walls: list[float] = []
    computes: list[float] = []
    steps: dict[str, list[float]] = {}
    made = reused = 0
    print(f"fleet night {night}: {len(tenants)} tenants x {memories} new memories, tend_memory in-process "
          f"in {workers} worker process(es), load {load_before[0]:.1f}")
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
        run_made, run_reused = _judge_vectors(instance, outcome.run_id)
        made, reused = made + run_made, reused + run_reused
    overheads = [wall - compute for wall, compute in zip(walls, computes, strict=True)]
    load_after = os.getloadavg()
    print(f"  total               {total:8.1f} s")
    print(f"  per run, median     {statistics.median(walls):8.2f} s wall = "
          f"{statistics.median(computes):.2f} s step compute + {statistics.median(overheads):.2f} s overhead")
    slowest = sorted(steps.items(), key=lambda item: -statistics.median(item[1]))
    print("  steps, median       " + ", ".join(f"{key} {statistics.median(times):.2f} s" for key, times in slowest))
    print(f"  judge e5 texts      {made} embedded, {reused} read back from their nodes")
    print(f"  first run           {walls[0]:8.2f} s (imports and caches warm up)")
    print(f"  1,000 tenants       {1000 * total / len(tenants) / 60:8.1f} min projected (target < 30 min)")
    print(f"  load average        {load_before[0]:.1f} -> {load_after[0]:.1f} (1 min), {os.cpu_count()} cores")
    return total


if __name__ == "__main__":
    main()
