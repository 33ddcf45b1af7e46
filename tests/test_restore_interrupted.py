"""A restore killed midway (kill -9: no rollback runs) leaves the tenant marked incomplete: runs
refuse it and name the restore that finishes it; that restore, run again, leaves the tenant as
it was backed up (the sequence of issue 45: kill, tend, restore again)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.operations import drop_tenant, restore_tenant
from mem_resources.tenant_lock import TenantIncomplete, refuse_if_incomplete
from tests.support.lifecycle import counts, graph_digest, seed_tenant
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file

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


def test_a_killed_restore_marks_the_tenant_and_the_rerun_finishes_it(neo4j, instance, tenant, tmp_path):
    seed_tenant(neo4j, tenant, memory_count=150)
    digest, total = graph_digest(neo4j, tenant), counts(neo4j, tenant)
    dropped = drop_tenant(neo4j, tmp_path / "backups", tenant, keep_last=3)
    backup_id = dropped.backup.manifest.backup_id
    env = {**os.environ, "NEO4J_URI": neo4j.uri, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", RESTORE, str(tmp_path / "backups"), tenant, backup_id],
                               env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while counts(neo4j, tenant)[0] < 20:
        assert process.poll() is None and time.monotonic() < deadline, "restore ended before it was killed"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    partial = counts(neo4j, tenant)
    assert 0 < partial[0] < total[0]

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
