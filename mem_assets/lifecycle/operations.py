"""Backup, restore and drop of one tenant, streaming page by page in bounded memory."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from neo4j import ManagedTransaction, Session

from mem_assets.lifecycle import queries
from mem_assets.lifecycle.backup_codec import decode_properties, encode_properties
from mem_assets.lifecycle.backup_files import (
    NODES,
    RELATIONSHIPS,
    BackupError,
    BackupReader,
    BackupWriter,
    Manifest,
    check_tenant,
    find_backup,
    rotate,
)
from mem_resources import memory_queries
from mem_resources.batching import chunks
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Progress, Sink, tracked


class LifecycleError(RuntimeError):
    """The tenant is not in a state the operation can safely handle; nothing was deleted."""


class InconsistentRead(BackupError):
    """The graph changed while a backup read it: a relationship points at a node not in it."""


@dataclass
class BackupResult:
    path: Path
    manifest: Manifest
    rotated: list[str]
    seconds: float


@dataclass
class RestoreResult:
    path: Path
    manifest: Manifest
    nodes: int = 0
    nodes_created: int = 0
    relationships: int = 0
    relationships_created: int = 0
    verify_seconds: float = 0.0
    seconds: float = 0.0


@dataclass
class RestoreUndo:
    """What a restore changed so far, to give back if it fails midway."""

    nodes_created: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    nodes_changed: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    relationships_created: list[str] = field(default_factory=list)
    relationships_changed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DropResult:
    backup: BackupResult
    nodes_deleted: int = 0
    seconds: float = 0.0
    batches: int = 0
    deleted_by_label: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Page:
    label: str
    nodes: list[dict[str, Any]]
    relationships: list[dict[str, Any]]
    external: int


def _read_page(tx: ManagedTransaction, tenant: str, label: str, after: str, limit: int) -> _Page:
    nodes = queries.node_page(tx, tenant, label, after, limit)
    ids = [node["id"] for node in nodes]
    if not ids:
        return _Page(label, nodes, [], 0)
    return _Page(label, nodes, queries.outgoing_relationships(tx, tenant, label, ids),
                 queries.external_relationships(tx, tenant, label, ids))


def _pages(session: Session, tenant: str, page_size: int) -> Iterator[_Page]:
    """Keyset pages of each key label in id order, with their outgoing relationships."""
    for label in queries.KEY_LABELS:
        after = ""
        while True:
            page = session.execute_read(_read_page, tenant, label, after, page_size)
            yield page
            if len(page.nodes) < page_size:
                break
            after = page.nodes[-1]["id"]


def _rel_group(rel: dict[str, Any]) -> tuple[str, str, str, str]:
    return rel["start"], rel["type"], rel["end_key"], rel["end"]


def _write_backup(neo4j: Neo4jResource, root: Path, tenant: str, page_size: int,
                  compresslevel: int, sink: Sink | None) -> tuple[Path, Manifest]:
    """One pass over the tenant; published only if every relationship end was read too."""
    with neo4j.session() as session:
        unaddressable = session.execute_read(queries.unaddressable_nodes, tenant)
        if unaddressable:
            raise LifecycleError(
                f"{unaddressable} nodes of {tenant!r} have no key label "
                f"({', '.join(queries.KEY_LABELS)}) or no string id; a backup could not restore "
                "them. Add their label to TENANT_SCOPED_LABELS in mem_resources/constraints.py."
            )
        read: set[tuple[str, str]] = set()
        pointed_at: set[tuple[str, str]] = set()
        total = session.execute_read(queries.tenant_node_count, tenant)
        with (BackupWriter(root, tenant, compresslevel=compresslevel) as writer,
              tracked(f"backup {tenant}", sink, total=total, unit="nodes") as progress):
            for page in _pages(session, tenant, page_size):
                for node in page.nodes:
                    writer.write_node(node["id"], node["labels"], page.label,
                                      encode_properties(node["props"]))
                    read.add((page.label, node["id"]))
                rels = sorted(page.relationships, key=_rel_group)
                for (start, rel_type, end_key, end), group in groupby(rels, key=_rel_group):
                    writer.write_relationships(page.label, start, rel_type, end_key, end,
                                               [encode_properties(r["props"]) for r in group])
                    pointed_at.add((end_key, end))
                writer.external_relationships += page.external
                progress.advance(len(page.nodes))
            if missing := pointed_at - read:
                raise InconsistentRead(f"{len(missing)} relationship ends of {tenant!r} were not read "
                                       "(the graph changed during the backup)")
            return writer.final_path, writer.commit()


def backup_tenant(neo4j: Neo4jResource, root: Path, tenant: str, keep_last: int,
                  page_size: int = 1000, compresslevel: int = 1, attempts: int = 3,
                  holder: str | None = None, sink: Sink | None = None) -> BackupResult:
    """Stream the tenant's nodes (keyset pages per key label) and their relationships to disk,
    publish the backup, then rotate older ones away. Progress (nodes) goes to ``sink``.

    Pages are read in separate transactions, so the backup holds the tenant's write lease
    (``holder``: re-entrant for a run or drop that already holds it): no writer changes the
    tenant meanwhile. As a safety net against writers that ignore the lease, a pass that read a
    relationship without its end node is discarded and retried, up to ``attempts`` passes: a
    published backup always restores.
    """
    check_tenant(tenant)
    if keep_last < 1:
        raise ValueError("keep_last must be at least 1")
    started = time.perf_counter()
    with neo4j.lease(tenant, holder, info="a backup"):
        for attempt in range(1, attempts + 1):
            try:
                path, manifest = _write_backup(neo4j, root, tenant, page_size, compresslevel, sink)
                break
            except InconsistentRead:
                if attempt == attempts:
                    raise
    rotated = rotate(root, tenant, keep_last)
    return BackupResult(path, manifest, rotated, time.perf_counter() - started)


def open_verified(root: Path, tenant: str, backup_id: str | None) -> BackupReader:
    """The backup, fully read once and checked against its manifest; raises BackupError."""
    reader = BackupReader.open(find_backup(root, tenant, backup_id))
    if reader.manifest.tenant != tenant:
        raise BackupError(f"{reader.path} is a backup of {reader.manifest.tenant!r}, not {tenant!r}")
    reader.verify(queries.KEY_LABELS)
    return reader


def _node_batches(reader: BackupReader, size: int) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Decoded node rows, ``size`` lines at a time, grouped by key label."""
    for chunk in chunks(reader.records(NODES), size):
        by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for node in chunk:
            by_key[node["key"]].append({"id": node["id"], "labels": node["labels"],
                                        "props": decode_properties(node["props"])})
        yield by_key


def _relationship_batches(reader: BackupReader,
                          size: int) -> Iterator[dict[tuple[str, str, str], list[dict[str, Any]]]]:
    """Decoded relationship rows grouped by (start key label, type, end key label)."""
    for chunk in chunks(reader.records(RELATIONSHIPS), size):
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for rel in chunk:
            groups[rel["start_key"], rel["type"], rel["end_key"]].append({
                "start": rel["start"], "end": rel["end"],
                "props": [decode_properties(props) for props in rel["props"]],
            })
        yield groups


def _write_restore(session: Session, tenant: str, reader: BackupReader, batch_size: int,
                   result: RestoreResult, undo: RestoreUndo, sink: Sink | None) -> None:
    counts = reader.manifest.counts
    with tracked(f"restore {tenant} nodes", sink, total=counts.nodes, unit="nodes") as progress:
        for node_batch in _node_batches(reader, batch_size):
            for key, rows in node_batch.items():
                created, changed = session.execute_write(queries.merge_nodes, tenant, key, rows)
                undo.nodes_created[key] += created
                undo.nodes_changed[key] += changed
                result.nodes_created += len(created)
                result.nodes += len(rows)
                progress.advance(len(rows))
    with tracked(f"restore {tenant} relationships", sink, total=counts.relationships,
                 unit="relationships") as progress:
        _write_relationships(session, tenant, reader, batch_size, result, undo, progress)


def _write_relationships(session: Session, tenant: str, reader: BackupReader, batch_size: int,
                         result: RestoreResult, undo: RestoreUndo, progress: Progress) -> None:
    for rel_batch in _relationship_batches(reader, batch_size):
        for (start_key, rel_type, end_key), rows in rel_batch.items():
            matched, created, changed = session.execute_write(
                queries.merge_relationships, tenant, start_key, rel_type, end_key, rows)
            undo.relationships_created += created
            undo.relationships_changed += changed
            if matched != len(rows):
                raise BackupError(f"{reader.path}: {len(rows) - matched} {rel_type} relationships "
                                  "lost an end node while restoring (a concurrent delete?)")
            result.relationships += sum(len(row["props"]) for row in rows)
            result.relationships_created += len(created)
            progress.advance(sum(len(row["props"]) for row in rows))


def _roll_back(session: Session, tenant: str, undo: RestoreUndo, batch_size: int) -> None:
    """Undo a failed restore, newest first: relationships, then node changes, then new nodes."""
    for created in chunks(undo.relationships_created, batch_size):
        session.execute_write(queries.undo_relationships, tenant, created, [])
    for changed in chunks(undo.relationships_changed, batch_size):
        session.execute_write(queries.undo_relationships, tenant, [], changed)
    for key, nodes in undo.nodes_changed.items():
        for changed in chunks(nodes, batch_size):
            session.execute_write(queries.undo_node_changes, tenant, key, changed)
    for key, ids in undo.nodes_created.items():
        for created in chunks(ids, batch_size):
            session.execute_write(queries.delete_nodes, tenant, key, created)


def restore_tenant(neo4j: Neo4jResource, root: Path, tenant: str, backup_id: str | None = None,
                   batch_size: int = 500, holder: str | None = None, sink: Sink | None = None) -> RestoreResult:
    """Verify the backup completely (files, endpoints, counts), then MERGE its nodes and
    relationships back in batches (idempotent). All or nothing: if a write fails, what this
    restore created is deleted and what it changed is given back before the error is raised.
    Killed midway (no rollback), the tenant stays marked incomplete: runs refuse it, naming the
    restore command that completes it."""
    started = time.perf_counter()
    reader = open_verified(root, check_tenant(tenant), backup_id)
    result = RestoreResult(reader.path, reader.manifest, verify_seconds=time.perf_counter() - started)
    undo = RestoreUndo()
    finish = f"memtend restore {tenant} --backup-id {reader.manifest.backup_id}"
    with neo4j.lease(tenant, holder, info="a restore"), neo4j.session() as session:
        session.execute_write(memory_queries.mark_incomplete, tenant, finish)
        try:
            _write_restore(session, tenant, reader, batch_size, result, undo, sink)
        except BaseException as failure:
            try:
                _roll_back(session, tenant, undo, batch_size)
            except Exception as rollback_failure:  # noqa: BLE001 -- reported with the failure
                raise BackupError(
                    f"restoring {reader.path.name} failed ({failure}) and rolling it back failed "
                    f"too ({rollback_failure}); run `{finish}` to complete it") from failure
            session.execute_write(memory_queries.clear_incomplete, tenant)
            raise
        session.execute_write(memory_queries.clear_incomplete, tenant)
    result.seconds = time.perf_counter() - started
    return result


def drop_tenant(neo4j: Neo4jResource, root: Path, tenant: str, keep_last: int,
                batch_size: int = 1000, page_size: int = 1000, holder: str | None = None,
                sink: Sink | None = None) -> DropResult:
    """Back the tenant up, then hard-delete exactly the nodes in that backup, batch by batch.

    Ids come from the backup file on disk (re-verified), so nothing is deleted that is not in a
    completed backup. Backup and deletion hold the tenant's write lease together, so no writer
    comes in between; nodes written after the backup anyway survive and make the drop fail loudly.
    """
    lease = neo4j.lease(tenant, holder, info="a drop")
    with lease:
        return _drop_held(neo4j, root, tenant, keep_last, batch_size, page_size, lease.holder, sink)


def _drop_held(neo4j: Neo4jResource, root: Path, tenant: str, keep_last: int, batch_size: int,
               page_size: int, holder: str, sink: Sink | None) -> DropResult:
    started = time.perf_counter()
    backup = backup_tenant(neo4j, root, tenant, keep_last, page_size=page_size, holder=holder, sink=sink)
    external = backup.manifest.counts.external_relationships
    if external:
        raise LifecycleError(
            f"{tenant!r} has {external} relationships to nodes outside the tenant; dropping would "
            f"lose them (backup kept at {backup.path}, nothing deleted)."
        )
    reader = open_verified(root, tenant, backup.path.name)
    result = DropResult(backup)
    deleted_by_label: dict[str, int] = defaultdict(int)
    with (neo4j.session() as session,
          tracked(f"drop {tenant}", sink, total=backup.manifest.counts.nodes, unit="nodes") as progress):
        for chunk in chunks(reader.records(NODES), batch_size):
            by_key: dict[str, list[str]] = defaultdict(list)
            for node in chunk:
                by_key[node["key"]].append(node["id"])
            for key, ids in by_key.items():
                deleted = session.execute_write(queries.delete_nodes, tenant, key, ids)
                deleted_by_label[key] += deleted
                result.nodes_deleted += deleted
                result.batches += 1
                progress.advance(len(ids))
        remaining = session.execute_read(queries.tenant_node_count, tenant)
        remaining += session.execute_read(queries.unaddressable_nodes, tenant)
    result.deleted_by_label = dict(deleted_by_label)
    result.seconds = time.perf_counter() - started
    if remaining:
        raise LifecycleError(
            f"{remaining} nodes of {tenant!r} were written after the backup and were not deleted; "
            "stop writers for this tenant and drop again."
        )
    return result
