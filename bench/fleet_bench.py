"""A night of many small tenants: N tenants x M new memories tended (ingest, dedup, reorganize,
schema check) through the path `memtend tend [--workers W]` takes: `tend_memory` executed
in-process, one run per tenant, one after another in each of W warm processes, on a fresh Dagster
instance (the local one: dagster_home/dagster.yaml, SQLite) and the local Neo4j. ``--cli`` runs the
command itself, `memtend tend --workers W`, as a subprocess (its start, checks and summary
included). Untimed: writing each tenant's night as a JSONL file in the inbox (the seeding); timed:
the tend, whose first step ingests those files through the product's ingest. Progress is printed
every ``--progress`` seconds from the instance's finished runs. Reported: total wall time, per run
the wall time, the compute of its steps (step durations from the instance) and the rest (run
overhead: run/event storage, step orchestration), each model's passes per memory and the model
floor (passes x per-pass cost, summed from the runs' materializations, over W workers), the
projection to 1,000 tenants, and the machine load before and after.

The daemon path (sensor/schedule-launched runs) adds one process start per run on top: see
bench/run_overhead_bench.py for that fixed cost.

Target (issues 14, 44): 1,000 tenants x 100 new memories in < 30 min; judged on a real run of
1,000 tenants, not on the projection from fewer. The summary's figure is the last ``--workers``
value's fleet; its same-run baseline the first's (default: 2 workers against 1).

    python -m bench.fleet_bench [--tenants 20] [--memories 100] [--workers 1 2] [--nights 1] [--cli]
    python -m bench.fleet_bench --tenants 1000 --workers 2 --cli     # the issue's night, for real

With ``--nights 2`` the same tenants get a second day of new memories: the steady state of a
fleet, where dedup compares new memories with ones judged on earlier nights.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from bench.measure import Result, drop_bench_tenant, model_floor, report
from bench.reorg_bench import synthetic_texts
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.model_passes import Passes, from_metadata, total
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


def night_texts(seed: int, memories: int, night: int, english_only: bool = False) -> list[str]:
    """Night ``night`` (1, 2, ...) of tenant number ``seed``: ``memories`` new texts, the last 10%
    of them repeats of the night's first ones."""
    texts = [f"{text} [night {night}]" if night > 1 else text
             for text in synthetic_texts(memories, seed + 10_000 * (night - 1), english_only)]
    texts[-memories // 10:] = texts[:memories // 10]
    return texts


def _write_inbox(inbox: Path, tenants: list[str], memories: int, night: int, english_only: bool = False) -> None:
    for seed, tenant in enumerate(tenants):
        folder = inbox / tenant
        folder.mkdir(parents=True, exist_ok=True)
        texts = night_texts(seed, memories, night, english_only)
        (folder / f"day{night}.jsonl").write_text("\n".join(
            json.dumps({"memory": text, "created_at": f"2026-11-{night:02d}T08:00:00Z"}, ensure_ascii=False)
            for text in texts), encoding="utf-8")


@dataclass
class RunFigures:
    """What a night's runs recorded in the instance: per run wall and step seconds, per step the
    seconds of every run, the judge's e5 vectors, and the models' passes summed over the runs."""

    walls: list[float] = field(default_factory=list)
    computes: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    made: int = 0
    reused: int = 0
    passes: dict[str, Passes] = field(default_factory=dict)

    def add(self, instance: dg.DagsterInstance, record: dg.RunRecord) -> None:
        """One finished run: its wall time from its creation (run storage) to its end."""
        run = record.dagster_run
        if run.status != dg.DagsterRunStatus.SUCCESS:
            self.failed.append(run.tags.get("dagster/partition", run.run_id))
        self.walls.append((record.end_time or 0) - record.create_timestamp.timestamp())
        timed = {step.step_key: step.end_time - step.start_time
                 for step in instance.get_run_step_stats(run.run_id) if step.end_time and step.start_time}
        self.computes.append(sum(timed.values()))
        for key, seconds in timed.items():
            self.steps.setdefault(key, []).append(seconds)
        for event in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            materialization = event.asset_materialization
            if materialization is None:
                continue
            meta = materialization.metadata
            self.passes = total(self.passes, from_metadata(meta))
            if materialization.asset_key == dg.AssetKey("relation_judgments"):
                made, reused = meta.get("text_vectors_made"), meta.get("text_vectors_reused")
                self.made += made.value if made else 0
                self.reused += reused.value if reused else 0


def _finished_runs(instance: dg.DagsterInstance, since: datetime) -> list[dg.RunRecord]:
    return list(instance.get_run_records(dg.RunsFilter(statuses=FINISHED, created_after=since)))


def _progress(instance: dg.DagsterInstance, since: datetime, tenants: int, every_s: float,
              stop: threading.Event) -> None:
    """Print, every ``every_s`` seconds, how many tenants' runs have finished and the pace."""
    started = time.perf_counter()
    while not stop.wait(every_s):
        done = instance.get_runs_count(dg.RunsFilter(statuses=FINISHED, created_after=since))
        elapsed = time.perf_counter() - started
        pace = f", {elapsed / done:.2f} s per tenant, {tenants * elapsed / done / 60:.1f} min for all" if done else ""
        print(f"  progress            {done}/{tenants} tenants in {elapsed / 60:.1f} min{pace}, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--memories", type=int, default=100)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="one fleet per value (the first is the baseline of the ratios)")
    parser.add_argument("--nights", type=int, default=1,
                        help="nights per fleet: from the second on, tenants already hold earlier nights' memories")
    parser.add_argument("--cli", action="store_true", help="run `memtend tend --workers W` as a subprocess")
    parser.add_argument("--english-only", action="store_true",
                        help="tenants of one language (the default night mixes English and Chinese in every tenant)")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between progress lines")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memtend-fleet-"))
    os.environ.update(MEMTEND_INBOX=str(work / "inbox"), MEMTEND_QUARANTINE=str(work / "quarantine"),
                      MEMTEND_IO_BASE=str(work / "tables"), MEMTEND_AUTOMATION="off")
    nights: list[list[float]] = []
    floors: list[Result] = []
    try:
        for number, workers in enumerate(args.workers):
            totals, night_floors = fleet(work, number, args, workers)
            nights.append(totals)
            floors += night_floors
            print(f"  vs {args.workers[0]} worker(s)    {nights[0][0] / nights[-1][0]:8.2f}x throughput")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def for_1000_min(seconds: float) -> float:
        return 1000 * seconds / args.tenants / 60

    real = args.memories == 100 and args.tenants >= 1000
    single = len(args.workers) == 1
    kind = f"1,000 tenants x {args.memories}" + ("" if args.tenants == 1000 else f", projected from {args.tenants}")
    report("fleet_bench", [Result(
        f"{args.workers[-1]} worker(s), night {night + 1}: {kind}", for_1000_min(nights[-1][night]), "min",
        None if single else for_1000_min(nights[0][night]),
        "a single --workers value" if single else f"{args.workers[0]} worker(s) on the same night",
        target="< 30 min for 1,000 tenants x 100 new memories, a real run (issues 14, 44)",
        met=for_1000_min(nights[-1][night]) < 30 if real else None,
        unjudged=f"a projection from {args.tenants} tenants x {args.memories} memories")
        for night in range(args.nights)] + floors)


def fleet(work: Path, number: int, args: argparse.Namespace, workers: int) -> tuple[list[float], list[Result]]:
    """One fleet of fresh tenants on a fresh instance (its own DAGSTER_HOME), tended ``nights``
    times; returns each night's total seconds and its model-floor results."""
    run = uuid.uuid4().hex[:6]
    tenants = [f"fleet_{run}_{i:04d}" for i in range(args.tenants)]
    home = work / f"home{number}"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(load_settings()))
    totals, floors = [], []
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            instance.add_dynamic_partitions("tenants", tenants)
            for night in range(1, args.nights + 1):
                seeding = time.perf_counter()
                shutil.rmtree(work / "inbox", ignore_errors=True)
                _write_inbox(work / "inbox", tenants, args.memories, night, args.english_only)
                print(f"fleet night {night}: {len(tenants)} tenants x {args.memories} new memories written to the "
                      f"inbox in {time.perf_counter() - seeding:.1f} s (untimed)")
                seconds, figures = _night(instance, tenants, args, workers)
                totals.append(seconds)
                floors.append(model_floor("fleet_bench", figures.passes, len(tenants) * args.memories, seconds,
                                          f"{workers} worker(s), night {night}: {len(tenants)} tenants", workers))
    finally:
        for tenant in tenants:
            drop_bench_tenant(neo4j, tenant)
        neo4j.close()
    return totals, floors


def _tend(instance: dg.DagsterInstance, tenants: list[str], workers: int, cli: bool, log: Path) -> None:
    if cli:
        with log.open("w") as out:
            done = subprocess.run([sys.executable, "-m", "mem_assets.cli", "tend", "--workers", str(workers)],
                                  stdout=out, stderr=subprocess.STDOUT, check=False)
        if done.returncode:
            print(log.read_text()[-3000:])
            raise SystemExit(f"memtend tend exited with {done.returncode}")
    else:
        from mem_assets.tending import tend_many

        tend_many(tenants, instance, workers=workers)


def _night(instance: dg.DagsterInstance, tenants: list[str], args: argparse.Namespace,
           workers: int) -> tuple[float, RunFigures]:
    load_before = os.getloadavg()
    how = f"`memtend tend --workers {workers}`" if args.cli else f"tend_memory in-process in {workers} worker(s)"
    print(f"  timed               {how}: ingest, dedup, reorganization, schema check; load {load_before[0]:.1f}",
          flush=True)
    since = datetime.now(UTC)
    stop = threading.Event()
    watcher = threading.Thread(target=_progress, args=(instance, since, len(tenants), args.progress, stop), daemon=True)
    watcher.start()
    started = time.perf_counter()
    try:
        _tend(instance, tenants, workers, args.cli, Path(instance.root_directory) / "tend.log")
    finally:
        seconds = time.perf_counter() - started
        stop.set()
        watcher.join()
    figures = RunFigures()
    for run in _finished_runs(instance, since):
        figures.add(instance, run)
    assert not figures.failed, f"runs failed: {figures.failed[:10]}"
    assert len(figures.walls) == len(tenants), f"{len(figures.walls)} runs for {len(tenants)} tenants"
    overheads = [wall - compute for wall, compute in zip(figures.walls, figures.computes, strict=True)]
    load_after = os.getloadavg()
    print(f"  total               {seconds:8.1f} s")
    print(f"  per run, median     {statistics.median(figures.walls):8.2f} s wall = "
          f"{statistics.median(figures.computes):.2f} s step compute + {statistics.median(overheads):.2f} s overhead")
    slowest = sorted(figures.steps.items(), key=lambda item: -statistics.median(item[1]))
    print("  steps, median       " + ", ".join(f"{key} {statistics.median(times):.2f} s" for key, times in slowest))
    print(f"  judge e5 texts      {figures.made} embedded, {figures.reused} read back from their nodes")
    print(f"  first run           {figures.walls[-1]:8.2f} s (imports and caches warm up)")
    kind = "for real" if len(tenants) == 1000 else "projected"
    print(f"  1,000 tenants       {1000 * seconds / len(tenants) / 60:8.1f} min {kind} (target < 30 min)")
    if len(tenants) < 1000:  # each worker's first run loads the models once; a night of 1,000 amortizes it
        steady = statistics.median(figures.walls) / workers
        print(f"  steady state        {steady:8.2f} s per tenant over {workers} worker(s): "
              f"{1000 * steady / 60:.1f} min for 1,000 (median run, first runs aside)")
    print(f"  load average        {load_before[0]:.1f} -> {load_after[0]:.1f} (1 min), {os.cpu_count()} cores")
    return seconds, figures


if __name__ == "__main__":
    main()
