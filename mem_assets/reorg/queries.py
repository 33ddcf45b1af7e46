"""Cypher for the hierarchical reorganization: orphans in, summary parents and PARENT edges out.

An orphan is a live memory of the tenant (``memory_queries.live_memory``: the same predicate dedup
uses) with no PARENT edge.
Orphans that landed in a too-small cluster carry ``reorg_set_aside_at`` (and a reason) so they are
not re-clustered every cycle; orphans whose cluster did not fit in a run's time budget carry
``reorg_deferred_at`` so the next run picks them up whatever their number. Both markers are
removed when the node gets a parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from neo4j import ManagedTransaction

from mem_resources.memory_queries import live_memory

TOPIC_TYPE = "topic"

_ORPHANS = f"""
MATCH (m:MemoryItem {{user_name: $tenant}})
WHERE {live_memory("m")}
  AND NOT EXISTS {{ (m)-[:PARENT]-() }}
"""


@dataclass(frozen=True)
class OrphanCount:
    memory_type: str
    fresh: int
    set_aside: int
    deferred: int

    def eligible(self, min_group_size: int) -> bool:
        """Enough new orphans to be worth a clustering pass, or work left over by a previous run."""
        return self.fresh >= min_group_size or self.deferred > 0


@dataclass(frozen=True)
class Orphan:
    id: str
    memory_type: str
    memory: str
    embedding: np.ndarray | None
    set_aside: bool


def orphan_counts(tx: ManagedTransaction, tenant: str) -> list[OrphanCount]:
    """Per memory type: fresh orphans (never set aside), set-aside ones, deferred ones."""
    result = tx.run(
        _ORPHANS + """
        RETURN coalesce(m.memory_type, 'LongTermMemory') AS memory_type,
               count(CASE WHEN m.reorg_set_aside_at IS NULL THEN 1 END) AS fresh,
               count(m.reorg_set_aside_at) AS set_aside,
               count(m.reorg_deferred_at) AS deferred
        ORDER BY memory_type
        """,
        tenant=tenant,
    )
    return [OrphanCount(**record.data()) for record in result]


def read_orphans(tx: ManagedTransaction, tenant: str, memory_types: Sequence[str],
                 dimension: int) -> list[Orphan]:
    """All orphans of the given memory types, in no particular order (sort them in the client:
    a server-side ORDER BY would hold every embedding in the database's heap at once). Vectors
    become float32 arrays as they stream in; one of another dimension comes back as None."""
    result = tx.run(
        _ORPHANS + """
        AND coalesce(m.memory_type, 'LongTermMemory') IN $memory_types
        RETURN m.id AS id, coalesce(m.memory_type, 'LongTermMemory') AS memory_type, coalesce(m.memory, m.data, '') AS memory,
               m.embedding AS embedding, m.reorg_set_aside_at IS NOT NULL AS set_aside
        """,
        tenant=tenant, memory_types=list(memory_types),
    )
    orphans = []
    for record in result:
        vector = record["embedding"]
        embedding = (np.asarray(vector, dtype=np.float32)
                     if vector is not None and len(vector) == dimension else None)
        orphans.append(Orphan(record["id"], record["memory_type"], record["memory"], embedding,
                              record["set_aside"]))
    return orphans


def mark_set_aside(tx: ManagedTransaction, tenant: str, ids: Sequence[str], reason: str) -> int:
    """Remember orphans left out of every cluster, so only new orphans trigger another pass."""
    if not ids:
        return 0
    record = tx.run(
        """
        UNWIND $ids AS id
        MATCH (m:MemoryItem {user_name: $tenant, id: id})
        SET m.reorg_set_aside_at = coalesce(m.reorg_set_aside_at, datetime()),
            m.reorg_set_aside_reason = $reason
        REMOVE m.reorg_deferred_at
        RETURN count(m) AS marked
        """,
        tenant=tenant, ids=list(ids), reason=reason,
    ).single()
    return record["marked"] if record else 0


def mark_deferred(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> int:
    """Orphans of clusters a run had no time left for: the next run takes them first."""
    if not ids:
        return 0
    record = tx.run(
        """
        UNWIND $ids AS id
        MATCH (m:MemoryItem {user_name: $tenant, id: id})
        SET m.reorg_deferred_at = coalesce(m.reorg_deferred_at, datetime())
        REMOVE m.reorg_set_aside_at, m.reorg_set_aside_reason
        RETURN count(m) AS marked
        """,
        tenant=tenant, ids=list(ids),
    ).single()
    return record["marked"] if record else 0


@dataclass(frozen=True)
class TopicWrite:
    parents_created: int
    edges_created: int


def write_topics(tx: ManagedTransaction, tenant: str, parents: list[dict[str, Any]],
                 links: list[dict[str, str]]) -> TopicWrite:
    """Summary parents and their PARENT edges (parent → child) in one transaction: all or nothing.

    Parents are MERGEd on their deterministic id and only filled on creation, so writing the same
    clusters again changes nothing.
    """
    if any(props["user_name"] != tenant for props in parents):
        raise ValueError("a summary parent must belong to the tenant it is written for")
    created = tx.run(
        """
        UNWIND $parents AS props
        MERGE (p:MemoryItem {user_name: $tenant, id: props.id})
        ON CREATE SET p:Node, p += props
        """,
        tenant=tenant, parents=parents,
    ).consume().counters.nodes_created
    edges = tx.run(
        """
        UNWIND $links AS link
        MATCH (p:MemoryItem {user_name: $tenant, id: link.parent})
        MATCH (c:MemoryItem {user_name: $tenant, id: link.child})
        MERGE (p)-[r:PARENT]->(c)
        ON CREATE SET r.created_at = datetime()
        WITH c WHERE c.reorg_set_aside_at IS NOT NULL OR c.reorg_deferred_at IS NOT NULL
        REMOVE c.reorg_set_aside_at, c.reorg_set_aside_reason, c.reorg_deferred_at
        """,
        tenant=tenant, links=links,
    ).consume().counters.relationships_created
    return TopicWrite(parents_created=created, edges_created=edges)


def parents_on_cycles(tx: ManagedTransaction, tenant: str, limit: int = 20) -> list[str]:
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant, type: $topic})
        WHERE EXISTS { (p)-[:PARENT*1..]->(p) }
        RETURN p.id AS id ORDER BY id LIMIT $limit
        """,
        tenant=tenant, topic=TOPIC_TYPE, limit=limit,
    )
    return [record["id"] for record in result]


def parents_with_few_members(tx: ManagedTransaction, tenant: str, limit: int = 20) -> list[dict[str, Any]]:
    """Topics with fewer than two children of their own tenant (a child of another tenant counts 0)."""
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant, type: $topic})
        OPTIONAL MATCH (p)-[:PARENT]->(c:MemoryItem {user_name: $tenant})
        WITH p, count(c) AS members
        WHERE members < 2
        RETURN p.id AS id, members ORDER BY id LIMIT $limit
        """,
        tenant=tenant, topic=TOPIC_TYPE, limit=limit,
    )
    return [record.data() for record in result]


def nodes_with_two_parents_at_one_level(tx: ManagedTransaction, tenant: str,
                                        limit: int = 20) -> list[dict[str, Any]]:
    result = tx.run(
        """
        MATCH (c:MemoryItem {user_name: $tenant, status: 'activated'})<-[:PARENT]-(p:MemoryItem)
        WITH c, p.reorg_level AS level, count(p) AS parents
        WHERE parents > 1
        RETURN c.id AS id, level, parents ORDER BY id LIMIT $limit
        """,
        tenant=tenant, limit=limit,
    )
    return [record.data() for record in result]


def topic_tree(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    """Every PARENT edge of the tenant with the parent's level: for inspection and tests."""
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant, type: $topic})-[:PARENT]->(c:MemoryItem)
        RETURN p.id AS parent, p.reorg_level AS level, c.id AS child, c.type AS child_type
        ORDER BY parent, child
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    )
    return [record.data() for record in result]
