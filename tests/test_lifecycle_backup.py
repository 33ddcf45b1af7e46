"""Backup → drop → restore on the real Neo4j: exact round trip, isolation, rotation, refusal."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mem_assets.lifecycle import backup_files
from mem_assets.lifecycle.backup_files import BackupError
from mem_assets.lifecycle.operations import (
    LifecycleError,
    backup_tenant,
    drop_tenant,
    restore_tenant,
)
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.lifecycle import counts, graph_digest, seed_tenant


@pytest.fixture
def twins(neo4j: Neo4jResource, tenant: str) -> tuple[str, str]:
    """Two tenants seeded alike: the same texts, and identical ids for char:mochi, conv:1,
    topic:home (memory ids differ: they hash the tenant in)."""
    other = tenant + "_other"
    seed_tenant(neo4j, tenant)
    seed_tenant(neo4j, other)
    return tenant, other


def test_backup_drop_restore_round_trips_exactly_and_leaves_other_tenant_alone(
        neo4j: Neo4jResource, twins: tuple[str, str], tmp_path: Path):
    tenant, other = twins
    before, other_before = graph_digest(neo4j, tenant), graph_digest(neo4j, other)
    nodes, rels = counts(neo4j, tenant)

    first = backup_tenant(neo4j, tmp_path, tenant, keep_last=30, page_size=7)
    assert first.manifest.counts.nodes == nodes
    assert first.manifest.counts.relationships == rels
    assert first.manifest.counts.labels["MemoryItem"] == 24  # 12 items and their working twins
    assert first.manifest.counts.relationship_types == {
        "CONTAINS": 1, "MENTIONS": 2, "MERGED_TO": 1, "PARENT": 2, "RELATED_TO": 1}

    dropped = drop_tenant(neo4j, tmp_path, tenant, keep_last=30, batch_size=5, page_size=7)
    assert dropped.nodes_deleted == nodes
    assert dropped.batches > 1
    assert counts(neo4j, tenant) == (0, 0)
    assert graph_digest(neo4j, other) == other_before
    assert dropped.backup.manifest.checksum == first.manifest.checksum

    restored = restore_tenant(neo4j, tmp_path, tenant, batch_size=4)
    assert (restored.nodes, restored.nodes_created) == (nodes, nodes)
    assert (restored.relationships, restored.relationships_created) == (rels, rels)
    assert graph_digest(neo4j, tenant) == before
    assert graph_digest(neo4j, other) == other_before
    again = backup_tenant(neo4j, tmp_path, tenant, keep_last=30, page_size=1000)
    assert again.manifest.checksum == first.manifest.checksum


def test_restore_is_idempotent_and_repairs_changed_properties(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=5)
    expected = graph_digest(neo4j, tenant)
    backup_tenant(neo4j, tmp_path, tenant, keep_last=3)
    with neo4j.session() as session:
        session.run("MATCH (t:Topic {user_name: $t}) SET t.note = 'edited' REMOVE t.span",
                    t=tenant).consume()
        session.run("MATCH (:MemoryItem {user_name: $t})-[r:MENTIONS]->() SET r.weight = 0.0",
                    t=tenant).consume()

    first = restore_tenant(neo4j, tmp_path, tenant)
    second = restore_tenant(neo4j, tmp_path, tenant)

    assert first.nodes_created == first.relationships_created == 0
    assert second.nodes_created == second.relationships_created == 0
    assert graph_digest(neo4j, tenant) == expected


def test_embeddings_and_datetimes_keep_their_types(neo4j: Neo4jResource, tenant: str,
                                                    tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=3)
    drop_tenant(neo4j, tmp_path, tenant, keep_last=2)
    restore_tenant(neo4j, tmp_path, tenant)
    with neo4j.session() as session:
        record = session.run(
            "MATCH (m:MemoryItem {user_name: $t}) WHERE m.memory_type = 'LongTermMemory' "
            "RETURN toString(m.created_at) AS created, valueType(m.created_at) AS created_type, "
            "valueType(m.embedding) AS embedding_type, size(m.embedding) AS dim LIMIT 1",
            t=tenant).single()
        zoned = session.run("MATCH (t:Topic {user_name: $t}) RETURN toString(t.when_zoned) AS s",
                            t=tenant).single()["s"]
    assert record["created"].startswith("2026-11-01T08:0") and record["created"].endswith(":00Z")
    assert record["created_type"] == "ZONED DATETIME NOT NULL"
    assert record["embedding_type"] == "LIST<FLOAT NOT NULL> NOT NULL"
    assert record["dim"] == neo4j.embedding_dimension
    assert zoned == "2026-03-29T03:30:00.123456789+02:00[Europe/Berlin]"


def test_rotation_keeps_the_newest_n(neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=2)
    made = [backup_tenant(neo4j, tmp_path, tenant, keep_last=3) for _ in range(5)]
    kept = [p.name for p in backup_files.list_backups(tmp_path, tenant)]
    assert kept == [m.path.name for m in made[-3:]]
    assert made[3].rotated == [made[0].path.name]
    assert made[4].rotated == [made[1].path.name]


def _corrupt_truncate(path: Path) -> None:
    data = (path / backup_files.NODES).read_bytes()
    (path / backup_files.NODES).write_bytes(data[: len(data) // 2])


def _corrupt_edit_line(path: Path) -> None:
    file = path / backup_files.NODES
    lines = gzip.decompress(file.read_bytes()).decode().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["props"]["memory"] = "tampered"
    lines[0] = json.dumps(record) + "\n"
    file.write_bytes(gzip.compress("".join(lines).encode()))


def _corrupt_drop_last_line(path: Path) -> None:
    file = path / backup_files.RELATIONSHIPS
    lines = gzip.decompress(file.read_bytes()).splitlines(keepends=True)
    file.write_bytes(gzip.compress(b"".join(lines[:-1])))


def _corrupt_manifest(path: Path) -> None:
    (path / backup_files.MANIFEST).write_text('{"format": "memtend-tenant-backup", "tenant": 1}')


def _remove_manifest(path: Path) -> None:
    (path / backup_files.MANIFEST).unlink()


@pytest.mark.parametrize("corrupt, message", [
    (_corrupt_truncate, "damaged or truncated"),
    (_corrupt_edit_line, "does not match the manifest"),
    (_corrupt_drop_last_line, "does not match the manifest"),
    (_corrupt_manifest, "corrupt manifest"),
    (_remove_manifest, "no backup"),
])
def test_corrupt_backup_is_refused_before_the_graph_changes(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path, corrupt, message):
    seed_tenant(neo4j, tenant, memory_count=4)
    backup = backup_tenant(neo4j, tmp_path, tenant, keep_last=2)
    with neo4j.session() as session:
        session.run("MATCH (m:MemoryItem {user_name: $t}) WITH m LIMIT 2 DETACH DELETE m",
                    t=tenant).consume()
    damaged = graph_digest(neo4j, tenant)
    corrupt(backup.path)

    with pytest.raises(BackupError, match=message):
        restore_tenant(neo4j, tmp_path, tenant, backup_id=backup.path.name)
    assert graph_digest(neo4j, tenant) == damaged


def test_restore_refuses_a_missing_backup_and_another_tenants_backup(
        neo4j: Neo4jResource, tenant: str, tmp_path: Path):
    with pytest.raises(BackupError, match="has no backups"):
        restore_tenant(neo4j, tmp_path, tenant)
    seed_tenant(neo4j, tenant, memory_count=2)
    backup = backup_tenant(neo4j, tmp_path, tenant, keep_last=2)
    with pytest.raises(BackupError, match="has no backup 'nope'"):
        restore_tenant(neo4j, tmp_path, tenant, backup_id="nope")
    impostor = tmp_path / (tenant + "_x") / backup.path.name
    impostor.parent.mkdir()
    backup.path.rename(impostor)
    with pytest.raises(BackupError, match="is a backup of"):
        restore_tenant(neo4j, tmp_path, tenant + "_x")


def test_drop_refuses_nodes_a_backup_could_not_restore(neo4j: Neo4jResource, tenant: str,
                                                        tmp_path: Path):
    seed_tenant(neo4j, tenant, memory_count=2)
    with neo4j.session() as session:
        session.run("CREATE (:Stray {user_name: $t, id: 'stray:1'})", t=tenant).consume()
    before = counts(neo4j, tenant)
    try:
        with pytest.raises(LifecycleError, match="1 nodes .* have no key label"):
            drop_tenant(neo4j, tmp_path, tenant, keep_last=2)
        assert counts(neo4j, tenant) == before
        assert backup_files.list_backups(tmp_path, tenant) == []
    finally:
        with neo4j.session() as session:
            session.run("MATCH (s:Stray {user_name: $t}) DELETE s", t=tenant).consume()


def test_drop_refuses_cross_tenant_relationships(neo4j: Neo4jResource, twins: tuple[str, str],
                                                  tmp_path: Path):
    tenant, other = twins
    with neo4j.session() as session:
        session.run("MATCH (a:Character {user_name: $a}), (b:Character {user_name: $b}) "
                    "CREATE (b)-[:KNOWS]->(a)", a=tenant, b=other).consume()
    before = counts(neo4j, tenant)
    try:
        with pytest.raises(LifecycleError, match="1 relationships to nodes outside"):
            drop_tenant(neo4j, tmp_path, tenant, keep_last=2)
        assert counts(neo4j, tenant) == before
        assert len(backup_files.list_backups(tmp_path, tenant)) == 1
    finally:  # other suites assert that no relationship anywhere crosses tenants
        with neo4j.session() as session:
            session.run("MATCH (:Character {user_name: $b})-[r:KNOWS]->(:Character {user_name: $a}) "
                        "DELETE r", a=tenant, b=other).consume()
