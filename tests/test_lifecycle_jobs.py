"""The lifecycle as an operator runs it: Dagster jobs with typed config, the schedule, the CLI."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from mem_assets.dedup.assets import dedup_candidates
from mem_assets.definitions import defs
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle import backup_files
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.lifecycle.cli import app
from mem_assets.lifecycle.jobs import (
    backup_tenant_job,
    drop_tenant_job,
    nightly_backups,
    restore_tenant_job,
    soft_delete_job,
    undelete_job,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.table_io import TableIOManager
from tests.support.lifecycle import counts, graph_digest, seed_tenant
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    write_inbox_file,
)


def _ops(op: str, **config: object) -> dict:
    return {"ops": {op: {"config": config}}}


def test_jobs_drop_and_restore_a_tenant_and_its_partition(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path, instance: dg.DagsterInstance):
    seed_tenant(neo4j, tenant, memory_count=4)
    instance.add_dynamic_partitions("tenants", [tenant])
    resources = {"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path)),
                 "tables": TableIOManager(base_path=str(tmp_path / "tables"))}
    before = graph_digest(neo4j, tenant)

    refused = drop_tenant_job.execute_in_process(
        run_config=_ops("drop_tenant_op", tenant=tenant, confirm="oops"), instance=instance,
        resources=resources, raise_on_error=False)
    assert not refused.success
    assert graph_digest(neo4j, tenant) == before

    dropped = drop_tenant_job.execute_in_process(
        run_config=_ops("drop_tenant_op", tenant=tenant, confirm=tenant, keep_last=5),
        instance=instance, resources=resources)
    assert dropped.success
    assert counts(neo4j, tenant) == (0, 0)
    assert not instance.has_dynamic_partition("tenants", tenant)
    [event] = [e for e in dropped.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    assert event.event_specific_data.metadata["nodes_deleted"].value == 4 * 2 + 4

    restored = restore_tenant_job.execute_in_process(
        run_config=_ops("restore_tenant_op", tenant=tenant), instance=instance, resources=resources)
    assert restored.success
    assert graph_digest(neo4j, tenant) == before
    assert instance.has_dynamic_partition("tenants", tenant)
    assert restored.output_for_node("restore_tenant_op")["counts"]["nodes"] == 12


def test_backup_job_rotates_and_schedule_backs_up_every_tenant(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path, instance: dg.DagsterInstance):
    seed_tenant(neo4j, tenant, memory_count=2)
    resources = {"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path))}
    for _ in range(3):
        assert backup_tenant_job.execute_in_process(
            run_config=_ops("backup_tenant_op", tenant=tenant, keep_last=2),
            instance=instance, resources=resources).success
    assert len(backup_files.list_backups(tmp_path, tenant)) == 2

    instance.add_dynamic_partitions("tenants", [tenant, tenant + "_b"])
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=datetime(2026, 12, 1, 2, 30, tzinfo=UTC))
    requests = nightly_backups(context)
    assert {r.run_config["ops"]["backup_tenant_op"]["config"]["tenant"] for r in requests} == {
        tenant, tenant + "_b"}
    assert requests[0].run_key.startswith("backup:2026-12-01:")


def test_soft_delete_and_undelete_jobs_with_filter_config(
        neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance):
    seed_tenant(neo4j, tenant, memory_count=3)
    before = graph_digest(neo4j, tenant)
    resources = {"neo4j": neo4j}
    selection = {"tenant": tenant, "key": "k1", "created_after": "2026-11-01T00:00:00+00:00"}

    deleted = soft_delete_job.execute_in_process(
        run_config=_ops("soft_delete_op", **selection, evolve_to=["mem:x"]), instance=instance,
        resources=resources)
    assert len(deleted.output_for_node("soft_delete_op")) == 2  # the memory and its working twin
    assert graph_digest(neo4j, tenant) != before

    undone = undelete_job.execute_in_process(
        run_config=_ops("undelete_op", **selection), instance=instance, resources=resources)
    assert undone.output_for_node("undelete_op") == deleted.output_for_node("soft_delete_op")
    assert graph_digest(neo4j, tenant) == before


def test_definitions_load_with_the_lifecycle_jobs():
    dg.Definitions.validate_loadable(defs)
    for name in ("backup_tenant_job", "restore_tenant_job", "drop_tenant_job", "soft_delete_job",
                 "undelete_job"):
        assert defs.resolve_job_def(name).name == name


def test_cli_backup_list_drop_restore_and_soft_delete(
        neo4j: Neo4jResource, neo4j_uri: str, tenant: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("MEMTEND_BACKUP_DIR", str(tmp_path / "backups"))
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("tenants", [tenant])
    seed_tenant(neo4j, tenant, memory_count=2)
    before = graph_digest(neo4j, tenant)
    runner = CliRunner()

    backup = runner.invoke(app, ["backup", tenant, "--keep-last", "3"])
    assert backup.exit_code == 0, backup.output
    assert "8 nodes" in backup.output
    listing = runner.invoke(app, ["list-backups", tenant])
    assert listing.exit_code == 0 and len(listing.output.strip().splitlines()) == 1

    dropped = runner.invoke(app, ["drop", tenant, "--yes"])
    assert dropped.exit_code == 0, dropped.output
    assert "dropped 8 nodes" in dropped.output
    assert counts(neo4j, tenant) == (0, 0)
    with dg.DagsterInstance.get() as instance:
        assert not instance.has_dynamic_partition("tenants", tenant)

    missing = runner.invoke(app, ["restore", tenant, "--backup-id", "nope"])
    assert missing.exit_code == 1 and "has no backup 'nope'" in missing.output
    restored = runner.invoke(app, ["restore", tenant])
    assert restored.exit_code == 0, restored.output
    assert graph_digest(neo4j, tenant) == before
    with dg.DagsterInstance.get() as instance:
        assert instance.has_dynamic_partition("tenants", tenant)

    assert runner.invoke(app, ["soft-delete", tenant]).exit_code == 1
    deleted = runner.invoke(app, ["soft-delete", tenant, "--tag", "g1", "--type", "LongTermMemory",
                                      "--no-twins"])
    assert deleted.exit_code == 0 and "soft-deleted 1 memories" in deleted.output
    undone = runner.invoke(app, ["undelete", tenant, "--status", "deleted", "--no-twins"])
    assert undone.exit_code == 0 and "undeleted 1 memories" in undone.output
    assert graph_digest(neo4j, tenant) == before


def test_dropping_a_tenant_wipes_its_materializations_stored_outputs_and_partition(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path, instance: dg.DagsterInstance):
    other = f"{tenant}_other"
    resources = base_resources(neo4j, tmp_path / "inbox", tmp_path / "q")
    for name in (tenant, other):
        write_inbox_file(tmp_path / "inbox", name, "a.jsonl", [
            {"memory": "The user has two cats."}, {"memory": "The user has two cats, Luna and Milo."}])
        assert materialize_partition([memory_items, dedup_candidates], name, instance, resources).success
    tables = resources["io_manager"]
    stored = {name: tables._path(dg.AssetKey("dedup_candidates"), name) for name in (tenant, other)}
    assert all(path.exists() for path in stored.values())

    dropped = drop_tenant_job.execute_in_process(
        run_config=_ops("drop_tenant_op", tenant=tenant, confirm=tenant), instance=instance,
        resources={"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path / "b")), "tables": tables})
    assert dropped.success

    def materializations(name: str, asset: str) -> int:
        return len(instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey(asset), asset_partitions=[name]), limit=10).records)

    assert materializations(tenant, "memory_items") == materializations(tenant, "dedup_candidates") == 0
    assert materializations(other, "memory_items") == materializations(other, "dedup_candidates") == 1
    assert not stored[tenant].exists() and stored[other].exists()
    assert not instance.has_dynamic_partition("tenants", tenant)
    assert instance.has_dynamic_partition("tenants", other)
    assert counts(neo4j, tenant) == (0, 0)
