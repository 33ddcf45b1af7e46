"""Backups taken while the graph changes, and restores that fail midway, on the real Neo4j."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from mem_assets.lifecycle import backup_files
from mem_assets.lifecycle.backup_files import BackupError
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.lifecycle.jobs import backup_tenant_job, nightly_backups
from mem_assets.lifecycle.operations import (
    InconsistentRead,
    backup_tenant,
    drop_tenant,
    open_verified,
    restore_tenant,
)
from mem_assets.lifecycle.queries import KEY_LABELS
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.dagster_server import ROOT
from tests.support.lifecycle import counts, graph_digest, seed_tenant


def _rewrite(path: Path, keep_node) -> None:
    """Rewrite a backup without some nodes, with file digests, counts and checksum recomputed:
    what a backup read while nodes were being created looked like before endpoint checks."""
    manifest = json.loads((path / backup_files.MANIFEST).read_text())
    file = path / backup_files.NODES
    lines = [line for line in gzip.decompress(file.read_bytes()).splitlines(keepends=True)
             if keep_node(json.loads(line))]
    file.write_bytes(gzip.compress(b"".join(lines)))
    entry = manifest["files"][backup_files.NODES]
    entry["lines"], entry["sha256"] = len(lines), hashlib.sha256(b"".join(lines)).hexdigest()
    manifest["counts"]["nodes"] = len(lines)
    labels: dict[str, int] = {}
    for line in lines:
        for label in json.loads(line)["labels"]:
            labels[label] = labels.get(label, 0) + 1
    manifest["counts"]["labels"] = labels
    manifest["checksum"] = backup_files.combined_checksum(
        {name: backup_files.FileEntry(**value) for name, value in manifest["files"].items()})
    (path / backup_files.MANIFEST).write_text(json.dumps(manifest))


def _dangling_ends(path: Path) -> list[tuple[str, str]]:
    """Relationship ends missing from a backup's nodes, read straight from its files."""
    def records(name: str) -> list[dict]:
        return [json.loads(line) for line in gzip.decompress((path / name).read_bytes()).splitlines()]
    nodes = {(n["key"], n["id"]) for n in records(backup_files.NODES)}
    return [end for r in records(backup_files.RELATIONSHIPS)
            for end in ((r["start_key"], r["start"]), (r["end_key"], r["end"])) if end not in nodes]


def test_restore_checks_relationship_ends_before_writing_anything(neo4j: Neo4jResource, tenant: str,
                                                                  tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=6)
    backup = backup_tenant(neo4j, tmp_path, tenant, keep_last=2)
    _rewrite(backup.path, lambda node: node["id"] != "topic:home")  # PARENT and RELATED_TO ends
    drop_tenant(neo4j, tmp_path / "drop", tenant, keep_last=1)

    with pytest.raises(BackupError, match="relationship ends are not in the backup"):
        restore_tenant(neo4j, tmp_path, tenant, backup.path.name, batch_size=3)
    assert counts(neo4j, tenant) == (0, 0)


def test_restore_checks_the_manifest_counts_before_writing_anything(neo4j: Neo4jResource, tenant: str,
                                                                    tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=3)
    backup = backup_tenant(neo4j, tmp_path, tenant, keep_last=2)
    manifest = json.loads((backup.path / backup_files.MANIFEST).read_text())
    manifest["counts"]["relationship_types"]["MENTIONS"] += 1
    manifest["counts"]["relationships"] += 1
    (backup.path / backup_files.MANIFEST).write_text(json.dumps(manifest))
    drop_tenant(neo4j, tmp_path / "drop", tenant, keep_last=1)

    with pytest.raises(BackupError, match="does not add up to the manifest's counts"):
        restore_tenant(neo4j, tmp_path, tenant, backup.path.name)
    assert counts(neo4j, tenant) == (0, 0)


def test_a_restore_that_fails_midway_rolls_back_what_it_wrote(neo4j: Neo4jResource, tenant: str,
                                                              tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=8)
    with neo4j.session() as session:  # a node under two key labels, keyed (and restored) as Character
        session.run("CREATE (:Character:Scene {user_name: $t, id: 'char:twin', name: 'Twin'})",
                    t=tenant).consume()
    backup = backup_tenant(neo4j, tmp_path, tenant, keep_last=2)
    with neo4j.session() as session:  # damage to repair, and a Scene that will clash with char:twin
        session.run("MATCH (t:Topic {user_name: $t}) SET t.note = 'edited' REMOVE t.span",
                    t=tenant).consume()
        session.run("MATCH (:MemoryItem {user_name: $t})-[r:MENTIONS]->() SET r.weight = 0.0",
                    t=tenant).consume()
        session.run("MATCH (m:MemoryItem {user_name: $t}) WITH m ORDER BY m.id LIMIT 5 DETACH DELETE m",
                    t=tenant).consume()
        session.run("MATCH (c:Character {user_name: $t, id: 'char:twin'}) DETACH DELETE c "
                    "CREATE (:Scene {user_name: $t, id: 'char:twin', name: 'a different node'})",
                    t=tenant).consume()
    damaged = graph_digest(neo4j, tenant)

    with pytest.raises(Exception, match="already exists with label `Scene`"):
        restore_tenant(neo4j, tmp_path, tenant, backup.path.name, batch_size=2)

    assert graph_digest(neo4j, tenant) == damaged


def test_a_backup_taken_during_merges_is_published_only_if_it_restores(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    """A writer keeps 'merging': it archives a high-id memory into a new memory whose id sorts
    first, so a keyset-paged backup reads the MERGED_TO edge but never its end node."""
    seed_tenant(neo4j, tenant, memory_count=100)
    stop, merges = threading.Event(), [0]

    def merge_forever() -> None:
        with neo4j.session() as session:
            while not stop.is_set():
                session.run(
                    """
                    MATCH (old:MemoryItem {user_name: $t, status: 'activated'})
                    WITH old ORDER BY old.id DESC LIMIT 1
                    CREATE (new:MemoryItem:Node {user_name: $t, id: 'mem:000' + $n, memory: old.memory,
                                                 status: 'activated'})
                    SET old.status = 'archived'
                    CREATE (old)-[:MERGED_TO]->(new)
                    """, t=tenant, n=f"{merges[0]:06d}").consume()
                merges[0] += 1

    writer = threading.Thread(target=merge_forever)
    writer.start()
    outcomes = []
    try:
        for _ in range(2):
            try:
                outcomes.append(backup_tenant(neo4j, tmp_path, tenant, keep_last=10, page_size=20))
            except InconsistentRead:
                outcomes.append(None)
    finally:
        stop.set()
        writer.join()
    assert merges[0] > 0
    for path in backup_files.list_backups(tmp_path, tenant):
        assert _dangling_ends(path) == []
        open_verified(tmp_path, tenant, path.name)

    quiet = backup_tenant(neo4j, tmp_path, tenant, keep_last=10, page_size=20)
    expected = graph_digest(neo4j, tenant)
    drop_tenant(neo4j, tmp_path / "drop", tenant, keep_last=1)
    restore_tenant(neo4j, tmp_path, tenant, quiet.path.name)
    assert graph_digest(neo4j, tenant) == expected


def test_backup_runs_share_the_per_tenant_run_limit_with_pipeline_runs(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    from dagster._utils.tags import TagConcurrencyLimitsCounter

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", [tenant, tenant + "_b"])
        requests = nightly_backups(dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 12, 1, 2, 30, tzinfo=UTC)))
        backup_run = {r.tags["dagster/partition"]: r for r in requests}[tenant]
        tend_run = _Tagged({"dagster/partition": tenant})  # what every partitioned run carries
        limits = yaml.safe_load((ROOT / "dagster_home" / "dagster.yaml").read_text())["concurrency"]["runs"][
            "tag_concurrency_limits"]
        counter = TagConcurrencyLimitsCounter(limits, [tend_run])
        assert counter.is_blocked(_Tagged(backup_run.tags))
        assert not counter.is_blocked(_Tagged({"dagster/partition": tenant + "_b"}))

        seed_tenant(neo4j, tenant, memory_count=2)
        run = backup_tenant_job.execute_in_process(
            run_config=backup_run.run_config, tags=backup_run.tags, instance=instance,
            resources={"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path))})
        assert run.success
        open_verified(tmp_path, tenant, None).verify(KEY_LABELS)


class _Tagged:
    """A queued or in-progress run as the run queue's limit counter sees it: its tags."""

    def __init__(self, tags: dict[str, str]) -> None:
        self.tags = tags

