"""Cypher for dedup: unchecked nodes, candidate vectors, the judgment cache and resolutions.

Nodes written by other writers may lack our properties, so reads treat a missing ``status`` as
activated, a missing ``memory_type`` as LongTermMemory, ``data`` as the text and ``created_at``
as ``updated_at``. A node is *unchecked* until dedup stamps ``dedup_checked_at``, and again
whenever its ``updated_at`` moves past that stamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from neo4j import ManagedTransaction

from mem_resources.constraints import TENANT_SCOPED_LABELS, VECTOR_INDEX
from mem_resources.embedder import stored_vector_key
from mem_resources.graph_schema_adapter import OWN_HISTORY_PROPERTY
from mem_resources.memory_queries import Bulk, by_id, live_memory, memory_text

WORKING = "WorkingMemory"
LINEAGE_TYPES = ("MERGED_TO", "SUPERSEDED_BY")
MERGED_REASON = "merged"
SUPERSEDED_REASON = "superseded"

#: A node's properties but its vectors, as [key, value] pairs with datetimes as ISO strings:
#: the driver builds a ``neo4j.time.DateTime`` per temporal value in pure Python, which cost three
#: times the rest of the read (7.5 s vs 2.4 s for 40k nodes with three datetimes each).
_PROPS = """[k IN keys(n) WHERE NOT k IN ['embedding', 'memtend_embedding', 'reorg_vector', 'judge_vector'] |
             [k, CASE WHEN n[k] IS :: ZONED DATETIME OR n[k] IS :: LOCAL DATETIME
                      THEN toString(n[k]) ELSE n[k] END]] AS props"""


def _instant(value: Any) -> Any:
    """An ISO datetime string without a zone name after its offset ("+01:00[Europe/Paris]"):
    ``DateTime.to_native`` keeps only the offset too. Any other value as it is."""
    if isinstance(value, str) and value.endswith("]") and "[" in value and value[:4].isdigit():
        return value[:value.index("[")]
    return value


def _properties(pairs: list[list[Any]]) -> dict[str, Any]:
    """The pairs of ``_PROPS`` as a dict; on a MemOS node (whose own ``history`` is a list),
    memtend's lineage history as ``history``, None while it has none."""
    props = {key: _instant(value) for key, value in pairs}
    if OWN_HISTORY_PROPERTY in props or isinstance(props.get("history"), list):
        props["history"] = props.pop(OWN_HISTORY_PROPERTY, None)
    return props


_TEXT = memory_text("n")

_NODE = live_memory("n")
_TENANT_NODES = " UNION ".join(f"MATCH (a:{label} {{user_name: $tenant}}) RETURN a" for label in TENANT_SCOPED_LABELS)
_NOT_CHECKED_SINCE_CHANGE = "(n.dedup_checked_at IS NULL OR n.dedup_checked_at < coalesce(n.updated_at, n.created_at))"
_UNCHECKED = _NODE + " AND " + _NOT_CHECKED_SINCE_CHANGE
_FIELDS = f"""
    n.id AS id, {_TEXT} AS memory,
    coalesce(n.memory_type, 'LongTermMemory') AS memory_type,
    coalesce(n.payload_hash, '') AS payload_hash
"""


def pending_by_tenant(tx: ManagedTransaction) -> dict[str, list[str]]:
    """Unchecked node ids of every tenant that has any (the sensor's one cross-tenant read). It
    reads every MemoryItem, so the CASE makes the cheap "checked since its last change?" test
    decide first: as one AND, the planner read all seven properties of every node (1.8 s against
    0.7 s a tick at 1M nodes, bench/sensor_bench.py)."""
    result = tx.run(
        f"MATCH (n:MemoryItem) WHERE CASE WHEN {_NOT_CHECKED_SINCE_CHANGE} "
        f"THEN n.user_name IS NOT NULL AND {_NODE} ELSE false END "
        "RETURN n.user_name AS tenant, collect(n.id) AS ids",
    )
    return {record["tenant"]: record["ids"] for record in result}


def unchecked_nodes(tx: ManagedTransaction, tenant: str, limit: int) -> list[dict[str, Any]]:
    """Oldest first; ``embedding`` is a float32 array, or None when the node has none. Records
    are not converted with ``Record.data()``: its per-element walk of the vectors cost ten times
    the query."""
    result = tx.run(
        f"MATCH (n:MemoryItem {{user_name: $tenant}}) WHERE {_UNCHECKED} "
        f"RETURN {_FIELDS}, n.embedding AS embedding "
        "ORDER BY coalesce(n.updated_at, n.created_at), n.id LIMIT $limit",
        tenant=tenant, limit=limit,
    )
    keys = result.keys()
    rows = []
    for values in result:
        row = dict(zip(keys, values, strict=True))
        if row["embedding"] is not None:
            row["embedding"] = np.asarray(row["embedding"], dtype=np.float32)
        rows.append(row)
    return rows


def active_nodes(tx: ManagedTransaction, tenant: str, memory_types: Sequence[str],
                 dimension: int | None) -> tuple[list[str], list[str], list[str], np.ndarray]:
    """ids, memory types, payload hashes of every activated node of these types, and (when a
    ``dimension`` is given) their vectors as one float32 matrix; nodes without a vector of that
    dimension are left out then. Rows are converted as they stream in, to keep memory flat."""
    result = tx.run(
        f"MATCH (n:MemoryItem {{user_name: $tenant}}) WHERE {_NODE} "
        "AND coalesce(n.memory_type, 'LongTermMemory') IN $types "
        "RETURN n.id, coalesce(n.memory_type, 'LongTermMemory'), coalesce(n.payload_hash, ''), "
        "CASE WHEN $with_vectors THEN n.embedding END",
        tenant=tenant, types=list(memory_types), with_vectors=dimension is not None,
    )
    ids: list[str] = []
    types: list[str] = []
    hashes: list[str] = []
    vectors: list[np.ndarray] = []
    for node_id, memory_type, hash_, embedding in result:
        if dimension is not None:
            if embedding is None or len(embedding) != dimension:
                continue
            vectors.append(np.asarray(embedding, dtype=np.float32))
        ids.append(node_id)
        types.append(memory_type)
        hashes.append(hash_)
    matrix = np.stack(vectors) if vectors else np.zeros((0, dimension or 0), dtype=np.float32)
    return ids, types, hashes, matrix


def indexed_node_count(tx: ManagedTransaction) -> int:
    """All MemoryItem nodes, every tenant: the most the vector index can ever return."""
    return tx.run("MATCH (n:MemoryItem) RETURN count(n) AS n").single()["n"]


def set_embeddings(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]],
                   replace: bool = True) -> None:
    """Store embeddings computed for nodes that arrived without one, or with one of another size
    (``rows``: id, embedding); with ``replace`` off, only where the node has none (a vector
    another writer owns is never overwritten)."""
    tx.run(
        f"UNWIND $rows AS row MATCH (n:MemoryItem {{user_name: $tenant, id: row.id}}) {by_id('n')} "
        "WITH n, row WHERE $replace OR n.embedding IS NULL SET n.embedding = row.embedding",
        tenant=tenant, rows=Bulk(rows), replace=replace,
    ).consume()


def vector_neighbours(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]],
                      k: int, index: str = VECTOR_INDEX) -> list[dict[str, Any]]:
    """Vector-index neighbours of each row (id, memory_type, embedding) within the tenant.

    The index returns a global top-k before any filter, so each row also reports ``floor`` (the
    lowest score of the k returned) and ``returned``: the caller asks again with a larger k while
    the tenant's hits are too few and the floor is still above its threshold.
    Scores are raw cosine (the index reports (1 + cos) / 2).
    """
    result = tx.run(
        """
        UNWIND $rows AS row
        CALL db.index.vector.queryNodes($index, $k, row.embedding) YIELD node, score
        WITH row, collect({node: node, score: score}) AS hits
        RETURN row.id AS id, size(hits) AS returned,
               2 * coalesce(hits[-1].score, 0.0) - 1 AS floor,
               [h IN hits WHERE h.node.user_name = $tenant AND h.node.id <> row.id
                  AND coalesce(h.node.status, 'activated') = 'activated'
                  AND coalesce(h.node.memory_type, 'LongTermMemory') = row.memory_type
                  AND coalesce(h.node.type, 'fact') <> 'topic'
                | {id: h.node.id, score: 2 * h.score - 1}] AS neighbours
        """,
        rows=list(rows), k=k, index=index, tenant=tenant,
    )
    return [record.data() for record in result]


def mark_checked(tx: ManagedTransaction, tenant: str, ids: Sequence[str], seen_at: datetime,
                 now: datetime) -> int:
    """Stamp nodes as compared. ``seen_at`` is when their state was read: a later update by
    another writer moves ``updated_at`` past the stamp and they become unchecked again."""
    record = tx.run(
        f"""
        UNWIND $ids AS id
        MATCH (n:MemoryItem {{user_name: $tenant, id: id}}) {by_id('n')}
        SET n.dedup_checked_at = CASE WHEN coalesce(n.updated_at, n.created_at) > $now
                                      THEN coalesce(n.updated_at, n.created_at) ELSE $seen_at END
        RETURN count(n) AS marked
        """,
        tenant=tenant, ids=list(ids), seen_at=seen_at, now=now,
    ).single()
    return record["marked"] if record else 0


def cached_judgments(tx: ManagedTransaction, tenant: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    result = tx.run(
        "UNWIND $keys AS key MATCH (j:DedupJudgment {user_name: $tenant, id: key}) "
        "RETURN j.id AS key, j.label AS label, j.reason AS reason, j.near AS near, "
        "j.near_probability AS near_probability, j.stage AS stage, j.routed AS routed",
        tenant=tenant, keys=list(keys),
    )
    return {record["key"]: record.data() for record in result}


def store_judgments(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]]) -> None:
    """Cache rows (key, label, reason, judge, stage that decided, routed, judged_at); never stored
    for failed or deferred judgments."""
    tx.run(
        "UNWIND $rows AS row MERGE (j:DedupJudgment {user_name: $tenant, id: row.key}) "
        "ON CREATE SET j += row",
        tenant=tenant, rows=list(rows),
    ).consume()


def judge_vectors(tx: ManagedTransaction, tenant: str, ids: Sequence[str], space: str) -> dict[str, np.ndarray]:
    """The judge's vectors kept on these nodes, by text: only those made in ``space`` from the
    node's current text (a merge or an edit that rewrote it makes the key stale)."""
    result = tx.run(
        f"UNWIND $ids AS id MATCH (n:MemoryItem {{user_name: $tenant, id: id}}) {by_id('n')} "
        "WHERE n.judge_vector IS NOT NULL "
        f"RETURN {_TEXT} AS memory, n.judge_vector AS vector, n.judge_vector_key AS key",
        tenant=tenant, ids=list(ids),
    )
    return {record["memory"]: np.frombuffer(record["vector"], dtype="<f4")
            for record in result if record["key"] == stored_vector_key(space, record["memory"])}


def store_judge_vectors(tx: ManagedTransaction, tenant: str, rows: Sequence[tuple[str, str, np.ndarray]],
                        space: str) -> None:
    """Keep the judge's vectors (``rows``: node id, text, vector) on their nodes as float32 bytes:
    a quarter of a float list's size, and read back without building Python floats."""
    tx.run(
        f"UNWIND $rows AS row MATCH (n:MemoryItem {{user_name: $tenant, id: row.id}}) {by_id('n')} "
        "SET n.judge_vector = row.vector, n.judge_vector_key = row.key",
        tenant=tenant, rows=Bulk({"id": node, "vector": np.asarray(vector, dtype="<f4").tobytes(),
                                  "key": stored_vector_key(space, text)} for node, text, vector in rows),
    ).consume()


def lock_and_read(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Write-lock these nodes (in id order) until the transaction ends and read them as
    ``read_nodes`` does, in one round trip: each node is read after its lock is taken, so what is
    read is the committed state, and no other resolution changes it before this one commits."""
    result = tx.run(
        f"UNWIND $ids AS id MATCH (n:MemoryItem {{user_name: $tenant, id: id}}) {by_id('n')} "
        f"SET n.dedup_lock = true REMOVE n.dedup_lock RETURN n.id AS id, {_PROPS}",
        tenant=tenant, ids=sorted(ids),
    )
    return {record["id"]: _properties(record["props"]) for record in result}


def pair_sides(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What orienting a candidate pair needs of each side, by id: text, times (ISO strings) and
    arrival; reading whole nodes and building items cost more than the candidate search."""
    result = tx.run(
        f"UNWIND $ids AS id MATCH (n:MemoryItem {{user_name: $tenant, id: id}}) {by_id('n')} "
        f"RETURN n.id AS id, {_TEXT} AS text, "
        "toString(n.created_at) AS created_at, "
        "toString(n.updated_at) AS updated_at, n.arrival AS arrival",
        tenant=tenant, ids=list(ids),
    )
    return {record["id"]: {"text": record["text"], "created_at": _instant(record["created_at"]),
                           "updated_at": _instant(record["updated_at"]), "arrival": record["arrival"]}
            for record in result}


def read_nodes(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Properties by id, without the embedding (resolutions recompute it; it is the bulk), and
    with datetimes as ISO strings (``MemoryItem`` parses them)."""
    result = tx.run(
        f"UNWIND $ids AS id MATCH (n:MemoryItem {{user_name: $tenant, id: id}}) {by_id('n')} "
        f"RETURN n.id AS id, {_PROPS}",
        tenant=tenant, ids=list(ids),
    )
    return {record["id"]: _properties(record["props"]) for record in result}


#: The datetime properties a merged node may get, sent as ISO strings and made datetimes by the
#: query: the driver's packing of a Python datetime (~150 us each) was a third of a merge's
#: client time. ``$now`` is an ISO string in the resolution queries for the same reason.
_DATES = ("created_at", "updated_at", "dedup_checked_at")

#: What undoing a resolution needs of an edge it removes: its type, other end's key label, and
#: properties as [key, value] pairs with zoned datetimes as ISO strings (``dates`` names them).
_EDGE = """{type: type(r), label: head([l IN labels(CASE WHEN startNode(r) = s THEN endNode(r) ELSE startNode(r) END)
                                   WHERE l IN $key_labels]),
          props: [k IN keys(r) | [k, CASE WHEN r[k] IS :: ZONED DATETIME THEN toString(r[k]) ELSE r[k] END]],
          dates: [k IN keys(r) WHERE r[k] IS :: ZONED DATETIME]}"""

#: Archive the activated WorkingMemory twins of the nodes ``row.ids`` (bound by working_binding);
#: ``survivor`` is the variable of the node they archive into.
_ARCHIVE_TWINS = """
    UNWIND row.ids AS id
    MATCH (s:MemoryItem {{user_name: $tenant, id: id}}) USING INDEX s:MemoryItem(user_name, id)
    MATCH (w:MemoryItem {{user_name: $tenant, id: s.working_binding}}) USING INDEX w:MemoryItem(user_name, id)
    WHERE w.memory_type = $working AND coalesce(w.status, 'activated') = 'activated'
    WITH {survivor}, w, {{id: w.id, status: w.status, archived_reason: w.archived_reason,
                         archived_at: toString(w.archived_at), evolve_to: w.evolve_to}} AS before
    SET w.status = 'archived', w.archived_reason = $reason, w.archived_at = datetime($now),
        w.evolve_to = [{survivor}.id]
    RETURN count(w) AS twins, collect(before) AS twin_states
"""

#: Move the topic (PARENT) edges of the nodes ``row.ids`` onto ``survivor``, first those of
#: ``row.first``; an edge is dropped instead when the survivor already has a parent of that level.
_MOVE_PARENTS = """
    UNWIND row.ids AS id
    MATCH (s:MemoryItem {{user_name: $tenant, id: id}})<-[r:PARENT]-(p) USING INDEX s:MemoryItem(user_name, id)
    WITH {survivor}, s, r, p ORDER BY CASE WHEN s.id = row.first THEN 0 ELSE 1 END, s.id, p.id
    CALL ({survivor}, r, p) {{
        WITH {survivor}, r, p
        WHERE NOT EXISTS {{
            MATCH (q)-[:PARENT]->({survivor})
            WHERE coalesce(q.reorg_level, -1) = coalesce(p.reorg_level, -1)
        }}
        MERGE (p)-[c:PARENT]->({survivor})
        SET c += properties(r)
        RETURN count(c) AS moved
    }}
    WITH s, r, p, moved, {edge} AS edge
    DELETE r
    RETURN count(*) AS parents,
           collect(edge {{.*, dir: 'in', source: s.id, other: p.id, moved: moved > 0}}) AS parent_edges
"""


def merge_row(merged_id: str, sources: Sequence[str], template_id: str, props: dict[str, Any],
              update_type: str, reason: str) -> dict[str, Any]:
    """One merge for ``create_merged``: the merged node's id and properties, its sources and the
    source whose extra properties it copies. Datetimes travel as ISO strings (``_DATES``)."""
    return {
        "merged": merged_id, "ids": list(sources), "template": template_id, "first": template_id,
        "props": {key: value for key, value in props.items() if key not in _DATES},
        "dates": {key: props[key].isoformat() if props.get(key) is not None else None for key in _DATES},
        "update_type": update_type, "why": reason,
    }


def create_merged(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]],
                  now: datetime, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """For each ``merge_row``, in order and in one round trip: create the merged node (copying
    the template source's extra properties), move every non-lineage edge of the sources onto it,
    archive the sources and their working twins with MERGED_TO edges. Counts by merged id.

    Topic edges (incoming PARENT) move too, the template's first; one whose level the merged
    node already has is dropped, so the merged node keeps one parent per level and no topic
    keeps an archived member. Each row's subquery sees the writes of the rows before it. Also
    returns the edges it removed from the sources and the working twins' states before (what an
    undo gives back); the MERGED_TO edges carry ``run_id``."""
    result = tx.run(
        f"""
        UNWIND $rows AS row
        CALL (row) {{
            MATCH (t:MemoryItem {{user_name: $tenant, id: row.template}}) {by_id('t')}
            CREATE (m:Node:MemoryItem)
            SET m = t {{.*, id: row.merged, dedup_checked_at: null, archived_reason: null, archived_at: null}}
            SET m += row.props
            SET m.id = row.merged, m.user_name = $tenant,
                m.created_at = coalesce(datetime(row.dates.created_at), m.created_at),
                m.updated_at = coalesce(datetime(row.dates.updated_at), m.updated_at),
                m.dedup_checked_at = datetime(row.dates.dedup_checked_at)
            WITH m, row
            CALL (m, row) {{
                UNWIND row.ids AS id
                MATCH (s:MemoryItem {{user_name: $tenant, id: id}})-[r]->(o) {by_id('s')}
                WHERE NOT type(r) IN $lineage AND o <> m
                  AND NOT (o:MemoryItem AND o.user_name = $tenant AND o.id IN row.ids)
                MERGE (m)-[c:$(type(r))]->(o)
                SET c += properties(r)
                WITH s, r, o, {_EDGE} AS edge
                DELETE r
                RETURN count(*) AS moved_out, collect(edge {{.*, dir: 'out', source: s.id, other: o.id}}) AS out_edges
            }}
            CALL (m, row) {{
                UNWIND row.ids AS id
                MATCH (s:MemoryItem {{user_name: $tenant, id: id}})<-[r]-(o) {by_id('s')}
                WHERE NOT type(r) IN $lineage AND type(r) <> 'PARENT' AND o <> m
                  AND NOT (o:MemoryItem AND o.user_name = $tenant AND o.id IN row.ids)
                MERGE (o)-[c:$(type(r))]->(m)
                SET c += properties(r)
                WITH s, r, o, {_EDGE} AS edge
                DELETE r
                RETURN count(*) AS moved_in, collect(edge {{.*, dir: 'in', source: s.id, other: o.id}}) AS in_edges
            }}
            CALL (m, row) {{
                {_MOVE_PARENTS.format(survivor="m", edge=_EDGE)}
            }}
            CALL (m, row) {{
                {_ARCHIVE_TWINS.format(survivor="m")}
            }}
            CALL (m, row) {{
                UNWIND row.ids AS id
                MATCH (s:MemoryItem {{user_name: $tenant, id: id}}) {by_id('s')}
                SET s.status = 'archived', s.archived_reason = $reason, s.archived_at = datetime($now),
                    s.evolve_to = [m.id]
                CREATE (s)-[:MERGED_TO {{update_type: row.update_type, reason: row.why,
                                         created_at: datetime($now), run_id: $run_id}}]->(m)
                RETURN count(s) AS archived
            }}
            RETURN moved_out + moved_in + parents AS edges_moved, archived, twins,
                   out_edges + in_edges + parent_edges AS edges, twin_states
        }}
        RETURN row.merged AS id, edges_moved, archived, twins, edges, twin_states
        """,
        tenant=tenant, rows=Bulk(rows), lineage=list(LINEAGE_TYPES), reason=MERGED_REASON,
        now=now.isoformat(), working=WORKING, run_id=run_id, key_labels=list(TENANT_SCOPED_LABELS),
    )
    return {record["id"]: {"edges_moved": record["edges_moved"], "archived": record["archived"],
                           "twins_archived": record["twins"], "edges": record["edges"],
                           "twin_states": record["twin_states"]} for record in result}


def supersede_row(older: str, newer: str, newer_props: dict[str, Any], reason: str) -> dict[str, Any]:
    """One supersede for ``supersede``: ``older`` archived behind ``newer``, which gets ``newer_props``."""
    return {"older": older, "newer": newer, "ids": [older], "first": older, "props": newer_props,
            "why": reason}


def supersede(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]],
              now: datetime, run_id: str | None = None) -> dict[str, dict[str, Any]]:
    """For each ``supersede_row``, in order and in one round trip: archive ``older`` and its
    working twin with a SUPERSEDED_BY edge to ``newer``, move its topic edges to ``newer``
    (dropped where ``newer`` has a parent of that level), update the survivor. Its other edges
    stay: they are where the old fact came from. Counts by older id."""
    result = tx.run(
        f"""
        UNWIND $rows AS row
        CALL (row) {{
            MATCH (o:MemoryItem {{user_name: $tenant, id: row.older}}) {by_id('o')}
            MATCH (n:MemoryItem {{user_name: $tenant, id: row.newer}}) {by_id('n')}
            SET o.status = 'archived', o.archived_reason = $reason, o.archived_at = datetime($now),
                o.evolve_to = [row.newer]
            SET n += row.props
            CREATE (o)-[:SUPERSEDED_BY {{update_type: 'conflict', reason: row.why,
                                         created_at: datetime($now), run_id: $run_id}}]->(n)
            WITH n, row
            CALL (n, row) {{
                {_MOVE_PARENTS.format(survivor="n", edge=_EDGE)}
            }}
            CALL (n, row) {{
                {_ARCHIVE_TWINS.format(survivor="n")}
            }}
            RETURN parents, twins, parent_edges, twin_states
        }}
        RETURN row.older AS id, parents, twins, parent_edges, twin_states
        """,
        tenant=tenant, rows=Bulk(rows), reason=SUPERSEDED_REASON, now=now.isoformat(), working=WORKING,
        run_id=run_id, key_labels=list(TENANT_SCOPED_LABELS),
    )
    return {record["id"]: {"edges_moved": record["parents"], "twins_archived": record["twins"],
                           "edges": record["parent_edges"], "twin_states": record["twin_states"]}
            for record in result}


def duplicate_payload_hashes(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    result = tx.run(
        f"MATCH (n:MemoryItem {{user_name: $tenant}}) WHERE {_NODE} AND n.payload_hash IS NOT NULL "
        "WITH n.payload_hash AS hash, collect(n.id) AS ids WHERE size(ids) > 1 "
        "RETURN hash, ids LIMIT 20",
        tenant=tenant,
    )
    return [record.data() for record in result]


def duplicate_lineage_edges(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    """Nodes archived twice: two lineage edges to one successor, or edges to two successors."""
    result = tx.run(
        """
        MATCH (n:MemoryItem {user_name: $tenant})-[r:MERGED_TO|SUPERSEDED_BY]->(s:MemoryItem {user_name: $tenant})
        WITH n, collect(type(r) + ' ' + s.id) AS edges
        WHERE size(edges) > 1
        RETURN n.id AS id, edges LIMIT 20
        """,
        tenant=tenant,
    )
    return [record.data() for record in result]


def archived_without_successor(tx: ManagedTransaction, tenant: str) -> list[str]:
    """Archived non-working nodes with no MERGED_TO / SUPERSEDED_BY edge to an existing node
    (a fused node whose merge was undone has none by design)."""
    result = tx.run(
        """
        MATCH (n:MemoryItem {user_name: $tenant, status: 'archived'})
        WHERE coalesce(n.memory_type, 'LongTermMemory') <> $working
          AND coalesce(n.archived_reason, '') <> 'undone'
          AND NOT (n)-[:MERGED_TO|SUPERSEDED_BY]->(:MemoryItem {user_name: $tenant})
        RETURN n.id AS id LIMIT 20
        """,
        tenant=tenant, working=WORKING,
    )
    return [record["id"] for record in result]


def cross_tenant_edges(tx: ManagedTransaction, tenant: str) -> list[dict[str, Any]]:
    """Edges from the tenant's nodes (found label by label through their ``user_name`` indexes)
    to another tenant's."""
    result = tx.run(
        f"""
        CALL () {{ {_TENANT_NODES} }}
        MATCH (a)-[r]-(b)
        WHERE b.user_name IS NOT NULL AND b.user_name <> $tenant
        RETURN a.id AS node, type(r) AS type, b.id AS other, b.user_name AS other_tenant LIMIT 20
        """,
        tenant=tenant,
    )
    return [record.data() for record in result]



# --- resolution records, undo, reviews and history (see undo.py, review_queue.py, history.py) ---

_RECORD = """r {.id, .kind, .update_type, .run_id, .sources, .source_texts, .result, .text, .reason,
                .kept, .before, .edges, .twins, .undone_by,
                created_at: toString(r.created_at), applied_at: toString(r.applied_at),
                undone_at: toString(r.undone_at)}"""


def record_resolutions(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]]) -> None:
    """One ``DedupResolution`` per applied resolution, stamped with the transaction's time (a
    later round of the same run gets a later one: undo goes newest first)."""
    tx.run(
        "UNWIND $rows AS row CREATE (r:DedupResolution {user_name: $tenant, id: row.id}) "
        "SET r += row, r.created_at = datetime(), r.applied_at = datetime.statement()",
        tenant=tenant, rows=list(rows),
    ).consume()


def resolution(tx: ManagedTransaction, tenant: str, resolution_id: str) -> dict[str, Any] | None:
    record = tx.run(
        f"MATCH (r:DedupResolution {{user_name: $tenant, id: $id}}) RETURN {_RECORD} AS r",
        tenant=tenant, id=resolution_id,
    ).single()
    return record["r"] if record else None


def resolutions_of_run(tx: ManagedTransaction, tenant: str, run_id: str) -> list[dict[str, Any]]:
    """Newest first; of one moment, supersedes before merges (a supersede may retire a merge's result)."""
    result = tx.run(
        f"MATCH (r:DedupResolution {{user_name: $tenant, run_id: $run_id}}) RETURN {_RECORD} AS r "
        "ORDER BY r.applied_at DESC, r.kind DESC, r.id",
        tenant=tenant, run_id=run_id,
    )
    return [record["r"] for record in result]


def later_resolutions(tx: ManagedTransaction, tenant: str, resolution_id: str,
                      result_id: str) -> dict[str, list[str]]:
    """Resolutions not undone, applied after this one, that retired its result, or that were
    resolved onto the same result."""
    record = tx.run(
        """
        MATCH (this:DedupResolution {user_name: $tenant, id: $id})
        OPTIONAL MATCH (r:DedupResolution {user_name: $tenant})
        WHERE r.id <> $id AND r.undone_at IS NULL AND r.applied_at > this.applied_at
        WITH collect(r) AS later
        RETURN [r IN later WHERE $result IN r.sources | r.id] AS retired_result,
               [r IN later WHERE r.result = $result | r.id] AS same_result
        """,
        tenant=tenant, id=resolution_id, result=result_id,
    ).single(strict=True)
    return record.data()


def _restore_rows(before: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows setting each node's properties back: plain values, dates (ISO strings made
    datetimes again) and keys that were absent."""
    rows = []
    for node, props in before.items():
        rows.append({"id": node,
                     "props": {k: v for k, v in props.items() if v is not None and k not in _DATES + ("archived_at",)},
                     "dates": {k: v for k, v in props.items() if v is not None and k in _DATES + ("archived_at",)},
                     "absent": [k for k, v in props.items() if v is None]})
    return rows


_SET_BACK = """
    SET x += row.props
    FOREACH (k IN keys(row.dates) | SET x[k] = datetime(row.dates[k]))
    FOREACH (k IN row.absent | SET x[k] = null)
"""


def _edge_rows(edges: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": e["type"], "label": e["label"], "dir": e["dir"], "source": e["source"],
             "other": e["other"], "moved": e.get("moved", True),
             "props": {k: v for k, v in e["props"] if k not in e["dates"]},
             "dates": {k: v for k, v in e["props"] if k in e["dates"]}}
            for e in edges if e.get("label") and e.get("other")]


def undo_resolution(tx: ManagedTransaction, tenant: str, record: dict[str, Any],
                    before: dict[str, dict[str, Any]], edges: Sequence[dict[str, Any]],
                    twins: Sequence[dict[str, Any]], survivor: dict[str, Any], undo_id: str,
                    now: datetime) -> None:
    """Give back what one resolution changed (``undo._undo_one`` checked it may): the retired
    nodes' properties, their lineage edges removed, the edges taken off them (for a merge, the
    fused node's copies go; edges it got later move to the kept source), the working twins, then
    the fused node archived as undone or the survivor's history back; the record marked undone."""
    edge_rows = _edge_rows(edges)
    params = {"tenant": tenant, "result": record["result"], "sources": list(record["sources"]),
              "now": now.isoformat(), "rid": record["id"], "undo_id": undo_id}
    tx.run(
        f"""
        UNWIND $rows AS row
        MATCH (x:MemoryItem {{user_name: $tenant, id: row.id}}) {by_id('x')}
        {_SET_BACK}
        WITH x
        MATCH (x)-[l:MERGED_TO|SUPERSEDED_BY]->(:MemoryItem {{user_name: $tenant, id: $result}})
        DELETE l
        """, rows=_restore_rows(before), **params).consume()
    if record["kind"] == "merge":
        tx.run(
            f"""
            MATCH (m:MemoryItem {{user_name: $tenant, id: $result}}) {by_id('m')}
            MATCH (m)-[r]-(o)
            WHERE NOT type(r) IN $lineage
            WITH m, r, o, startNode(r) = m AS out,
                 any(e IN $edges WHERE e.type = type(r) AND e.other = o.id
                     AND (e.dir = 'out') = (startNode(r) = m)) AS recorded
            CALL (m, r, o, out, recorded) {{
                WITH m, r, o, out, recorded WHERE NOT recorded
                MATCH (k:MemoryItem {{user_name: $tenant, id: $kept}}) {by_id('k')}
                WITH k, r, o, out
                WHERE NOT (type(r) = 'PARENT' AND NOT out AND EXISTS {{
                    MATCH (q)-[:PARENT]->(k) WHERE coalesce(q.reorg_level, -1) = coalesce(o.reorg_level, -1) }})
                CALL (k, r, o, out) {{
                    WITH k, r, o, out WHERE out
                    MERGE (k)-[c:$(type(r))]->(o) SET c += properties(r)
                }}
                CALL (k, r, o, out) {{
                    WITH k, r, o, out WHERE NOT out
                    MERGE (o)-[c:$(type(r))]->(k) SET c += properties(r)
                }}
            }}
            DELETE r
            """, edges=[{"type": e["type"], "other": e["other"], "dir": e["dir"]} for e in edge_rows],
            lineage=list(LINEAGE_TYPES), kept=record["kept"], **params).consume()
    else:
        tx.run(
            """
            UNWIND $edges AS e
            MATCH (p {user_name: $tenant, id: e.other})-[c:PARENT]->(n:MemoryItem {user_name: $tenant, id: $result})
            WHERE e.moved AND e.type = 'PARENT' AND e.dir = 'in' AND e.label IN labels(p)
            DELETE c
            """, edges=edge_rows, **params).consume()
    tx.run(
        f"""
        UNWIND $edges AS e
        MATCH (s:MemoryItem {{user_name: $tenant, id: e.source}}) {by_id('s')}
        MATCH (o:$(e.label) {{user_name: $tenant, id: e.other}})
        CALL (s, o, e) {{
            WITH s, o, e WHERE e.dir = 'out'
            CREATE (s)-[x:$(e.type)]->(o)
            SET x += e.props
            FOREACH (k IN keys(e.dates) | SET x[k] = datetime(e.dates[k]))
        }}
        CALL (s, o, e) {{
            WITH s, o, e WHERE e.dir = 'in'
            CREATE (o)-[x:$(e.type)]->(s)
            SET x += e.props
            FOREACH (k IN keys(e.dates) | SET x[k] = datetime(e.dates[k]))
        }}
        """, edges=edge_rows, **params).consume()
    tx.run(
        f"""
        UNWIND $rows AS row
        MATCH (x:MemoryItem {{user_name: $tenant, id: row.id}}) {by_id('x')}
        {_SET_BACK}
        """, rows=_restore_rows({t["id"]: {k: v for k, v in t.items() if k != "id"} for t in twins}),
        **params).consume()
    if record["kind"] == "merge":
        tx.run(
            f"""
            MATCH (m:MemoryItem {{user_name: $tenant, id: $result}}) {by_id('m')}
            SET m.status = 'archived', m.archived_reason = 'undone', m.archived_at = datetime($now),
                m.undone_resolution = $rid
            """, **params).consume()
    else:
        tx.run(
            f"""
            MATCH (n:MemoryItem {{user_name: $tenant, id: $result}}) {by_id('n')}
            SET n.history = $history, n.version = $version, n.dedup_checked_at = datetime($checked)
            """, history=survivor.get("history"), version=survivor.get("version"),
            checked=survivor.get("dedup_checked_at"), **params).consume()
    tx.run(
        "MATCH (r:DedupResolution {user_name: $tenant, id: $rid}) "
        "SET r.undone_at = datetime($now), r.undone_by = $undo_id",
        **params).consume()


def store_reviews(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]]) -> None:
    """Reviewed pairs (``review_queue``): an answer replaces a pending entry of the same pair."""
    tx.run(
        "UNWIND $rows AS row MERGE (v:DedupReview {user_name: $tenant, id: row.id}) SET v += row",
        tenant=tenant, rows=list(rows),
    ).consume()


def queue_reviews(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]]) -> None:
    """Pending reviews of pairs left apart; a pair already queued or answered stays as it is."""
    tx.run(
        "UNWIND $rows AS row MERGE (v:DedupReview {user_name: $tenant, id: row.id}) "
        "ON CREATE SET v += row, v.created_at = datetime()",
        tenant=tenant, rows=list(rows),
    ).consume()


_REVIEW = """v {.id, .status, .label, .origin, .note, .first_id, .second_id, .first_text, .second_text,
                .reason, .score, .run_id, .resolution_id, .suggested,
                created_at: toString(v.created_at), answered_at: toString(v.answered_at)}"""


def reviews(tx: ManagedTransaction, tenant: str, status: str | None = None) -> list[dict[str, Any]]:
    """The tenant's reviews (``status`` pending or answered, or all), oldest first."""
    result = tx.run(
        f"MATCH (v:DedupReview {{user_name: $tenant}}) WHERE $status IS NULL OR v.status = $status "
        f"RETURN {_REVIEW} AS v ORDER BY coalesce(v.created_at, v.answered_at), v.id",
        tenant=tenant, status=status,
    )
    return [record["v"] for record in result]


def review(tx: ManagedTransaction, tenant: str, review_id: str) -> dict[str, Any] | None:
    record = tx.run(f"MATCH (v:DedupReview {{user_name: $tenant, id: $id}}) RETURN {_REVIEW} AS v",
                    tenant=tenant, id=review_id).single()
    return record["v"] if record else None


def answered_labels(tx: ManagedTransaction, tenant: str, keys: Sequence[str]) -> dict[str, str]:
    """The user's answer (label) for each of these review keys that has one."""
    result = tx.run(
        "UNWIND $keys AS key MATCH (v:DedupReview {user_name: $tenant, id: key}) "
        "WHERE v.status = 'answered' RETURN v.id AS key, v.label AS label",
        tenant=tenant, keys=list(keys),
    )
    return {record["key"]: record["label"] for record in result}


def memory_lineage(tx: ManagedTransaction, tenant: str, memory_id: str) -> dict[str, Any] | None:
    """One memory's node and every resolution record and review that names it."""
    record = tx.run(
        f"""
        MATCH (n:MemoryItem {{user_name: $tenant, id: $id}}) {by_id('n')}
        OPTIONAL MATCH (r:DedupResolution {{user_name: $tenant}}) WHERE $id IN r.sources OR r.result = $id
        WITH n, collect({_RECORD}) AS resolutions
        OPTIONAL MATCH (v:DedupReview {{user_name: $tenant}}) WHERE $id IN [v.first_id, v.second_id]
        RETURN n.id AS id, {_TEXT} AS memory, n.status AS status, n.version AS version,
               n.history AS history, toString(n.created_at) AS created_at,
               toString(n.updated_at) AS updated_at, n.archived_reason AS archived_reason,
               toString(n.archived_at) AS archived_at, n.evolve_to AS evolve_to,
               resolutions, collect({_REVIEW}) AS reviews
        """,
        tenant=tenant, id=memory_id,
    ).single()
    return record.data() if record else None


def memory_tenant_of(tx: ManagedTransaction, memory_id: str) -> list[str]:
    """The tenants holding a memory of this id (ids are per tenant)."""
    result = tx.run("MATCH (n:MemoryItem {id: $id}) RETURN DISTINCT n.user_name AS tenant", id=memory_id)
    return [record["tenant"] for record in result]


def search_memories(tx: ManagedTransaction, tenant: str, text: str, limit: int = 20) -> list[str]:
    result = tx.run(
        f"MATCH (n:MemoryItem {{user_name: $tenant}}) WHERE coalesce(n.type, 'fact') <> 'topic' "
        f"AND toLower({_TEXT}) CONTAINS toLower($text) RETURN n.id AS id ORDER BY n.id LIMIT $limit",
        tenant=tenant, text=text, limit=limit,
    )
    return [record["id"] for record in result]
