"""The backup folder format without Neo4j: publishing, listing, rotation, verification."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mem_assets.lifecycle import backup_files
from mem_assets.lifecycle.backup_files import BackupError, BackupReader, BackupWriter

KEYS = ("MemoryItem", "Topic")
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _write(root: Path, tenant: str = "alice", minutes: int = 0, nodes: int = 3,
           node_tenant: str | None = None, key: str = "MemoryItem") -> Path:
    with BackupWriter(root, tenant, created_at=T0 + timedelta(minutes=minutes)) as writer:
        for i in range(nodes):
            writer.write_node(f"mem:{i}", [key, "Node"], key,
                              {"id": f"mem:{i}", "user_name": node_tenant or tenant, "n": i})
        writer.write_relationships(key, "mem:0", "PARENT", key, "mem:1", [{"w": 2}, {"w": 1}])
        manifest = writer.commit()
    assert manifest.counts.relationships == 2
    return writer.final_path


def test_committed_backup_is_listed_and_verifies(tmp_path: Path):
    path = _write(tmp_path)
    reader = BackupReader.open(path)
    reader.verify(KEYS)
    assert reader.manifest.counts.nodes == 3
    assert reader.manifest.counts.labels == {"MemoryItem": 3, "Node": 3}
    assert backup_files.list_backups(tmp_path, "alice") == [path]
    [rel] = reader.records(backup_files.RELATIONSHIPS)
    assert rel["props"] == [{"w": 1}, {"w": 2}]


def test_same_content_gives_same_checksum_whenever_written(tmp_path: Path):
    first = BackupReader.open(_write(tmp_path, minutes=0)).manifest
    second = BackupReader.open(_write(tmp_path, minutes=5)).manifest
    assert first.backup_id != second.backup_id
    assert first.checksum == second.checksum


def test_failure_midway_leaves_nothing_behind(tmp_path: Path):
    with pytest.raises(RuntimeError, match="boom"), BackupWriter(tmp_path, "alice") as writer:
        writer.write_node("mem:1", ["MemoryItem"], "MemoryItem",
                          {"id": "mem:1", "user_name": "alice"})
        raise RuntimeError("boom")
    assert backup_files.list_backups(tmp_path, "alice") == []
    assert list((tmp_path / "alice").iterdir()) == []


def test_partial_folders_are_never_listed_or_rotated(tmp_path: Path):
    (tmp_path / "alice" / ".20260101T000000000000Z.partial").mkdir(parents=True)
    paths = [_write(tmp_path, minutes=m) for m in range(4)]
    assert backup_files.rotate(tmp_path, "alice", keep_last=2) == [p.name for p in paths[:2]]
    assert backup_files.list_backups(tmp_path, "alice") == paths[2:]
    assert (tmp_path / "alice" / ".20260101T000000000000Z.partial").is_dir()
    with pytest.raises(ValueError):
        backup_files.rotate(tmp_path, "alice", keep_last=0)


def test_find_backup_defaults_to_newest(tmp_path: Path):
    paths = [_write(tmp_path, minutes=m) for m in (3, 1, 2)]
    assert backup_files.find_backup(tmp_path, "alice", None) == paths[0]
    assert backup_files.find_backup(tmp_path, "alice", paths[1].name) == paths[1]


def test_verify_refuses_foreign_nodes_and_unknown_key_labels(tmp_path: Path):
    foreign = BackupReader.open(_write(tmp_path, "alice", node_tenant="bob"))
    with pytest.raises(BackupError, match="does not belong to 'alice'"):
        foreign.verify(KEYS)
    odd = BackupReader.open(_write(tmp_path / "b", "alice", key="Mystery"))
    with pytest.raises(BackupError, match="unknown key label 'Mystery'"):
        odd.verify(KEYS)


def test_refuses_other_format_versions_and_unsafe_tenant_names(tmp_path: Path):
    path = _write(tmp_path)
    manifest = (path / backup_files.MANIFEST).read_text()
    (path / backup_files.MANIFEST).write_text(manifest.replace('"format_version": 1', '"format_version": 9'))
    with pytest.raises(BackupError, match="format version 9"):
        BackupReader.open(path)
    for bad in ("../etc", "", ".hidden", "a/b"):
        with pytest.raises(ValueError, match="invalid tenant name"):
            backup_files.list_backups(tmp_path, bad)


def test_same_backup_id_twice_is_refused(tmp_path: Path):
    _write(tmp_path)
    with pytest.raises(BackupError, match="already exists"):
        _write(tmp_path)
