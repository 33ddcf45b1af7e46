"""Cypher for ingest: memory nodes written once (MERGE on tenant and id), working-memory
trimming, and the ledger of ingested files."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from neo4j import ManagedTransaction

from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.memory_model import MemoryItem, MemoryStatus, MemoryType
from mem_resources.memory_queries import Bulk, by_id

WORKING_TRIM_REASON = "working_memory_trim"


def existing_ids(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> set[str]:
    result = tx.run(
        f"UNWIND $ids AS id MATCH (m:MemoryItem {{user_name: $tenant, id: id}}) {by_id('m')} "
        "RETURN m.id AS id",
        tenant=tenant, ids=list(ids),
    )
    return {record["id"] for record in result}


def wire_rows(nodes: Iterable[MemoryItem], dialect: GraphDialect = SEED_DIALECT) -> list[dict[str, Any]]:
    """Node properties (in ``dialect``'s shape) with timestamps as ISO strings: the driver packs
    aware datetimes slowly, so the query turns them into Neo4j datetimes with ``datetime()``."""
    rows = []
    for node in nodes:
        props = node.to_properties(dialect)
        created, updated = props.pop("created_at"), props.pop("updated_at")
        rows.append({"props": props, "created_at": created.isoformat(),
                     "updated_at": updated.isoformat()})
    return rows


def write_memories(tx: ManagedTransaction, tenant: str, nodes: Iterable[MemoryItem],
                   dialect: GraphDialect = SEED_DIALECT) -> int:
    """MERGE on (tenant, id): an item already present is left exactly as it is."""
    rows = wire_rows(nodes, dialect)
    if any(row["props"]["user_name"] != tenant for row in rows):
        raise ValueError(f"refusing to write nodes of another tenant into {tenant!r}")
    summary = tx.run(
        """
        UNWIND $rows AS row
        MERGE (m:MemoryItem {user_name: $tenant, id: row.props.id})
        ON CREATE SET m:Node, m += row.props,
                      m.created_at = datetime(row.created_at), m.updated_at = datetime(row.updated_at)
        """,
        tenant=tenant, rows=Bulk(rows),
    ).consume()
    return summary.counters.nodes_created


def trim_working_memory(tx: ManagedTransaction, tenant: str, capacity: int, now: datetime) -> int:
    """Archive the oldest activated WorkingMemory nodes beyond ``capacity`` (FIFO, never delete).
    Runs with every ingest chunk: the index hint keeps it to the working nodes, however many
    long-term memories the tenant has."""
    record = tx.run(
        """
        MATCH (w:MemoryItem {user_name: $tenant, memory_type: $working, status: $activated})
        USING INDEX w:MemoryItem(user_name, memory_type, status)
        WITH w ORDER BY w.updated_at DESC, w.id DESC
        SKIP $capacity
        SET w.status = $archived, w.archived_reason = $reason, w.archived_at = $now
        RETURN count(w) AS trimmed
        """,
        tenant=tenant, capacity=capacity, now=now, working=MemoryType.WORKING.value,
        activated=MemoryStatus.ACTIVATED.value, archived=MemoryStatus.ARCHIVED.value,
        reason=WORKING_TRIM_REASON,
    ).single()
    return record["trimmed"] if record else 0


def ingested_file_hashes(tx: ManagedTransaction, tenant: str) -> set[str]:
    result = tx.run("MATCH (f:IngestedFile {user_name: $tenant}) RETURN f.sha256 AS sha", tenant=tenant)
    return {record["sha"] for record in result}


def record_ingested_files(tx: ManagedTransaction, tenant: str, files: Sequence[dict[str, Any]]) -> None:
    """Ledger entries keyed by content hash: the same bytes are never ingested twice."""
    tx.run(
        """
        UNWIND $files AS file
        MERGE (f:IngestedFile {user_name: $tenant, id: 'file:' + file.sha256})
        ON CREATE SET f += file
        """,
        tenant=tenant, files=list(files),
    ).consume()
