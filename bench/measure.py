"""Shared by the benchmarks: peak-RSS sampling, removal of a benchmark's own tenants, same-run
baselines with the machine load, so a figure from a busy machine can be judged, the models' passes
and floor (``model_floor``), and the summary every benchmark ends with (``report``): its target,
its figure and its same-run baseline."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Self

import numpy as np
import psutil

from mem_resources.constraints import TENANT_SCOPED_LABELS
from mem_resources.model_passes import Passes
from mem_resources.neo4j_resource import Neo4jResource


class PeakRss:
    """Peak RSS above the value at entry, sampled every 10 ms in a background thread."""

    def __enter__(self) -> Self:
        self._process = psutil.Process()
        self.start = self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.start) / 2**20


def bench_tenant(prefix: str) -> str:
    """A tenant name no other run shares: benchmarks of several sessions meet on one database."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def drop_bench_tenant(neo4j: Neo4jResource, tenant: str) -> None:
    """Benchmark tenants are scratch data: removed in batches before and after a run, label by
    label (a match without a label scans every node of the database, minutes after a fleet)."""
    with neo4j.session() as session:
        for label in TENANT_SCOPED_LABELS:
            session.run(f"MATCH (n:{label} {{user_name: $tenant}}) CALL (n) {{ DETACH DELETE n }} "
                        "IN TRANSACTIONS OF 10000 ROWS", tenant=tenant).consume()


@dataclass
class Measured:
    """Wall seconds of one phase, the 1-minute load average before and after it, and the
    seconds of a same-run baseline doing the bare version of the same work: on a busy machine
    the ratio holds where the seconds do not."""

    seconds: float = 0.0
    load_before: float = 0.0
    load_after: float = 0.0
    baseline_s: float | None = None

    @property
    def vs_baseline(self) -> float | None:
        """Baseline seconds over phase seconds: 1.0 is as fast as the bare work, 0.5 twice as slow."""
        return self.baseline_s / self.seconds if self.baseline_s and self.seconds else None

    def line(self, label: str) -> str:
        ratio = f"{self.vs_baseline:.2f}x baseline ({self.baseline_s:.2f} s)" \
            if self.vs_baseline is not None else "no baseline"
        return (f"{label}: {self.seconds:.2f} s, {ratio}, "
                f"load {self.load_before:.1f} -> {self.load_after:.1f}")


@contextmanager
def measured() -> Iterator[Measured]:
    """Time the block and note the machine's load around it; set ``baseline_s`` after."""
    figure = Measured(load_before=os.getloadavg()[0])
    start = time.perf_counter()
    try:
        yield figure
    finally:
        figure.seconds = time.perf_counter() - start
        figure.load_after = os.getloadavg()[0]


def matmul_seconds(rows: int, columns: int, dimension: int, block: int = 256) -> float:
    """A bare float32 product of (rows x dimension) by (dimension x columns), in row blocks as
    the candidate search does it: the floor for an exact nearest-neighbour search of that shape."""
    rng = np.random.default_rng(0)
    left = rng.standard_normal((min(rows, block), dimension), dtype=np.float32)
    right = rng.standard_normal((columns, dimension), dtype=np.float32)
    start = time.perf_counter()
    for lo in range(0, rows, block):
        scores = left[:min(block, rows - lo)] @ right.T
        del scores
    return time.perf_counter() - start


def raw_create_seconds(neo4j: Neo4jResource, rows: list[dict], batch_size: int = 2000,
                       statement: str = "UNWIND $rows AS row CREATE (m:Node:MemoryItem) SET m = row",
                       **parameters: object) -> float:
    """Only the writes of ``rows`` through a bare ``UNWIND … CREATE`` (one transaction per batch)
    under the live schema: the database's floor for writing those rows."""
    elapsed = 0.0
    with neo4j.session() as session:
        for lo in range(0, len(rows), batch_size):
            batch = rows[lo:lo + batch_size]
            start = time.perf_counter()
            session.execute_write(lambda tx, b=batch: tx.run(statement, rows=b, **parameters).consume())
            elapsed += time.perf_counter() - start
    return elapsed


@dataclass(frozen=True)
class Result:
    """One line of a benchmark's summary. ``target`` is the project's stated target (README's
    Benchmarks table, docs/performance.md), ``None`` where it states none; ``met`` is ``None``
    where there is no target or the run is below the target's scale (``unjudged`` says why)."""

    what: str
    figure: float
    unit: str
    baseline: float | None
    baseline_is: str
    target: str | None = None
    met: bool | None = None
    unjudged: str = ""
    higher_is_better: bool = False

    @property
    def ratio(self) -> float | None:
        """The figure against the baseline, above 1 when better: figure / baseline for rates,
        baseline / figure for costs (seconds, calls), so 0.5 is twice as slow as the bare work."""
        if not self.baseline or not self.figure:
            return None
        return self.figure / self.baseline if self.higher_is_better else self.baseline / self.figure


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def report(bench: str, results: Iterable[Result]) -> None:
    """Print the summary block a benchmark ends with: one line per result, in one format."""
    print(f"\n## summary: {bench} (1-min load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)")
    for r in results:
        baseline = (f"{_number(r.baseline)} {r.unit} ({r.baseline_is})" if r.baseline is not None
                    else f"none ({r.baseline_is})")
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x" if r.ratio >= 0.1 else f"{r.ratio:.2g}x"
        if r.target is None:
            met = "- (no stated target)"
        elif r.met is None:
            met = f"not judged ({r.unjudged})"
        else:
            met = "yes" if r.met else "no"
        print(f"{r.what}:  target: {r.target or 'none stated'}  figure: {_number(r.figure)} {r.unit}  "
              f"baseline (same run): {baseline}  ratio: {ratio}  met: {met}", flush=True)


def model_floor(bench: str, passes: Mapping[str, Passes], memories: int, total_s: float,
                what: str, workers: int = 1) -> Result:
    """Print the models' passes per memory, their per-pass cost measured in this run (seconds
    inside the model over its passes, from ``mem_resources.model_passes``) and the model floor —
    passes × per-pass cost, over ``workers`` processes running side by side — against the
    total; the Result puts the floor as the baseline of ``total_s`` (ratio: floor / total)."""
    floor = sum(count.seconds for count in passes.values()) / max(workers, 1)
    print(f"\n## model passes: {bench} ({memories:,} memories{f', {workers} workers' if workers > 1 else ''})")
    if not passes:
        print("  no model ran")
    for model, count in sorted(passes.items(), key=lambda item: -item[1].seconds):
        per_pass = 1000 * count.seconds / count.items if count.items else 0.0
        print(f"  {model:40s} {count.items:>9,} passes  {count.items / max(memories, 1):7.3f} per memory  "
              f"{per_pass:8.3f} ms per pass  {count.seconds:8.2f} s")
    ratio = f"{total_s / floor:.2f}" if floor else "-"
    print(f"  model floor {floor:.2f} s (passes x per-pass cost{f' / {workers} workers' if workers > 1 else ''}); "
          f"total {total_s:.2f} s; total/floor {ratio}", flush=True)
    return Result(f"{what} against its model floor", total_s, "s", floor or None,
                  "model floor: passes x per-pass cost measured in this run")
