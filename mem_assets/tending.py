"""Tending many tenants from one command: `tend_memory` runs executed in this process, or spread
over worker processes.

A run per tenant in the calling process avoids the few seconds a launched run spends starting
Python and loading the definitions; with ``workers > 1`` each worker process pays that once and
then runs its share of the tenants, so a night of many small tenants uses every core (the tenant
runs are independent: each holds its own tenant's lease in Neo4j). Each worker's native thread
pools (BLAS, OpenMP: KMeans, multilingual-e5) get the machine's cores divided by the workers, so
W workers on C cores run C threads rather than W × C fighting for them.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import dagster as dg

from mem_resources.run_liveness import process_tags

#: Only warnings reach the console of a run executed by the CLI.
QUIET_LOGGING = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass(frozen=True)
class TendOutcome:
    tenant: str
    run_id: str
    success: bool
    seconds: float


def tend_one(tenant: str, instance: dg.DagsterInstance, verbose: bool = False) -> TendOutcome:
    """One `tend_memory` run of ``tenant`` in this process, recorded in ``instance``."""
    from mem_assets.definitions import defs, tend_memory_job

    job = defs.resolve_job_def(tend_memory_job.name)
    start = time.monotonic()
    result = job.execute_in_process(partition_key=tenant, instance=instance, raise_on_error=False,
                                    tags=process_tags(), run_config=None if verbose else QUIET_LOGGING)
    return TendOutcome(tenant, result.run_id, result.success, time.monotonic() - start)


_worker_instance: dg.DagsterInstance | None = None


def _share_cores(threads: int) -> None:
    """Worker initializer: OpenMP libraries loaded later read the variable, those already loaded
    are told through threadpoolctl, onnxruntime sessions made later through ``bge.share_cores``."""
    from threadpoolctl import threadpool_limits

    from mem_resources import bge

    os.environ["OMP_NUM_THREADS"] = str(threads)
    threadpool_limits(limits=threads)
    bge.share_cores(threads)


def _tend_in_worker(tenant: str, verbose: bool) -> TendOutcome:
    """In a worker process: the instance of $DAGSTER_HOME, opened once per worker."""
    global _worker_instance
    if _worker_instance is None:
        _worker_instance = dg.DagsterInstance.get()
    return tend_one(tenant, _worker_instance, verbose)


def tend_many(tenants: Sequence[str], instance: dg.DagsterInstance, workers: int = 1,
              on_done: Callable[[TendOutcome], Any] = lambda outcome: None,
              verbose: bool = False) -> list[TendOutcome]:
    """Tend each tenant once, in ``workers`` processes (1: this one, with ``instance``; more:
    spawned workers on the instance of $DAGSTER_HOME). Outcomes in the order of ``tenants``;
    ``on_done`` hears each as it finishes."""
    if workers <= 1:
        outcomes = []
        for tenant in tenants:
            outcomes.append(tend_one(tenant, instance, verbose))
            on_done(outcomes[-1])
        return outcomes
    finished: dict[str, TendOutcome] = {}
    context = multiprocessing.get_context("spawn")
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_share_cores,
                             initargs=(threads,)) as pool:
        pending: set[Future[TendOutcome]] = {pool.submit(_tend_in_worker, t, verbose) for t in tenants}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                outcome = future.result()
                finished[outcome.tenant] = outcome
                on_done(outcome)
    return [finished[tenant] for tenant in tenants]
