"""Hostile inbox input on the real Neo4j: one bad line never blocks a tenant, tenant names cannot
escape their folders, links are not followed, invisible text never becomes a memory."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import dagster as dg
import pytest
from typer.testing import CliRunner

from mem_assets.cli import app as memtend_cli
from mem_assets.context_graph.assets import context_graph
from mem_assets.context_graph.records import ContextConfig, TenantContext
from mem_assets.dedup.sensors import build_dedup_sensor
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.inbox import InboxResource, Rejection
from mem_assets.ingest.sensors import build_inbox_sensor
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.lifecycle.cli import app as lifecycle_cli
from mem_assets.lifecycle.jobs import backup_tenant_job
from mem_assets.lifecycle.operations import backup_tenant, restore_tenant
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.tenants import InvalidTenant, OutsideRoot
from tests.support.context_sample import with_context_config
from tests.support.lifecycle import seed_tenant
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    node_count,
    write_inbox_file,
)
from tests.test_dedup import write_items

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC).isoformat()
DEEP = 100_000


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _texts(neo4j: Neo4jResource, tenant: str) -> list[str]:
    with neo4j.session() as session:
        return [r["text"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) "
            "RETURN m.memory AS text ORDER BY text", t=tenant)]


def _kinds(inbox: InboxResource, tenant: str) -> dict[tuple[str, int], str]:
    return {(e["file"], e["line"]): e["kind"] for e in inbox.read_quarantine(tenant)}


def _nested(depth: int) -> str:
    return '{"memory": "deep", "sources": [{"type": "chat", "x": ' + "[" * depth + "]" * depth + "}]}"


def test_pathological_lines_are_quarantined_and_later_files_still_land(neo4j, instance, tmp_path, tenant):
    write_inbox_file(tmp_path / "inbox", tenant, "1.jsonl", [
        {"memory": "Good one."},
        _nested(DEEP),                                   # json.loads: RecursionError
        _nested(40),                                     # under the recursion limit, over ours
        '{"memory": "big", "confidence": ' + "9" * 5000 + "}",  # int() digit limit: ValueError
        '{"memory": "lone \\ud800 surrogate"}',          # not encodable: would fail the write
        {"memory": "Good two.", "sources": [{"type": "chat", "meta": {"a": [{"b": 1}]}}]},
    ])
    write_inbox_file(tmp_path / "inbox", tenant, "2.jsonl", [{"memory": "Good three."}])
    resources = base_resources(neo4j, tmp_path / "inbox", tmp_path / "q")

    result = materialize_partition([memory_items], tenant, instance, resources)

    assert result.success
    assert _texts(neo4j, tenant) == ["Good one.", "Good three.", "Good two."]
    assert _kinds(resources["inbox"], tenant) == {
        ("1.jsonl", 2): "too_deep", ("1.jsonl", 3): "too_deep", ("1.jsonl", 4): "not_json",
        ("1.jsonl", 5): "invalid_unicode"}
    again = materialize_partition([memory_items], tenant, instance, resources)
    assert again.success and _meta(again, "memory_items")["files_already_ingested"] == 2


def test_pathological_context_records_are_quarantined(neo4j, instance, tmp_path, tenant):
    config = tmp_path / "context.json"
    config.write_text(ContextConfig(default=TenantContext(user_id="u", agent_id="a", scene="s"))
                      .model_dump_json())
    good = {"memory": "[User] likes tea.", "created_at": T0}
    write_inbox_file(tmp_path / "inbox", f"{tenant}/context", "c.jsonl", [
        json.dumps(good), "[" * DEEP + "]" * DEEP, {"memory": "\u200b\u2060\ufeff", "created_at": T0},
        {"memory": "[User] likes\u200b coffee.\u0007", "created_at": T0},
    ])
    resources = with_context_config(base_resources(neo4j, tmp_path / "inbox", tmp_path / "q"), config)

    result = materialize_partition([context_graph], tenant, instance, resources)

    assert result.success
    assert _texts(neo4j, tenant) == ["[User] likes coffee.", "[User] likes tea."]
    assert _kinds(resources["inbox"], tenant) == {("c.jsonl", 2): "too_deep",
                                                  ("c.jsonl", 3): "invalid_fields"}


def test_invisible_text_is_refused_and_a_bom_does_not_cost_the_first_line(neo4j, instance, tmp_path,
                                                                         tenant):
    path = write_inbox_file(tmp_path / "inbox", tenant, "bom.jsonl", [
        {"memory": "First line after a BOM."},
        {"memory": "\u200b\u200c\u200d\u2060\ufeff"},
        {"memory": "\u3164\u2800 \u00a0"},
        {"memory": "\u202eReversed\u202c and \u200bzero\u200b-width."},
    ])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    resources = base_resources(neo4j, tmp_path / "inbox", tmp_path / "q")

    assert materialize_partition([memory_items], tenant, instance, resources).success

    assert _texts(neo4j, tenant) == ["First line after a BOM.", "Reversed and zero-width."]
    assert _kinds(resources["inbox"], tenant) == {("bom.jsonl", 2): "invalid_fields",
                                                  ("bom.jsonl", 3): "invalid_fields"}


# --- tenant names ------------------------------------------------------------------------------

def test_cli_refuses_a_tenant_name_that_leaves_the_inbox(neo4j, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    for bad in ["../x", "alice\n", "a/b", ".hidden", ""]:
        result = CliRunner().invoke(memtend_cli, ["tend", bad])
        assert result.exit_code == 2, (bad, result.output)
        assert "invalid tenant name" in result.output
        assert CliRunner().invoke(lifecycle_cli, ["restore", bad, "--backup-dir",
                                                  str(tmp_path / "b")]).exit_code == 2
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as inst:
        assert inst.get_dynamic_partitions("tenants") == []
    assert node_count(neo4j, "../x") == 0


def test_a_bad_partition_key_fails_before_reading_or_writing_anything(neo4j, instance, tmp_path):
    inbox, quarantine = tmp_path / "inbox", tmp_path / "q"
    write_inbox_file(tmp_path, "outside", "secret.jsonl", [{"memory": "Outside the inbox."}])
    inbox.mkdir()
    resources = base_resources(neo4j, inbox, quarantine)

    instance.add_dynamic_partitions("tenants", ["../outside"])
    result = dg.materialize([memory_items], partition_key="../outside", instance=instance,
                            resources=resources, raise_on_error=False)

    assert not result.success
    [failure] = result.get_step_failure_events()
    assert "invalid tenant name '../outside'" in str(failure.step_failure_data.error)
    assert node_count(neo4j, "../outside") == 0
    assert not quarantine.exists() and not (tmp_path / "outside.jsonl").exists()


def test_folders_with_unsafe_names_are_never_tenants(tmp_path, neo4j):
    root = tmp_path / "inbox"
    for name in ["ok", "trailing\n", "sp ace", "-dash"]:
        write_inbox_file(root, name, "a.jsonl", [{"memory": "m"}])
    inbox = InboxResource(root=str(root), quarantine_dir=str(tmp_path / "q"))
    assert inbox.tenants() == ["ok"]
    sensor = build_inbox_sensor(dg.DefaultSensorStatus.RUNNING)
    with (dg.instance_for_test() as inst,
          dg.build_sensor_context(instance=inst, resources={"inbox": inbox, "neo4j": neo4j}) as context):
        result = sensor(context)
    assert [r.partition_key for r in result.run_requests] == ["ok"]
    for bad in ["ok\n", "..", "../ok"]:
        with pytest.raises(InvalidTenant):
            inbox.files(bad)
        with pytest.raises(InvalidTenant):
            inbox.quarantine_path(bad)


def test_the_dedup_sensor_ignores_nodes_whose_user_name_is_not_a_tenant(neo4j, tenant):
    write_items(neo4j, tenant, ["A fact of a valid tenant."])
    with neo4j.session() as session:
        session.run("CREATE (:MemoryItem {user_name: '../escape', id: 'mem:x', memory: 'x'})").consume()
    try:
        with dg.instance_for_test() as inst, dg.build_sensor_context(
                instance=inst, resources={"neo4j": neo4j}) as context:
            result = build_dedup_sensor(dg.DefaultSensorStatus.RUNNING)(context)
    finally:
        with neo4j.session() as session:
            session.run("MATCH (n:MemoryItem {user_name: '../escape'}) DETACH DELETE n").consume()
    requested = {r.partition_key for r in result.run_requests}
    added = {key for r in result.dynamic_partitions_requests for key in r.partition_keys}
    assert tenant in requested and "../escape" not in requested | added


def test_run_config_and_restore_refuse_bad_tenants(neo4j, instance, tmp_path, tenant):
    seed_tenant(neo4j, tenant, memory_count=2)
    backup = backup_tenant(neo4j, tmp_path / "b", tenant, keep_last=2)
    run = backup_tenant_job.execute_in_process(
        run_config={"ops": {"backup_tenant_op": {"config": {"tenant": "../" + tenant}}}},
        instance=instance, resources={"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path / "b"))},
        raise_on_error=False)
    assert not run.success
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [tenant]
    with pytest.raises(InvalidTenant):
        restore_tenant(neo4j, tmp_path / "b", tenant + "\n", backup.path.name)
    with pytest.raises(InvalidTenant):
        restore_tenant(neo4j, tmp_path / "b" / tenant, "..", backup.path.name)


def test_quarantine_and_backup_paths_refuse_links_out_of_their_roots(neo4j, tmp_path, tenant):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "victim.jsonl"
    victim.write_text("")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / f"{tenant}.jsonl").symlink_to(victim)
    inbox = InboxResource(root=str(tmp_path / "inbox"), quarantine_dir=str(tmp_path / "q"))
    with pytest.raises(OutsideRoot):
        inbox.quarantine(tenant, [Rejection("f.jsonl", 1, "not_json", "x", "raw")])
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / tenant).symlink_to(elsewhere, target_is_directory=True)
    seed_tenant(neo4j, tenant, memory_count=2)
    with pytest.raises(OutsideRoot):
        backup_tenant(neo4j, tmp_path / "b", tenant, keep_last=2)
    assert victim.read_text() == "" and list(elsewhere.iterdir()) == [victim]


# --- links -------------------------------------------------------------------------------------

def test_symlinks_and_fifos_are_skipped_and_recorded_once(neo4j, instance, tmp_path, tenant):
    inbox_root, secret = tmp_path / "inbox", tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"memory": "SECRET from outside the inbox."}) + "\n")
    write_inbox_file(inbox_root, tenant, "ok.jsonl", [{"memory": "Regular file."}])
    (inbox_root / tenant / "leak.jsonl").symlink_to(secret)
    os.mkfifo(inbox_root / tenant / "pipe.jsonl")
    outside_folder = tmp_path / "other_folder"
    write_inbox_file(tmp_path, "other_folder", "o.jsonl", [{"memory": "SECRET folder."}])
    (inbox_root / (tenant + "_linked")).symlink_to(outside_folder, target_is_directory=True)
    resources = base_resources(neo4j, inbox_root, tmp_path / "q")
    inbox: InboxResource = resources["inbox"]

    assert inbox.tenants() == [tenant]
    first = materialize_partition([memory_items], tenant, instance, resources)
    linked = materialize_partition([memory_items], tenant + "_linked", instance, resources)
    again = materialize_partition([memory_items], tenant, instance, resources)

    assert first.success and linked.success and again.success
    assert _texts(neo4j, tenant) == ["Regular file."]
    assert node_count(neo4j, tenant + "_linked") == 1  # the ledger entry of the skipped folder
    entries = list(inbox.read_quarantine(tenant))
    assert sorted((e["file"], e["kind"]) for e in entries) == [("leak.jsonl", "symlink"),
                                                              ("pipe.jsonl", "not_regular_file")]
    assert all(e["raw"] == "" for e in entries)
    assert "SECRET" not in (tmp_path / "q" / f"{tenant}.jsonl").read_text()
    [folder_entry] = inbox.read_quarantine(tenant + "_linked")
    assert folder_entry["kind"] == "symlink" and "SECRET" not in json.dumps(folder_entry)
    assert len(_meta(first, "memory_items")["files_skipped"]) == 2
    assert _meta(again, "memory_items")["files_skipped"] == []
    with neo4j.session() as session:
        skipped = session.run("MATCH (f:IngestedFile {user_name: $t, kind: 'skipped'}) "
                              "RETURN f.name AS name, f.reason AS reason ORDER BY name", t=tenant).data()
    assert [row["name"] for row in skipped] == ["leak.jsonl", "pipe.jsonl"]
    assert "symbolic link" in skipped[0]["reason"]


def test_context_folder_symlink_is_not_followed(neo4j, instance, tmp_path, tenant):
    outside = tmp_path / "outside_context"
    write_inbox_file(tmp_path, "outside_context", "c.jsonl",
                     [{"memory": "[User] SECRET.", "created_at": T0}])
    (tmp_path / "inbox" / tenant).mkdir(parents=True)
    (tmp_path / "inbox" / tenant / "context").symlink_to(outside, target_is_directory=True)
    resources = base_resources(neo4j, tmp_path / "inbox", tmp_path / "q")

    result = materialize_partition([context_graph], tenant, instance, resources)

    assert result.success
    assert _texts(neo4j, tenant) == []
    [entry] = resources["inbox"].read_quarantine(tenant)
    assert (entry["file"], entry["kind"]) == ("context", "symlink")
