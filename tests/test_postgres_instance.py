"""The production instance for real: deploy/dagster.yaml on a PostgreSQL this test starts, the
webserver and ``dagster-daemon`` on it, two tenants' ``tend_memory`` runs queued at once
(one of them twice), as a data engineer would click them in the UI.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
from dagster_graphql import DagsterGraphQLClient

from mem_resources.local_servers import postgres as local_postgres
from mem_resources.local_servers.postgres import LocalPostgres
from tests.support.dagster_server import MODEL_FREE_ENV, ROOT, dagster_webserver_and_daemon, free_port
from tests.support.pipeline import node_count

SAMPLE = ROOT / "data" / "sample" / "inbox"
TENANTS = ["alice", "sam"]
TWICE = ["alice"]
LINES_PER_FILE = 30


@pytest.fixture(scope="module")
def postgres() -> Iterator[LocalPostgres]:
    """A fresh cluster under the worktree (or /tmp when the postgres user cannot reach it)."""
    home = ROOT / ".postgres_test"
    if not local_postgres.home_is_reachable(home):
        home = Path(tempfile.mkdtemp(prefix="memtend-pg-"))
    cluster = LocalPostgres(home=home, port=free_port(), fsync=False)
    local_postgres.down(cluster)
    shutil.rmtree(home, ignore_errors=True)
    local_postgres.up(cluster)
    yield cluster
    local_postgres.down(cluster)
    shutil.rmtree(home, ignore_errors=True)


def _tenant_intervals(records: list[dg.RunRecord]) -> dict[str, list[tuple[float, float]]]:
    by_tenant: dict[str, list[tuple[float, float]]] = {}
    for record in records:
        tenant = record.dagster_run.tags["dagster/partition"]
        by_tenant.setdefault(tenant, []).append((record.start_time, record.end_time))
    return {tenant: sorted(spans) for tenant, spans in by_tenant.items()}


def max_concurrent_tenants(intervals: dict[str, list[tuple[float, float]]]) -> int:
    """Most tenants with a run in progress at the same instant (sweep over start/end events)."""
    events = sorted((t, step) for spans in intervals.values() for start, end in spans
                    for t, step in ((start, 1), (end, -1)))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_queued_tenants_on_postgres_run_one_at_a_time_per_tenant_and_all_succeed(
        postgres: LocalPostgres, neo4j, neo4j_uri: str, tmp_path_factory, monkeypatch):
    suffix = f"{time.time_ns() % 10**8}"
    tenants = [f"{name}_{suffix}" for name in TENANTS]
    home = tmp_path_factory.mktemp("dagster_home_pg")
    inbox = home / "inbox"
    for name, tenant in zip(TENANTS, tenants):
        (inbox / tenant).mkdir(parents=True)
        for sample in (SAMPLE / name).glob("*.jsonl"):
            lines = sample.read_bytes().splitlines(keepends=True)[:LINES_PER_FILE]
            (inbox / tenant / sample.name).write_bytes(b"".join(lines))
    for key, value in postgres.dagster_env().items():
        monkeypatch.setenv(key, value)
    env = {**MODEL_FREE_ENV, "NEO4J_URI": neo4j_uri, "MEMTEND_AUTOMATION": "off", "MEMTEND_INBOX": str(inbox),
           "MEMTEND_QUARANTINE": str(home / "quarantine"), **postgres.dagster_env()}

    with (dagster_webserver_and_daemon(home, env, instance_yaml=ROOT / "deploy" / "dagster.yaml") as server,
          dg.DagsterInstance.from_config(str(home)) as instance):
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        instance.add_dynamic_partitions("tenants", tenants)
        client = DagsterGraphQLClient("127.0.0.1", port_number=int(server.url.rsplit(":", 1)[1]))
        queue = [*tenants, *(f"{name}_{suffix}" for name in TWICE)]
        run_ids = [client.submit_job_execution(
            "tend_memory", repository_location_name="memtend", repository_name="__repository__",
            tags={"dagster/partition": tenant}) for tenant in queue]

        deadline = time.monotonic() + 240
        while True:
            records = instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
            if all(record.dagster_run.is_finished for record in records):
                break
            assert time.monotonic() < deadline, f"runs still going; logs in {home}"
            time.sleep(1)

    statuses = {record.dagster_run.run_id: record.dagster_run.status for record in records}
    assert set(statuses.values()) == {dg.DagsterRunStatus.SUCCESS}, statuses
    intervals = _tenant_intervals(records)
    assert {tenant: len(spans) for tenant, spans in intervals.items()} == {
        tenant: 1 + (name in TWICE) for name, tenant in zip(TENANTS, tenants)}
    for tenant, spans in intervals.items():
        for (_, first_end), (second_start, _) in itertools.pairwise(spans):
            assert second_start >= first_end, f"two runs of {tenant} overlapped"
    peak = max_concurrent_tenants(intervals)
    starts, ends = zip(*(span for spans in intervals.values() for span in spans), strict=True)
    print(f"\nconcurrent tenants: peak {peak} of {len(tenants)} ({len(run_ids)} runs, "
          f"{max(ends) - min(starts):.0f} s wall)")
    assert peak >= 2, "runs of different tenants never overlapped: the limit is not per tenant"

    with (psycopg2.connect(host="127.0.0.1", port=postgres.port, user=local_postgres.SUPERUSER,
                           password=postgres.password, dbname=postgres.db_name) as conn,
          conn.cursor() as cur):
        cur.execute("SELECT run_id FROM runs WHERE run_id = ANY(%s)", (run_ids,))
        assert {row[0] for row in cur.fetchall()} == set(run_ids)
    for tenant in tenants:
        assert node_count(neo4j, tenant) > 0
