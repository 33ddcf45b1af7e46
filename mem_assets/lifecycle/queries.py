"""Cypher for a tenant's lifecycle: soft delete/undelete, and the paged reads and batched
writes that backup, restore and drop are made of.

A tenant's subgraph is every node with ``user_name = $tenant`` and every relationship between two
such nodes. Each node is addressed by its *key label* — the first of its labels in
``TENANT_SCOPED_LABELS`` — and its ``id``, which the (user_name, id) uniqueness constraint of
that label indexes. A dynamic ``$(label)`` MATCH does not use that index in Neo4j 5.26, so key
labels are backtick-quoted into the query text (:func:`quote_name`); relationship types and the
labels a node gets are parameters (``$(…)``), like every value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from neo4j import ManagedTransaction
from pydantic import AwareDatetime, BaseModel, Field

from mem_resources.constraints import TENANT_SCOPED_LABELS
from mem_resources.graph_schema_adapter import MEMOS_LABEL
from mem_resources.memory_model import MemoryStatus
from mem_resources.memory_queries import Bulk, by_id, quote_name

#: MemOS's ``Memory`` last: a MemOS graph's memories are backed up and restored like ours.
KEY_LABELS: tuple[str, ...] = (*TENANT_SCOPED_LABELS, MEMOS_LABEL)


# --- soft delete -------------------------------------------------------------------------------

class MemoryFilter(BaseModel):
    """Which memories of a tenant to (un)delete; fields combine with AND, empty means any."""

    memory_types: list[str] = Field(default_factory=list, description="memory_type in this list")
    statuses: list[str] = Field(default_factory=list, description="status in this list")
    tags: list[str] = Field(default_factory=list, description="has at least one of these tags")
    key: str | None = Field(default=None, description="exact key")
    text_contains: str | None = Field(default=None, description="memory text contains this")
    created_before: AwareDatetime | None = None
    created_after: AwareDatetime | None = None

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name in type(self).model_fields)

    def parameters(self) -> dict[str, Any]:
        return {name: getattr(self, name) or None for name in type(self).model_fields}


_BY_IDS = f"UNWIND $ids AS id MATCH (m:MemoryItem {{user_name: $tenant, id: id}}) {by_id('m')}"
_BY_TENANT = "MATCH (m:MemoryItem {user_name: $tenant})"
_FILTER_AND_TWINS = """
WHERE ($f.memory_types IS NULL OR m.memory_type IN $f.memory_types)
  AND ($f.statuses IS NULL OR m.status IN $f.statuses)
  AND ($f.tags IS NULL OR any(tag IN coalesce(m.tags, []) WHERE tag IN $f.tags))
  AND ($f.key IS NULL OR m.key = $f.key)
  AND ($f.text_contains IS NULL OR m.memory CONTAINS $f.text_contains)
  AND ($f.created_before IS NULL OR m.created_at < $f.created_before)
  AND ($f.created_after IS NULL OR m.created_at >= $f.created_after)
OPTIONAL MATCH (twin:MemoryItem {user_name: $tenant, id: m.working_binding})
WITH collect(m) + CASE WHEN $with_twins THEN collect(twin) ELSE [] END AS found
UNWIND found AS m
WITH DISTINCT m
"""


def _select(ids: list[str] | None) -> str:
    """Seek by id through the constraint index when ids are given, else scan the tenant."""
    return (_BY_IDS if ids is not None else _BY_TENANT) + _FILTER_AND_TWINS


def soft_delete(tx: ManagedTransaction, tenant: str, ids: list[str] | None, where: MemoryFilter,
                evolve_to: list[str], now: datetime, with_twins: bool = True) -> list[str]:
    """Mark matching memories ``deleted``, remembering status and evolve_to for :func:`undelete`.

    ``with_twins`` also marks the working/long-term node bound through ``working_binding``, so
    a deleted long-term memory does not live on as its working-memory copy.
    """
    result = tx.run(
        _select(ids) + """
        WHERE m.status <> $deleted
        SET m.deleted_previous_status = m.status,
            m.deleted_previous_evolve_to = coalesce(m.evolve_to, []),
            m.evolve_to = coalesce(m.evolve_to, [])
                          + [target IN $evolve_to WHERE NOT target IN coalesce(m.evolve_to, [])],
            m.status = $deleted, m.deleted_at = $now
        RETURN m.id AS id ORDER BY id
        """,
        tenant=tenant, ids=ids, f=where.parameters(), with_twins=with_twins,
        evolve_to=evolve_to, now=now, deleted=MemoryStatus.DELETED.value,
    )
    return [record["id"] for record in result]


def undelete(tx: ManagedTransaction, tenant: str, ids: list[str] | None, where: MemoryFilter,
             with_twins: bool = True) -> list[str]:
    """Bring soft-deleted memories back exactly as they were (status, evolve_to)."""
    result = tx.run(
        _select(ids) + """
        WHERE m.status = $deleted
        SET m.status = coalesce(m.deleted_previous_status, $activated),
            m.evolve_to = coalesce(m.deleted_previous_evolve_to, m.evolve_to)
        REMOVE m.deleted_previous_status, m.deleted_previous_evolve_to, m.deleted_at
        RETURN m.id AS id ORDER BY id
        """,
        tenant=tenant, ids=ids, f=where.parameters(), with_twins=with_twins,
        deleted=MemoryStatus.DELETED.value, activated=MemoryStatus.ACTIVATED.value,
    )
    return [record["id"] for record in result]


# --- reading a tenant in pages -------------------------------------------------------------------

def unaddressable_nodes(tx: ManagedTransaction, tenant: str) -> int:
    """Tenant nodes a backup could not restore: no key label, or no non-empty string ``id``.

    This scans all nodes once (no index covers ``user_name`` across labels).
    """
    record = tx.run(
        """
        MATCH (n) WHERE n.user_name = $tenant
          AND (NOT any(label IN labels(n) WHERE label IN $key_labels)
               OR NOT n.id IS :: STRING NOT NULL OR n.id = '')
        RETURN count(n) AS n
        """,
        tenant=tenant, key_labels=list(KEY_LABELS),
    ).single()
    return record["n"] if record else 0


def node_page(tx: ManagedTransaction, tenant: str, label: str, after_id: str,
              limit: int) -> list[dict[str, Any]]:
    """The next ``limit`` nodes keyed by ``label``, in id order after ``after_id`` (keyset paging).

    The hint plus ``ORDER BY user_name, id`` make the (user_name, id) constraint index deliver
    rows in order, so each page costs O(limit) however large the tenant.
    """
    earlier = list(KEY_LABELS[:KEY_LABELS.index(label)])
    result = tx.run(
        f"""
        MATCH (n:{quote_name(label)}) USING INDEX n:{quote_name(label)}(user_name, id)
        WHERE n.user_name = $tenant AND n.id > $after
          AND NOT any(other IN labels(n) WHERE other IN $earlier)
        RETURN n.id AS id, labels(n) AS labels, properties(n) AS props
        ORDER BY n.user_name, n.id LIMIT $limit
        """,
        tenant=tenant, after=after_id, earlier=earlier, limit=limit,
    )
    return [dict(zip(result.keys(), record.values(), strict=True)) for record in result]


def outgoing_relationships(tx: ManagedTransaction, tenant: str, label: str,
                           ids: list[str]) -> list[dict[str, Any]]:
    """Relationships from these nodes to nodes of the same tenant, with both ends' addresses."""
    result = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (a:{quote_name(label)} {{user_name: $tenant, id: id}})-[r]->(b)
        {by_id("a", quote_name(label))}
        WHERE b.user_name = $tenant
        RETURN a.id AS start, type(r) AS type,
               head([l IN labels(b) WHERE l IN $key_labels]) AS end_key, b.id AS end,
               properties(r) AS props
        """,
        tenant=tenant, ids=ids, key_labels=list(KEY_LABELS),
    )
    return [dict(zip(result.keys(), record.values(), strict=True)) for record in result]


def external_relationships(tx: ManagedTransaction, tenant: str, label: str, ids: list[str]) -> int:
    """Relationships between these nodes and nodes outside the tenant (never backed up)."""
    record = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (a:{quote_name(label)} {{user_name: $tenant, id: id}})-[r]-(b)
        {by_id("a", quote_name(label))}
        WHERE b.user_name IS NULL OR b.user_name <> $tenant
        RETURN count(r) AS n
        """,
        tenant=tenant, ids=ids,
    ).single()
    return record["n"] if record else 0


def tenant_node_count(tx: ManagedTransaction, tenant: str) -> int:
    """Nodes of the tenant under any key label (index seeks, no full scan)."""
    total = 0
    for label in KEY_LABELS:
        earlier = list(KEY_LABELS[:KEY_LABELS.index(label)])
        record = tx.run(
            f"MATCH (n:{quote_name(label)}) WHERE n.user_name = $tenant "
            "AND NOT any(other IN labels(n) WHERE other IN $earlier) RETURN count(n) AS n",
            tenant=tenant, earlier=earlier,
        ).single()
        total += record["n"] if record else 0
    return total


# --- restore and drop --------------------------------------------------------------------------

def merge_nodes(tx: ManagedTransaction, tenant: str, label: str,
                rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """MERGE on (label, tenant, id), then make labels and properties exactly the backup's.

    Rows: ``{"id", "labels", "props"}``. Running it twice changes nothing the second time.
    Returns what undoes it: the ids created, and ``{"id", "labels", "props"}`` as they were
    for the existing nodes it changed.
    """
    result = tx.run(
        f"""
        UNWIND $rows AS row
        OPTIONAL MATCH (old:{quote_name(label)} {{user_name: $tenant, id: row.id}})
        WITH row, old IS NULL AS created,
             CASE WHEN old IS NOT NULL AND (properties(old) <> row.props
                                            OR any(l IN row.labels WHERE NOT l IN labels(old)))
                  THEN {{id: row.id, labels: labels(old), props: properties(old)}} END AS before
        MERGE (n:{quote_name(label)} {{user_name: $tenant, id: row.id}})
        SET n = row.props
        SET n:$(row.labels)
        RETURN collect(CASE WHEN created THEN row.id END) AS created, collect(before) AS changed
        """,
        tenant=tenant, rows=Bulk(rows),
    ).single(strict=True)
    return result["created"], result["changed"]


def merge_relationships(tx: ManagedTransaction, tenant: str, start_label: str, rel_type: str,
                        end_label: str, rows: list[dict[str, Any]]
                        ) -> tuple[int, list[str], list[dict[str, Any]]]:
    """Make the (start)-[type]->(end) relationships carry exactly the backup's property maps.

    Rows: ``{"start", "end", "props": [map, ...]}``, one map per parallel relationship. Existing
    relationships (in elementId order) are updated first, missing ones created, none removed, so
    a repeated restore creates nothing. Returns the rows whose two ends were found, and what
    undoes it: the elementIds created, ``{"rel", "props"}`` as they were for those changed.
    """
    record = tx.run(
        f"""
        UNWIND $rows AS row
        MATCH (a:{quote_name(start_label)} {{user_name: $tenant, id: row.start}})
        {by_id("a", quote_name(start_label))}
        MATCH (b:{quote_name(end_label)} {{user_name: $tenant, id: row.end}})
        {by_id("b", quote_name(end_label))}
        CALL (a, b) {{
            OPTIONAL MATCH (a)-[old]->(b) WHERE type(old) = $type
            WITH old ORDER BY elementId(old)
            RETURN collect(old) AS existing
        }}
        CALL (a, b, row, existing) {{
            UNWIND range(0, size(row.props) - 1) AS i
            CALL (a, b, row, existing, i) {{
                WITH * WHERE i < size(existing)
                WITH existing[i] AS r, row.props[i] AS props
                WITH r, props, CASE WHEN properties(r) <> props THEN properties(r) END AS before
                SET r = props
                RETURN elementId(r) AS rel, before, false AS created
              UNION
                WITH * WHERE i >= size(existing)
                CREATE (a)-[r:$($type)]->(b)
                SET r = row.props[i]
                RETURN elementId(r) AS rel, null AS before, true AS created
            }}
            RETURN collect(CASE WHEN created THEN rel END) AS created,
                   collect(CASE WHEN before IS NOT NULL THEN {{rel: rel, props: before}} END) AS changed
        }}
        RETURN count(row) AS matched, collect(created) AS created, collect(changed) AS changed
        """,
        tenant=tenant, rows=rows, type=rel_type,
    ).single(strict=True)
    return (record["matched"], [rel for group in record["created"] for rel in group],
            [change for group in record["changed"] for change in group])


def undo_relationships(tx: ManagedTransaction, tenant: str, created: list[str],
                       changed: list[dict[str, Any]]) -> int:
    """Roll a failed restore back: delete the relationships it created, give back the old
    properties of those it changed. Returns how many relationships were deleted."""
    deleted = tx.run(
        """
        UNWIND $created AS rel
        MATCH (a)-[r]->() WHERE elementId(r) = rel AND a.user_name = $tenant
        DELETE r
        """,
        tenant=tenant, created=created,
    ).consume().counters.relationships_deleted
    tx.run(
        """
        UNWIND $changed AS change
        MATCH (a)-[r]->() WHERE elementId(r) = change.rel AND a.user_name = $tenant
        SET r = change.props
        """,
        tenant=tenant, changed=changed,
    ).consume()
    return deleted


def undo_node_changes(tx: ManagedTransaction, tenant: str, label: str,
                      changed: list[dict[str, Any]]) -> None:
    """Give changed nodes back their old properties and labels."""
    tx.run(
        f"""
        UNWIND $changed AS old
        MATCH (n:{quote_name(label)} {{user_name: $tenant, id: old.id}}) {by_id("n", quote_name(label))}
        SET n = old.props
        WITH n, old, [l IN labels(n) WHERE NOT l IN old.labels] AS added
        REMOVE n:$(added)
        """,
        tenant=tenant, changed=changed,
    ).consume()


def delete_nodes(tx: ManagedTransaction, tenant: str, label: str, ids: list[str]) -> int:
    """Hard-delete these nodes of the tenant and their relationships. Only the drop path calls
    this, with ids read back from a completed backup, and a failed restore, with the ids it
    created itself."""
    summary = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (n:{quote_name(label)} {{user_name: $tenant, id: id}}) {by_id("n", quote_name(label))}
        DETACH DELETE n
        """,
        tenant=tenant, ids=ids,
    ).consume()
    return summary.counters.nodes_deleted
