"""Shared by the benchmarks: peak-RSS sampling and removal of a benchmark's own tenants."""

from __future__ import annotations

import threading

import psutil

from mem_resources.neo4j_resource import Neo4jResource


class PeakRss:
    """Peak RSS above the value at entry, sampled every 10 ms in a background thread."""

    def __enter__(self) -> PeakRss:
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


def drop_bench_tenant(neo4j: Neo4jResource, tenant: str) -> None:
    """Benchmark tenants are scratch data: removed in batches before and after a run."""
    with neo4j.session() as session:
        session.run("MATCH (n {user_name: $tenant}) CALL (n) { DETACH DELETE n } "
                    "IN TRANSACTIONS OF 10000 ROWS", tenant=tenant).consume()
