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

from mem_assets.reorg.topic_vectors import is_kept_key, present, vector_key
from mem_resources.memory_queries import Bulk, live_memory, memory_text

TOPIC_TYPE = "topic"

_ORPHANS = f"""
MATCH (m:MemoryItem {{user_name: $tenant}})
WHERE {live_memory("m")}
  AND NOT EXISTS {{ (m)-[:PARENT]-() }}
"""

_TEXT = memory_text("m")


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
    reorg_vector: np.ndarray | None = None


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
    become float32 arrays as they stream in; one of another dimension comes back as None. The
    stored e5 vector comes back when it was made from the memory's current text."""
    result = tx.run(
        _ORPHANS + f"""
        AND coalesce(m.memory_type, 'LongTermMemory') IN $memory_types
        RETURN m.id AS id, coalesce(m.memory_type, 'LongTermMemory') AS memory_type, {_TEXT} AS memory,
               m.embedding AS embedding, m.reorg_set_aside_at IS NOT NULL AS set_aside,
               m.reorg_vector AS reorg_vector, m.reorg_vector_key AS reorg_vector_key
        """,
        tenant=tenant, memory_types=list(memory_types),
    )
    return [_orphan(record, dimension) for record in result]


def _stored_vector(record: Any) -> np.ndarray | None:
    """The record's stored e5 vector if it was made from the record's text by the current model."""
    stored = record["reorg_vector"]
    if stored is None:
        return None
    vector = np.asarray(stored, dtype=np.float32)
    return vector if is_kept_key(record["reorg_vector_key"], record["memory"], vector) else None


def _orphan(record: Any, dimension: int) -> Orphan:
    vector = record["embedding"]
    return Orphan(record["id"], record["memory_type"], record["memory"],
                  np.asarray(vector, dtype=np.float32) if vector is not None and len(vector) == dimension else None,
                  record["set_aside"], _stored_vector(record))


def store_reorg_vectors(tx: ManagedTransaction, tenant: str, ids: Sequence[str], vectors: np.ndarray,
                        texts: Sequence[str]) -> int:
    """Keep each memory's e5 vector on its node with the key of the text it was made from, so no
    later cycle embeds that text again."""
    if not ids:
        return 0
    record = tx.run(
        """
        UNWIND $rows AS row
        MATCH (m:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX m:MemoryItem(user_name, id)
        SET m.reorg_vector = row.vector, m.reorg_vector_key = row.key
        RETURN count(m) AS stored
        """,
        tenant=tenant,
        rows=Bulk({"id": i, "vector": v.astype(float).tolist(), "key": vector_key(text, present(v))}
                  for i, v, text in zip(ids, vectors, texts, strict=True)),
    ).single()
    return record["stored"] if record else 0


def mark_deferred(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> int:
    """Orphans of clusters a run had no time left for: the next run takes them first."""
    if not ids:
        return 0
    record = tx.run(
        """
        UNWIND $ids AS id
        MATCH (m:MemoryItem {user_name: $tenant, id: id}) USING INDEX m:MemoryItem(user_name, id)
        SET m.reorg_deferred_at = coalesce(m.reorg_deferred_at, datetime())
        REMOVE m.reorg_set_aside_at, m.reorg_set_aside_reason
        RETURN count(m) AS marked
        """,
        tenant=tenant, ids=list(ids),
    ).single()
    return record["marked"] if record else 0


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
    """Activated topics with fewer than two children of their own tenant (a child of another
    tenant counts 0); archived topics are history and keep no edges."""
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant, type: $topic})
        WHERE coalesce(p.status, 'activated') = 'activated'
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
        MATCH (c:MemoryItem {user_name: $tenant, status: 'activated'})<-[:PARENT]-(p:MemoryItem {user_name: $tenant})
        WITH c, p.reorg_level AS level, count(p) AS parents
        WHERE parents > 1
        RETURN c.id AS id, level, parents ORDER BY id LIMIT $limit
        """,
        tenant=tenant, limit=limit,
    )
    return [record.data() for record in result]


def doubled_parent_edges(tx: ManagedTransaction, tenant: str, limit: int = 20) -> list[dict[str, Any]]:
    """Parent-child pairs joined by more than one PARENT edge (a repeated write that created edges)."""
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant})-[r:PARENT]->(c:MemoryItem {user_name: $tenant})
        WITH p, c, count(r) AS edges
        WHERE edges > 1
        RETURN p.id AS parent, c.id AS child, edges ORDER BY parent, child LIMIT $limit
        """,
        tenant=tenant, limit=limit,
    )
    return [record.data() for record in result]


def topic_tree(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    """Every PARENT edge of the tenant with the parent's level: for inspection and tests."""
    result = tx.run(
        """
        MATCH (p:MemoryItem {user_name: $tenant, type: $topic})-[:PARENT]->(c:MemoryItem {user_name: $tenant})
        RETURN p.id AS parent, p.reorg_level AS level, c.id AS child, c.type AS child_type
        ORDER BY parent, child
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    )
    return [record.data() for record in result]


# -- incremental placement ------------------------------------------------------------------------

_ACTIVE_TOPIC = "coalesce({v}.status, 'activated') = 'activated' AND {v}.type = $topic"
#: A topic ``t``'s activated parent, as ``parent`` (None at the root).
_TOPIC_PARENT = f"""CALL (t) {{
            OPTIONAL MATCH (p:MemoryItem {{user_name: $tenant}})-[:PARENT]->(t)
            WHERE {_ACTIVE_TOPIC.format(v="p")}
            RETURN min(p.id) AS parent
        }}"""


@dataclass(frozen=True)
class StoredTopic:
    """An activated topic as placement reads it: level, language, centroid, parent, live children."""

    id: str
    memory_type: str
    level: int
    language: str | None
    centroid: list[float] | None
    centroid_space: str | None
    member_count: int | None
    memory: str
    parent: str | None
    children: list[str]


def read_forest(tx: ManagedTransaction, tenant: str, memory_types: Sequence[str]) -> list[StoredTopic]:
    """The tenant's activated topics of these memory types with their children (hygiene has
    moved edges off archived members before this is read). Centroids come back as stored, with
    the space they were computed in (``reorg.vectors``: the caller checks it)."""
    result = tx.run(
        f"""
        MATCH (t:MemoryItem {{user_name: $tenant}})
        WHERE {_ACTIVE_TOPIC.format(v="t")}
          AND coalesce(t.memory_type, 'LongTermMemory') IN $memory_types
        {_TOPIC_PARENT}
        CALL (t) {{
            OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {{user_name: $tenant}})
            RETURN collect(c.id) AS children
        }}
        RETURN t.id AS id, coalesce(t.memory_type, 'LongTermMemory') AS memory_type,
               coalesce(t.reorg_level, 1) AS level, t.reorg_language AS language,
               t.reorg_centroid AS centroid, t.reorg_centroid_space AS centroid_space,
               t.member_count AS member_count,
               coalesce(t.memory, '') AS memory, parent, children
        """,
        tenant=tenant, memory_types=list(memory_types), topic=TOPIC_TYPE,
    )
    topics = []
    for record in result:
        topics.append(StoredTopic(
            id=record["id"], memory_type=record["memory_type"], level=int(record["level"]),
            language=record["language"], centroid=record["centroid"], centroid_space=record["centroid_space"],
            member_count=record["member_count"], memory=record["memory"], parent=record["parent"],
            children=sorted(record["children"])))
    return topics


@dataclass(frozen=True)
class Member:
    """A topic member's text and the vectors asked for (None if not asked, absent or stale)."""

    memory: str
    embedding: np.ndarray | None
    reorg_vector: np.ndarray | None


def read_members(tx: ManagedTransaction, tenant: str, ids: Sequence[str], dimension: int,
                 main: bool = True, e5: bool = False) -> dict[str, Member]:
    """Text and vectors of the given memories: with ``main`` their ``embedding`` (None if of
    another ``dimension``), with ``e5`` their stored e5 vector (None unless made from their text)."""
    result = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (m:MemoryItem {{user_name: $tenant, id: id}}) USING INDEX m:MemoryItem(user_name, id)
        RETURN m.id AS id, {_TEXT} AS memory,
               CASE WHEN $main THEN m.embedding END AS embedding,
               CASE WHEN $e5 THEN m.reorg_vector END AS reorg_vector,
               CASE WHEN $e5 THEN m.reorg_vector_key END AS reorg_vector_key
        """,
        tenant=tenant, ids=list(ids), main=main, e5=e5,
    )
    members = {}
    for record in result:
        embedding = record["embedding"]
        members[record["id"]] = Member(
            record["memory"],
            np.asarray(embedding, dtype=np.float32) if embedding is not None and len(embedding) == dimension else None,
            _stored_vector(record) if e5 else None)
    return members


def read_texts(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, str]:
    result = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (m:MemoryItem {{user_name: $tenant, id: id}}) USING INDEX m:MemoryItem(user_name, id)
        RETURN m.id AS id, {_TEXT} AS memory
        """,
        tenant=tenant, ids=list(ids),
    )
    return {record["id"]: record["memory"] for record in result}


def read_live_memories(tx: ManagedTransaction, tenant: str, memory_types: Sequence[str],
                       dimension: int) -> list[Orphan]:
    """Every live memory of these types, placed or not: what a rebuild clusters from scratch."""
    result = tx.run(
        f"""
        MATCH (m:MemoryItem {{user_name: $tenant}})
        WHERE {live_memory("m")} AND coalesce(m.memory_type, 'LongTermMemory') IN $memory_types
        RETURN m.id AS id, coalesce(m.memory_type, 'LongTermMemory') AS memory_type,
               {_TEXT} AS memory, m.embedding AS embedding,
               m.reorg_set_aside_at IS NOT NULL AS set_aside,
               m.reorg_vector AS reorg_vector, m.reorg_vector_key AS reorg_vector_key
        """,
        tenant=tenant, memory_types=list(memory_types),
    )
    return [_orphan(record, dimension) for record in result]


def live_memory_types(tx: ManagedTransaction, tenant: str) -> list[str]:
    result = tx.run(
        f"""
        MATCH (m:MemoryItem {{user_name: $tenant}}) WHERE {live_memory("m")}
        RETURN DISTINCT coalesce(m.memory_type, 'LongTermMemory') AS memory_type ORDER BY memory_type
        """,
        tenant=tenant,
    )
    return [record["memory_type"] for record in result]


def topic_summaries(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Key, value, tags, background, version, history, last update and the digest of the
    membership the summary was written for (``topic_writer.membership_digest``) of the given topics."""
    result = tx.run(
        """
        UNWIND $ids AS id
        MATCH (t:MemoryItem {user_name: $tenant, id: id}) USING INDEX t:MemoryItem(user_name, id)
        RETURN t.id AS id, t.key AS key, t.memory AS memory, t.tags AS tags,
               t.background AS background, coalesce(t.version, 1) AS version,
               coalesce(t.history, '[]') AS history, t.updated_at AS updated_at,
               t.reorg_summary_digest AS summary_digest
        """,
        tenant=tenant, ids=list(ids),
    )
    return {record["id"]: record.data() for record in result}


def mark_set_aside_with_reasons(tx: ManagedTransaction, tenant: str, rows: list[dict[str, Any]]) -> int:
    """Unplaced memories with why: reason, nearest topic and the cosine to it, group size."""
    if not rows:
        return 0
    record = tx.run(
        """
        UNWIND $rows AS row
        MATCH (m:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX m:MemoryItem(user_name, id)
        SET m.reorg_set_aside_at = coalesce(m.reorg_set_aside_at, datetime()),
            m.reorg_set_aside_reason = row.reason,
            m.reorg_set_aside_nearest = row.nearest,
            m.reorg_set_aside_similarity = row.similarity,
            m.reorg_set_aside_group = row.group_size
        REMOVE m.reorg_deferred_at
        RETURN count(m) AS marked
        """,
        tenant=tenant, rows=rows,
    ).single()
    return record["marked"] if record else 0


def mark_waiting(tx: ManagedTransaction, tenant: str, memory_types: Sequence[str], reason: str) -> int:
    """Orphans of memory types a run leaves alone (too few new ones): recorded, not forgotten."""
    if not memory_types:
        return 0
    record = tx.run(
        _ORPHANS + """
        AND coalesce(m.memory_type, 'LongTermMemory') IN $memory_types
        AND m.reorg_set_aside_reason IS NULL
        SET m.reorg_set_aside_at = datetime(), m.reorg_set_aside_reason = $reason
        RETURN count(m) AS marked
        """,
        tenant=tenant, memory_types=list(memory_types), reason=reason,
    ).single()
    return record["marked"] if record else 0


@dataclass(frozen=True)
class UnitWrite:
    topics_created: int
    edges_created: int
    edges_removed: int
    retired: int


def write_unit(tx: ManagedTransaction, tenant: str, created: list[dict[str, Any]],
               updated: list[dict[str, Any]], children: list[dict[str, Any]],
               retired: list[dict[str, Any]]) -> UnitWrite:
    """One unit of a placement plan, whole: create new topics, retire old ones (archived,
    SUPERSEDED_BY their successor, their PARENT edges removed), update changed ones, and apply
    each touched topic's child changes (``added`` / ``removed``; set-aside markers of newly placed
    children cleared). Idempotent: ``summary_parents`` retries with the same plan, so a unit an
    earlier attempt committed is written again; edges are merged (PARENT, SUPERSEDED_BY), never
    doubled, and a retired topic keeps its first ``archived_at``."""
    if any(props["user_name"] != tenant for props in created):
        raise ValueError("a topic must belong to the tenant it is written for")
    created_nodes = tx.run(
        """
        UNWIND $created AS props
        MERGE (t:MemoryItem {user_name: $tenant, id: props.id})
        ON CREATE SET t:Node, t += props
        """,
        tenant=tenant, created=Bulk(created),
    ).consume().counters.nodes_created
    retire_counters = tx.run(
        """
        UNWIND $retired AS row
        MATCH (o:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX o:MemoryItem(user_name, id)
        MATCH (n:MemoryItem {user_name: $tenant, id: row.successor}) USING INDEX n:MemoryItem(user_name, id)
        WITH o, n, row, CASE WHEN o.status = 'archived' THEN o.archived_at END AS archived_at
        SET o.status = 'archived', o.archived_reason = row.reason, o.archived_at = coalesce(archived_at, datetime()),
            o.evolve_to = [row.successor]
        MERGE (o)-[s:SUPERSEDED_BY {update_type: 'reorganized'}]->(n)
        ON CREATE SET s.reason = row.reason, s.created_at = datetime()
        WITH o
        OPTIONAL MATCH (o)-[r:PARENT]-()
        DELETE r
        """,
        tenant=tenant, retired=retired,
    ).consume().counters
    tx.run(
        """
        UNWIND $updated AS row
        MATCH (t:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX t:MemoryItem(user_name, id)
        SET t += row.props
        """,
        tenant=tenant, updated=updated,
    ).consume()
    removed = tx.run(
        """
        UNWIND $children AS row
        MATCH (t:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX t:MemoryItem(user_name, id)
        UNWIND row.removed AS child
        MATCH (t)-[r:PARENT]->(:MemoryItem {user_name: $tenant, id: child})
        DELETE r
        """,
        tenant=tenant, children=[row for row in children if row["removed"]],
    ).consume().counters.relationships_deleted
    edges = tx.run(
        """
        UNWIND $children AS row
        MATCH (t:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX t:MemoryItem(user_name, id)
        UNWIND row.added AS child
        MATCH (c:MemoryItem {user_name: $tenant, id: child})
        MERGE (t)-[r:PARENT]->(c) ON CREATE SET r.created_at = datetime()
        WITH c WHERE c.reorg_set_aside_at IS NOT NULL OR c.reorg_deferred_at IS NOT NULL
        REMOVE c.reorg_set_aside_at, c.reorg_set_aside_reason, c.reorg_set_aside_nearest,
               c.reorg_set_aside_similarity, c.reorg_set_aside_group, c.reorg_deferred_at
        """,
        tenant=tenant, children=[row for row in children if row["added"]],
    ).consume().counters.relationships_created
    return UnitWrite(topics_created=created_nodes, edges_created=edges,
                     edges_removed=removed + retire_counters.relationships_deleted,
                     retired=len(retired))


# -- hygiene --------------------------------------------------------------------------------------

def move_edges_off_archived(tx: ManagedTransaction, tenant: str) -> dict[str, int]:
    """PARENT edges from activated topics to archived members: moved to the member's activated
    successor (following MERGED_TO / SUPERSEDED_BY), or dropped when the successor already has a
    topic at that level (or there is none)."""
    record = tx.run(
        f"""
        MATCH (p:MemoryItem {{user_name: $tenant}})-[r:PARENT]->(c:MemoryItem {{user_name: $tenant, status: 'archived'}})
        WHERE {_ACTIVE_TOPIC.format(v="p")}
        OPTIONAL MATCH path = (c)-[:MERGED_TO|SUPERSEDED_BY*1..10]->(s:MemoryItem {{user_name: $tenant}})
        WHERE coalesce(s.status, 'activated') = 'activated'
        WITH p, r, c, s ORDER BY length(path)
        WITH p, r, c, head(collect(s)) AS s
        CALL (p, s) {{
            WITH p, s WHERE s IS NOT NULL AND NOT EXISTS {{
                MATCH (q:MemoryItem {{user_name: $tenant}})-[:PARENT]->(s)
                WHERE {_ACTIVE_TOPIC.format(v="q")} AND coalesce(q.reorg_level, 1) = coalesce(p.reorg_level, 1)
            }}
            MERGE (p)-[e:PARENT]->(s) ON CREATE SET e.created_at = datetime()
            RETURN count(*) AS moved
        }}
        DELETE r
        RETURN count(r) AS edges, sum(moved) AS moved
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    ).single()
    edges = record["edges"] if record else 0
    moved = record["moved"] if record and record["moved"] else 0
    return {"moved": moved, "dropped": edges - moved}


def dissolve_thin_topics(tx: ManagedTransaction, tenant: str, reason: str) -> list[dict[str, Any]]:
    """Archive activated topics left with fewer than two activated children; each points
    (SUPERSEDED_BY) at its parent topic, else at its remaining child, and loses its PARENT edges
    (the remaining child is free to be placed again). A topic with no successor at all stays."""
    result = tx.run(
        f"""
        MATCH (t:MemoryItem {{user_name: $tenant}})
        WHERE {_ACTIVE_TOPIC.format(v="t")}
        OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {{user_name: $tenant}})
        WHERE coalesce(c.status, 'activated') = 'activated'
        WITH t, collect(c) AS kids WHERE size(kids) < 2
        OPTIONAL MATCH (p:MemoryItem {{user_name: $tenant}})-[:PARENT]->(t)
        WHERE {_ACTIVE_TOPIC.format(v="p")}
        WITH t, kids, head(collect(p)) AS p
        WITH t, coalesce(p, head(kids)) AS s
        WHERE s IS NOT NULL
        SET t.status = 'archived', t.archived_reason = $reason, t.archived_at = datetime(),
            t.evolve_to = [s.id]
        CREATE (t)-[:SUPERSEDED_BY {{update_type: 'reorganized', reason: $reason, created_at: datetime()}}]->(s)
        WITH t, s
        OPTIONAL MATCH (t)-[r:PARENT]-()
        DELETE r
        RETURN t.id AS id, s.id AS successor
        """,
        tenant=tenant, topic=TOPIC_TYPE, reason=reason,
    )
    return [record.data() for record in result]


def recount_topics(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> None:
    """member_count of level-1 topics from their activated children; of level-2 from their sub-topics."""
    tx.run(
        """
        UNWIND $ids AS id
        MATCH (t:MemoryItem {user_name: $tenant, id: id}) USING INDEX t:MemoryItem(user_name, id)
        OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {user_name: $tenant})
        WHERE coalesce(c.status, 'activated') = 'activated'
        WITH t, c, CASE WHEN c.type = $topic THEN coalesce(c.member_count, 0) ELSE 1 END AS weight
        WITH t, count(c) AS children, sum(weight) AS members
        SET t.member_count = members, t.reorg_member_count = children, t.updated_at = datetime()
        """,
        tenant=tenant, ids=list(ids), topic=TOPIC_TYPE,
    ).consume()


# -- checks ---------------------------------------------------------------------------------------

def unexplained_orphans(tx: ManagedTransaction, tenant: str, older_than_hours: float,
                        limit: int = 20) -> list[dict[str, Any]]:
    """Live memories older than a cycle with neither a topic nor a recorded reason."""
    result = tx.run(
        _ORPHANS + """
        AND m.reorg_set_aside_reason IS NULL AND m.reorg_deferred_at IS NULL
        AND m.created_at < datetime() - duration({seconds: toInteger($seconds)})
        RETURN m.id AS id, m.memory_type AS memory_type ORDER BY id LIMIT $limit
        """,
        tenant=tenant, seconds=older_than_hours * 3600, limit=limit,
    )
    return [record.data() for record in result]


def topic_sizes(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    result = tx.run(
        f"""
        MATCH (t:MemoryItem {{user_name: $tenant}}) WHERE {_ACTIVE_TOPIC.format(v="t")}
        RETURN coalesce(t.reorg_level, 1) AS level, coalesce(t.member_count, t.reorg_member_count, 0) AS members
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    )
    return [record.data() for record in result]


def topic_children(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Key and activated children of the given topics (sub-topics a level-2 summary reads)."""
    result = tx.run(
        """
        UNWIND $ids AS id
        MATCH (t:MemoryItem {user_name: $tenant, id: id}) USING INDEX t:MemoryItem(user_name, id)
        OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {user_name: $tenant})
        WHERE coalesce(c.status, 'activated') = 'activated'
        WITH t, c ORDER BY c.id
        RETURN t.id AS id, t.key AS key, collect(c.id) AS children
        """,
        tenant=tenant, ids=list(ids),
    )
    return {record["id"]: {"key": record["key"], "children": list(record["children"])} for record in result}


def owed_summaries(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    """Activated topics written with an offline summary in place of the LLM's because the run's
    budget was spent (``reorg_summary_owed``), as plan rows need them: level,
    language, centroid, counts, parent and activated children."""
    result = tx.run(
        f"""
        MATCH (t:MemoryItem {{user_name: $tenant}})
        WHERE t.reorg_summary_owed = true AND {_ACTIVE_TOPIC.format(v="t")}
        {_TOPIC_PARENT}
        CALL (t) {{
            OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {{user_name: $tenant}})
            WHERE coalesce(c.status, 'activated') = 'activated'
            WITH c ORDER BY c.id
            RETURN collect(c.id) AS children
        }}
        RETURN t.id AS id, coalesce(t.memory_type, 'LongTermMemory') AS memory_type,
               coalesce(t.reorg_level, 1) AS level, t.reorg_language AS language,
               t.reorg_centroid AS centroid, t.reorg_centroid_space AS space,
               coalesce(t.member_count, t.reorg_member_count, 0) AS member_count, parent, children
        ORDER BY id
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    )
    return [record.data() for record in result]


def owed_summary_count(tx: ManagedTransaction, tenant: str) -> int:
    """Activated topics still owed an LLM summary."""
    record = tx.run(
        f"""
        MATCH (t:MemoryItem {{user_name: $tenant}})
        WHERE t.reorg_summary_owed = true AND {_ACTIVE_TOPIC.format(v="t")}
        RETURN count(t) AS owed
        """,
        tenant=tenant, topic=TOPIC_TYPE,
    ).single()
    return int(record["owed"]) if record else 0
