"""Backup, restore and drop of one tenant, streaming page by page in bounded memory."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby, islice
from pathlib import Path
from typing import Any, TypeVar

from neo4j import ManagedTransaction, Session

from mem_assets.lifecycle import queries
from mem_assets.lifecycle.archive import (
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
from mem_assets.lifecycle.codec import decode_properties, encode_properties
from mem_resources.neo4j_resource import Neo4jResource

T = TypeVar("T")


class LifecycleError(RuntimeError):
    """The tenant is not in a state the operation can safely handle; nothing was deleted."""


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


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


def backup_tenant(neo4j: Neo4jResource, root: Path, tenant: str, keep_last: int,
                  page_size: int = 1000, compresslevel: int = 1) -> BackupResult:
    """Stream the tenant's nodes (keyset pages per key label) and their relationships to disk,
    publish the backup, then rotate older ones away."""
    check_tenant(tenant)
    if keep_last < 1:
        raise ValueError("keep_last must be at least 1")
    started = time.perf_counter()
    with neo4j.session() as session:
        unaddressable = session.execute_read(queries.unaddressable_nodes, tenant)
        if unaddressable:
            raise LifecycleError(
                f"{unaddressable} nodes of {tenant!r} have no key label "
                f"({', '.join(queries.KEY_LABELS)}) or no string id; a backup could not restore "
                "them. Add their label to TENANT_SCOPED_LABELS in mem_resources/graph/schema.py."
            )
        with BackupWriter(root, tenant, compresslevel=compresslevel) as writer:
            for page in _pages(session, tenant, page_size):
                for node in page.nodes:
                    writer.write_node(node["id"], node["labels"], page.label,
                                      encode_properties(node["props"]))
                rels = sorted(page.relationships, key=_rel_group)
                for (start, rel_type, end_key, end), group in groupby(rels, key=_rel_group):
                    writer.write_relationships(page.label, start, rel_type, end_key, end,
                                               [encode_properties(r["props"]) for r in group])
                writer.external_relationships += page.external
            manifest = writer.commit()
    rotated = rotate(root, tenant, keep_last)
    return BackupResult(writer.final_path, manifest, rotated, time.perf_counter() - started)


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


def restore_tenant(neo4j: Neo4jResource, root: Path, tenant: str, backup_id: str | None = None,
                   batch_size: int = 500) -> RestoreResult:
    """Verify the backup, then MERGE its nodes and relationships back in batches (idempotent)."""
    started = time.perf_counter()
    reader = open_verified(root, tenant, backup_id)
    result = RestoreResult(reader.path, reader.manifest, verify_seconds=time.perf_counter() - started)
    with neo4j.session() as session:
        for node_batch in _node_batches(reader, batch_size):
            for key, rows in node_batch.items():
                result.nodes_created += session.execute_write(queries.merge_nodes, tenant, key, rows)
                result.nodes += len(rows)
        for rel_batch in _relationship_batches(reader, batch_size):
            for (start_key, rel_type, end_key), rows in rel_batch.items():
                matched, created = session.execute_write(
                    queries.merge_relationships, tenant, start_key, rel_type, end_key, rows)
                if matched != len(rows):
                    raise BackupError(f"{reader.path}: {len(rows) - matched} {rel_type} "
                                      "relationships point at nodes missing from the backup")
                result.relationships += sum(len(row["props"]) for row in rows)
                result.relationships_created += created
    result.seconds = time.perf_counter() - started
    return result


def drop_tenant(neo4j: Neo4jResource, root: Path, tenant: str, keep_last: int,
                batch_size: int = 1000, page_size: int = 1000) -> DropResult:
    """Back the tenant up, then hard-delete exactly the nodes in that backup, batch by batch.

    Ids come from the backup file on disk (re-verified), so nothing is deleted that is not in a
    completed backup. Nodes written after the backup survive and make the drop fail loudly.
    """
    started = time.perf_counter()
    backup = backup_tenant(neo4j, root, tenant, keep_last, page_size=page_size)
    external = backup.manifest.counts.external_relationships
    if external:
        raise LifecycleError(
            f"{tenant!r} has {external} relationships to nodes outside the tenant; dropping would "
            f"lose them (backup kept at {backup.path}, nothing deleted)."
        )
    reader = open_verified(root, tenant, backup.path.name)
    result = DropResult(backup)
    deleted_by_label: dict[str, int] = defaultdict(int)
    with neo4j.session() as session:
        for chunk in chunks(reader.records(NODES), batch_size):
            by_key: dict[str, list[str]] = defaultdict(list)
            for node in chunk:
                by_key[node["key"]].append(node["id"])
            for key, ids in by_key.items():
                deleted = session.execute_write(queries.delete_nodes, tenant, key, ids)
                deleted_by_label[key] += deleted
                result.nodes_deleted += deleted
                result.batches += 1
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
