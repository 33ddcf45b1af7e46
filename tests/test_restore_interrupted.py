"""A restore killed midway (kill -9: no rollback runs) leaves the tenant marked incomplete: runs
refuse it and name the restore that finishes it; that restore, run again, leaves the tenant as
it was backed up (the sequence of issue 45: kill, tend, restore again). The second test plays the
whole sequence with `memtend tend` itself on a tenant the pipeline made (merges, supersedes,
topics): the tend after the kill fails, the rerun restore gives the tenant back, and the tend
after it passes every asset check with one lineage edge per archived memory, no text active
twice and one topic tree."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from mem_assets.dedup import queries as dedup_queries
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.operations import drop_tenant, restore_tenant
from mem_resources.tenant_lock import TenantIncomplete, refuse_if_incomplete
from tests.support.lifecycle import counts, graph_digest, seed_tenant
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file
from tests.test_resolution import _item

ROOT = Path(__file__).resolve().parents[1]
RESTORE = """
import sys
from pathlib import Path
from mem_assets.lifecycle.operations import restore_tenant
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings
neo4j = Neo4jResource.from_settings(load_settings())
restore_tenant(neo4j, Path(sys.argv[1]), sys.argv[2], sys.argv[3], batch_size=1)
"""


def _kill_restore_midway(neo4j, tenant: str, backups: Path, backup_id: str, total: int) -> tuple[int, int]:
    """Start the restore in a process and kill -9 it once part of the tenant is back."""
    env = {**os.environ, "NEO4J_URI": neo4j.uri, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", RESTORE, str(backups), tenant, backup_id], env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while counts(neo4j, tenant)[0] < 20:
        assert process.poll() is None and time.monotonic() < deadline, "restore ended before it was killed"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    partial = counts(neo4j, tenant)
    assert 0 < partial[0] < total
    return partial


def test_a_killed_restore_marks_the_tenant_and_the_rerun_finishes_it(neo4j, instance, tenant, tmp_path):
    seed_tenant(neo4j, tenant, memory_count=150)
    digest, total = graph_digest(neo4j, tenant), counts(neo4j, tenant)
    dropped = drop_tenant(neo4j, tmp_path / "backups", tenant, keep_last=3)
    backup_id = dropped.backup.manifest.backup_id
    partial = _kill_restore_midway(neo4j, tenant, tmp_path / "backups", backup_id, total[0])

    finish = f"memtend restore {tenant} --backup-id {backup_id}"
    with pytest.raises(TenantIncomplete, match=finish):
        refuse_if_incomplete(neo4j, tenant)
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "late.jsonl", [{"memory": "The user has a cat named Mochi. (0)"}])
    with pytest.raises(dg.DagsterResourceFunctionError) as refused:
        materialize_partition([memory_items], tenant, instance, base_resources(neo4j, inbox, tmp_path / "q"))
    assert finish in str(refused.value.__cause__)
    assert counts(neo4j, tenant) == partial

    restore_tenant(neo4j, tmp_path / "backups", tenant, backup_id)
    assert graph_digest(neo4j, tenant) == digest
    refuse_if_incomplete(neo4j, tenant)


COOKING = [f"I cooked {dish} with garlic in the kitchen for dinner" for dish in (
    "pasta", "curry", "soup", "risotto", "noodles", "stew", "paella", "dumplings", "tacos", "lasagna", "chili", "ramen")]
TRAVEL = [f"Booked the flight and the hotel for my trip to {city}" for city in (
    "Kyoto", "Vienna", "Cairo", "Bali", "Lima", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Riga", "Sofia")]
DAY_ONE = [*COOKING, *TRAVEL, "Rosa lives in Lisbon.", "Rosa is allergic to cats.", "The user's dog is named Rex."]
DAY_TWO = ["Rosa lives in Porto.", "Rosa is allergic to cats!", "The user's dog is called Rex.",
           *(text + "." for text in COOKING[:4])]


def _tend(tenant: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mem_assets.cli", "tend", tenant], check=False, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=900)


def _consistency(neo4j, tenant: str) -> dict[str, object]:
    """What issue 45's half-restored tenant broke: lineage edges per archived memory, texts
    active twice (per memory type), topic trees (roots: topics no topic is parent of)."""
    with neo4j.session() as session:
        twice_archived = session.execute_read(dedup_queries.duplicate_lineage_edges, tenant)
        twice_active = session.execute_read(dedup_queries.duplicate_payload_hashes, tenant)
        roots = session.run(
            "MATCH (t:MemoryItem {user_name: $t, type: 'topic', status: 'activated'}) "
            "WHERE NOT EXISTS { MATCH (:MemoryItem {user_name: $t, type: 'topic'})-[:PARENT]->(t) } "
            "RETURN count(t) AS roots", t=tenant).single()["roots"]
        lineage = session.run("MATCH (:MemoryItem {user_name: $t})-[r:MERGED_TO|SUPERSEDED_BY]->() "
                              "RETURN type(r) AS type, count(r) AS n", t=tenant).data()
    return {"twice_archived": twice_archived, "twice_active": twice_active, "roots": roots,
            "lineage": {row["type"]: row["n"] for row in lineage}}


def test_kill_tend_restore_again_with_memtend_tend_ends_consistent(neo4j, neo4j_uri, tenant, tmp_path, monkeypatch):
    home, inbox, backups = tmp_path / "home", tmp_path / "inbox", tmp_path / "backups"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    write_inbox_file(inbox, tenant, "day1.jsonl", [_item(text) for text in DAY_ONE])
    write_inbox_file(inbox, tenant, "day2.jsonl", [_item(text, "2026-03-02T10:00:00Z") for text in DAY_TWO])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home), "NEO4J_URI": neo4j_uri,
           "MEMTEND_INBOX": str(inbox), "MEMTEND_QUARANTINE": str(tmp_path / "quarantine"),
           "MEMTEND_EMBEDDER": "hashing", "MEMTEND_EMBEDDING_DIM": str(neo4j.embedding_dimension),
           "MEMTEND_OFFLINE_JUDGE": "fast", "MEMTEND_TOPIC_COMBINED_LANGUAGES": "none", "MEMTEND_LLM": "offline"}
    first = _tend(tenant, env, tmp_path)
    assert first.returncode == 0 and f"{tenant}: ok" in first.stdout, first.stdout + first.stderr
    made = _consistency(neo4j, tenant)
    assert made["lineage"].get("MERGED_TO", 0) > 0 and made["lineage"].get("SUPERSEDED_BY", 0) > 0
    assert made["roots"] >= 1 and not made["twice_archived"] and not made["twice_active"]
    digest, total = graph_digest(neo4j, tenant), counts(neo4j, tenant)

    backup_id = drop_tenant(neo4j, backups, tenant, keep_last=3).backup.manifest.backup_id
    _kill_restore_midway(neo4j, tenant, backups, backup_id, total[0])
    partial = graph_digest(neo4j, tenant)
    write_inbox_file(inbox, tenant, "day3.jsonl", [_item("The user's dog Rex is a beagle.", "2026-03-03T10:00:00Z"),
                                                   _item(COOKING[5] + "!", "2026-03-03T10:00:00Z")])
    refused = _tend(tenant, env, tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{tenant}: refused: tenant {tenant!r} is incomplete" in refused.stderr
    assert f"run `memtend restore {tenant} --backup-id {backup_id}` to finish it" in refused.stderr
    assert "Traceback" not in refused.stderr and f"failed: {tenant}" in refused.stderr
    assert graph_digest(neo4j, tenant) == partial  # nothing ingested or merged on the fragment

    restore_tenant(neo4j, backups, tenant, backup_id)
    assert graph_digest(neo4j, tenant) == digest
    last = _tend(tenant, env, tmp_path)
    assert last.returncode == 0 and f"{tenant}: ok" in last.stdout, last.stdout + last.stderr
    assert "failed checks" not in last.stderr
    [run_id] = re.findall(rf"{tenant}: ok in [\d.]+ s \(run ([0-9a-f-]+)\)", last.stdout)
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the instance's storage lives in $DAGSTER_HOME
    with dg.DagsterInstance.from_config(str(home)) as instance:
        checks = [record.event_log_entry.dagster_event.event_specific_data for record in instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records]
    assert len(checks) == 14 and all(check.passed for check in checks), [  # every check of tend_memory
        (c.check_name, c.passed) for c in checks]
    after = _consistency(neo4j, tenant)
    assert not after["twice_archived"] and not after["twice_active"] and after["roots"] == made["roots"]
