"""Writers of one tenant at once, on the real Neo4j: the tenant lease, resolutions that re-check
under a lock, the lineage check, and two `memtend tend` of one tenant ending with the baseline."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from mem_assets.dedup import apply_resolutions as resolution
from mem_assets.dedup.merging import MergePlan
from mem_assets.dedup.superseding import SupersedePlan
from mem_resources.memory_model import UpdateType, memory_id, payload_hash
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.tenant_lock import TenantBusy, TenantLease
from tests.support.dagster_server import MODEL_FREE_ENV, ROOT
from tests.support.planted_corpus import write_planted_inbox
from tests.test_dedup import run_dedup, write_items

BIN = Path(sys.executable).parent
NOW = datetime(2026, 11, 2, tzinfo=UTC)


def _lineage(neo4j: Neo4jResource, tenant: str) -> list[tuple[str, str, str]]:
    with neo4j.session() as session:
        return sorted((r["a"], r["t"], r["b"]) for r in session.run(
            "MATCH (a:MemoryItem {user_name: $t})-[r:MERGED_TO|SUPERSEDED_BY]->(b) "
            "RETURN a.id AS a, type(r) AS t, b.id AS b", t=tenant))


# --- the lease --------------------------------------------------------------------------------

def test_a_second_writer_waits_for_the_lease_and_the_same_holder_reenters(neo4j: Neo4jResource, tenant: str):
    order: list[str] = []
    first = TenantLease(neo4j, tenant, "run-a", info="run a").acquire()
    inner = TenantLease(neo4j, tenant, "run-a", wait_s=0).acquire()  # a step of the same run
    with pytest.raises(TenantBusy, match="run a"):
        TenantLease(neo4j, tenant, "run-b", wait_s=0.5).acquire()

    def second() -> None:
        with TenantLease(neo4j, tenant, "run-b", wait_s=30):
            order.append("b")

    waiter = threading.Thread(target=second)
    waiter.start()
    time.sleep(1.0)
    inner.release()
    time.sleep(1.0)
    assert order == []  # the outer claim still holds it
    order.append("a")
    first.release()
    waiter.join(timeout=30)
    assert order == ["a", "b"]


def test_a_killed_holder_frees_the_lease_at_once(neo4j: Neo4jResource, neo4j_uri: str, tenant: str):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         ("import sys, time\n"
         "from mem_resources.neo4j_resource import Neo4jResource\n"
         "from mem_resources.tenant_lock import TenantLease\n"
         f"TenantLease(Neo4jResource(uri={neo4j_uri!r}), {tenant!r}, 'doomed', ttl_s=3600).acquire()\n"
         "print('held', flush=True)\n"
          "time.sleep(600)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TenantBusy):
            TenantLease(neo4j, tenant, "next", wait_s=0.5).acquire()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    started = time.monotonic()
    with TenantLease(neo4j, tenant, "next", wait_s=10):
        pass
    assert time.monotonic() - started < 5  # not the hour-long ttl


def test_backup_waits_for_a_run_holding_the_lease(neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    from mem_assets.lifecycle.operations import backup_tenant
    from tests.support.lifecycle import seed_tenant

    seed_tenant(neo4j, tenant, memory_count=2)
    done: list[float] = []
    with TenantLease(neo4j, tenant, "a-run"):
        worker = threading.Thread(target=lambda: done.append(
            backup_tenant(neo4j, tmp_path, tenant, keep_last=1).seconds))
        worker.start()
        time.sleep(1.5)
        assert done == []
    worker.join(timeout=60)
    assert len(done) == 1


# --- resolutions ------------------------------------------------------------------------------

def test_a_resolution_rechecks_status_under_a_lock(neo4j: Neo4jResource, tenant: str):
    older, newer = write_items(neo4j, tenant, ["The user lives in Berlin.", "The user lives in Paris."])
    plan = SupersedePlan(older=older, newer=newer, reason="moved")
    results: list[dict] = []

    with neo4j.session() as first_session:
        first = first_session.begin_transaction()
        assert resolution.apply_resolutions(first, tenant, [plan], {}, NOW)[0]["status"] == "applied"

        def concurrent() -> None:
            with neo4j.session() as session:
                results.extend(session.execute_write(resolution.apply_resolutions, tenant, [plan], {}, NOW))

        other = threading.Thread(target=concurrent)
        other.start()
        time.sleep(1.0)  # the other resolution has started and reads while the first is open
        first.commit()
        other.join(timeout=30)

    assert results == [{"status": "skipped: a node is no longer activated"}]
    assert _lineage(neo4j, tenant) == [(older, "SUPERSEDED_BY", newer)]


def test_a_merge_written_again_by_a_retry_adds_no_node_and_no_lineage_edge(neo4j: Neo4jResource, tenant: str):
    """A retried dedup write applies the same plan: the merged node is found and nothing is redone."""
    sources = write_items(neo4j, tenant, ["The user drinks tea.", "The user drinks tea daily."])
    merged = memory_id(payload_hash(tenant, "LongTermMemory", "The user drinks tea every day."))
    plan = MergePlan(merged_id=merged, sources=tuple(sources), text="The user drinks tea every day.",
                     update_type=UpdateType.DUPLICATE, reason="same habit")
    vectors = {merged: [0.0] * neo4j.embedding_dimension}
    with neo4j.session() as session:
        first = session.execute_write(resolution.apply_resolutions, tenant, [plan], vectors, NOW)
        again = session.execute_write(resolution.apply_resolutions, tenant, [plan], vectors, NOW)
        nodes = session.run("MATCH (m:MemoryItem {user_name: $t, id: $m}) RETURN count(m) AS n",
                            t=tenant, m=merged).single()["n"]
    assert first[0]["status"] == "applied" and again == [{"status": "already merged"}]
    assert nodes == 1
    assert _lineage(neo4j, tenant) == sorted((s, "MERGED_TO", merged) for s in sources)


def test_lineage_check_fails_on_a_node_resolved_twice(neo4j: Neo4jResource, instance: dg.DagsterInstance,
                                                     tenant: str):
    older, newer = write_items(neo4j, tenant, ["The user is 30.", "The user is 31."])
    with neo4j.session() as session:
        session.run("MATCH (o:MemoryItem {user_name: $t, id: $o}), (n:MemoryItem {user_name: $t, id: $n}) "
                    "SET o.status = 'archived' CREATE (o)-[:SUPERSEDED_BY]->(n), (o)-[:SUPERSEDED_BY]->(n)",
                    t=tenant, o=older, n=newer).consume()
    result = run_dedup(neo4j, tenant, instance, with_checks=True)
    outcome = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcome == {"no_duplicate_payloads": True, "archived_have_successor": True,
                       "lineage_edges_unique": False, "no_cross_tenant_edges": True,
                       "archived_left_their_topics": True, "judge_failures": True}


# --- two `memtend tend` of one tenant at once ---------------------------------------------------

def _graph(neo4j: Neo4jResource, tenant: str) -> tuple[list, list, list]:
    """The tenant's graph without timestamps: node ids, labels, status and text; every edge; and
    the resolutions recorded for undo, by what they did (kind, result, sources: a record's id
    names the run that applied it). The judgment cache is left out: a run killed after judging
    leaves entries a clean run never needed (pairs with nodes it had merged), which change
    nothing else."""
    with neo4j.session() as session:
        nodes = sorted(tuple(map(repr, r.values())) for r in session.run(
            "MATCH (n {user_name: $t}) WHERE NOT n:DedupJudgment AND NOT n:DedupResolution "
            "RETURN n.id, labels(n), n.status, coalesce(n.memory, n.name), n.evolve_to", t=tenant))
        edges = sorted(tuple(r.values()) for r in session.run(
            "MATCH (a {user_name: $t})-[r]->(b) RETURN a.id, type(r), b.id", t=tenant))
        records = sorted(tuple(map(repr, r.values())) for r in session.run(
            "MATCH (r:DedupResolution {user_name: $t}) RETURN r.kind, r.result, r.sources", t=tenant))
    return nodes, edges, records


def _difference(graph: tuple[list, list, list], baseline: tuple[list, list, list]) -> tuple[list, ...]:
    """Nodes, edges and resolution records only in ``graph``, and only in ``baseline`` (records
    as a multiset: each resolution is recorded once, by whichever run applied it)."""
    return (sorted(set(graph[0]) - set(baseline[0]))[:10], sorted(set(baseline[0]) - set(graph[0]))[:10],
            sorted(set(graph[1]) - set(baseline[1]))[:10], sorted(set(baseline[1]) - set(graph[1]))[:10],
            sorted((Counter(graph[2]) - Counter(baseline[2])).elements())[:10],
            sorted((Counter(baseline[2]) - Counter(graph[2])).elements())[:10])


def _wipe(neo4j: Neo4jResource, tenant: str) -> None:
    with neo4j.session() as session:
        session.run("MATCH (n {user_name: $t}) DETACH DELETE n", t=tenant).consume()


def _tend(env: dict[str, str], tenant: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "memtend"), "tend", tenant], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _memory_count(neo4j: Neo4jResource, tenant: str) -> int:
    with neo4j.session() as session:
        return session.run("MATCH (m:MemoryItem {user_name: $t}) RETURN count(m) AS n", t=tenant).single()["n"]


def test_a_killed_tend_then_two_tends_at_once_end_with_the_baseline_graph(
        neo4j: Neo4jResource, neo4j_uri: str, tenant: str, tmp_path: Path):
    write_planted_inbox(tmp_path / "inbox" / tenant, 600)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, **MODEL_FREE_ENV, "DAGSTER_HOME": str(home), "NEO4J_URI": neo4j_uri,
           "MEMTEND_AUTOMATION": "off", "MEMTEND_INBOX": str(tmp_path / "inbox"),
           "MEMTEND_QUARANTINE": str(tmp_path / "q")}

    alone = _tend(env, tenant)
    assert alone.wait(timeout=600) == 0, alone.stdout.read()[-3000:]
    baseline = _graph(neo4j, tenant)
    assert any(edge[1] == "MERGED_TO" for edge in baseline[1])
    assert any(edge[1] == "SUPERSEDED_BY" for edge in baseline[1])
    _wipe(neo4j, tenant)

    killed = _tend(env, tenant)
    deadline = time.monotonic() + 300
    while _memory_count(neo4j, tenant) < 600 and time.monotonic() < deadline:  # ingest under way
        time.sleep(0.2)
    time.sleep(2.0)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert _graph(neo4j, tenant) != baseline

    both = [_tend(env, tenant), _tend(env, tenant)]
    outputs = [process.communicate(timeout=900)[0] for process in both]

    assert [process.returncode for process in both] == [0, 0], [o[-3000:] for o in outputs]
    assert _difference(_graph(neo4j, tenant), baseline) == ([], [], [], [], [], [])
    lineage = _lineage(neo4j, tenant)
    assert len({(a, b) for a, _, b in lineage}) == len(lineage) == len({a for a, _, _ in lineage})
    assert "its process died; marked failed" in "".join(outputs)
