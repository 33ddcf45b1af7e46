"""Cypher writer for seed 002's conversational context graph.

Every metadata node is MERGEd on ``(user_name, id)`` — the key of the per-label uniqueness
constraints in ``schema.py`` — so a realtime writer and an offline import, even running at once,
meet on the same Character, Conversation and Scene nodes. Edges are MERGEd with the seed's fixed
directions. Memory nodes are written by the memtend memory writer (``mem_resources.memory_queries``), so they
are the same nodes dedup and reorganization work on; this module adds seed 002's properties and
the context edges. A memory that dedup already merged away hands its new context edges to its
``MERGED_TO`` successor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from neo4j import ManagedTransaction, Session

from mem_assets.context_graph.records import ACTIVE, SUPERSEDED, ContextRows
from mem_assets.ingest import queries as ingest_queries
from mem_resources import memory_queries
from mem_resources.memory_model import MemoryItem

_MERGE_CHARACTERS = """
UNWIND $rows AS row
MERGE (c:Character {user_name: $tenant, id: row.id})
SET c.character_id = row.character_id, c.name = row.name, c.display = row.display
"""

_MERGE_USERS = """
UNWIND $rows AS row
MERGE (u:User {user_name: $tenant, id: row.id})
SET u.user_id = row.user_id, u.name = row.name, u.display = row.display
"""

_MERGE_AGENTS = """
UNWIND $rows AS row
MERGE (a:Agent {user_name: $tenant, id: row.id})
SET a.agent_id = row.agent_id, a.name = row.name, a.display = row.display
WITH a, row
MATCH (c:Character {user_name: $tenant, id: row.character})
MERGE (a)-[:ACTOR]->(c)
"""

_MERGE_SCENES = """
UNWIND $rows AS row
MERGE (s:Scene {user_name: $tenant, id: row.id})
SET s.scene_id = row.scene_id, s.name = row.name, s.display = row.display
"""

_MERGE_CONVERSATIONS = """
UNWIND $rows AS row
MERGE (c:Conversation {user_name: $tenant, id: row.id})
SET c.conv_id = row.conv_id, c.name = row.name, c.display = row.display
"""

_MERGE_MEMORIES = """
UNWIND $rows AS row
MATCH (m:MemoryItem {user_name: $tenant, id: row.id}) USING INDEX m:MemoryItem(user_name, id)
SET m.point_id = coalesce(m.point_id, row.point_id),
    m.isolation = coalesce(m.isolation, row.isolation),
    m.collection = coalesce(m.collection, row.collection),
    m.exported_at = coalesce(m.exported_at, row.exported_at)
WITH m, row
OPTIONAL MATCH (m)-[:MERGED_TO*1..20]->(survivor:MemoryItem {user_name: $tenant})
WHERE NOT (survivor)-[:MERGED_TO]->()
WITH coalesce(survivor, m) AS m, row
MATCH (owner:Character {user_name: $tenant, id: row.owner})
MATCH (scene:Scene {user_name: $tenant, id: row.scene})
MATCH (conv:Conversation {user_name: $tenant, id: row.conversation})
MERGE (owner)-[:OWNS_MEMORY]->(m)
MERGE (m)-[:IN_SCENE]->(scene)
MERGE (m)-[:HAS_CHARACTER]->(owner)
MERGE (m)-[:FROM_CONV]->(conv)
MERGE (conv)-[:CONV_IN_SCENE]->(scene)
MERGE (conv)-[:CONV_HAS_CHARACTER]->(owner)
RETURN count(*) AS written
"""

_MERGE_CLAIMS = """
UNWIND $rows AS row
MATCH (ch:Character {user_name: $tenant, id: row.character})
MERGE (d:Domain {user_name: $tenant, id: row.domain_id})
ON CREATE SET d += row.domain
MERGE (ch)-[:HAS_DOMAIN]->(d)
MERGE (p:Predicate {user_name: $tenant, id: row.predicate_id})
ON CREATE SET p += row.predicate
MERGE (d)-[:HAS_PREDICATE]->(p)
MERGE (c:Claim {user_name: $tenant, id: row.id})
ON CREATE SET c += row.props
ON MATCH SET c += CASE WHEN row.props.observed_at > c.observed_at
                       THEN {status: row.props.status, confidence: row.props.confidence,
                             observed_at: row.props.observed_at,
                             superseded_by: null, superseded_at: null}
                       ELSE {} END
MERGE (p)-[:HAS_CLAIM]->(c)
WITH c, row
MATCH (m:MemoryItem {user_name: $tenant, id: row.memory}) USING INDEX m:MemoryItem(user_name, id)
OPTIONAL MATCH (m)-[:MERGED_TO*1..20]->(survivor:MemoryItem {user_name: $tenant})
WHERE NOT (survivor)-[:MERGED_TO]->()
WITH c, row, coalesce(survivor, m) AS m
MERGE (c)-[:EVIDENCED_BY]->(m)
WITH c, row WHERE row.topic IS NOT NULL
MERGE (t:Topic {user_name: $tenant, id: row.topic.id})
ON CREATE SET t.topic = row.topic.topic, t.name = row.topic.name, t.display = row.topic.display
MERGE (c)-[:ABOUT]->(t)
"""

_SUPERSEDE_CONFLICTS = """
UNWIND $predicate_ids AS predicate_id
MATCH (p:Predicate {user_name: $tenant, id: predicate_id})
WHERE p.predicate IN $single_valued
MATCH (p)-[:HAS_CLAIM]->(c:Claim {status: $active})
WITH p, c ORDER BY c.observed_at DESC, c.id DESC
WITH p, collect(c) AS claims
WHERE size(claims) > 1
WITH head(claims) AS winner, tail(claims) AS older
UNWIND older AS loser
SET loser.status = $superseded, loser.superseded_by = winner.id, loser.superseded_at = $now
RETURN loser.id AS superseded, winner.id AS winner
"""


@dataclass(frozen=True)
class WriteSummary:
    nodes_created: int
    memories: int
    claims: int
    superseded: list[tuple[str, str]]


def supersede_conflicting_claims(tx: ManagedTransaction, tenant: str, predicate_ids: list[str],
                                 single_valued: list[str], now: datetime) -> list[tuple[str, str]]:
    """For single-valued predicates, the newest active claim wins; older ones become superseded.

    Claims under one Predicate node share character, domain and predicate; a different object is
    a different Claim. Superseded claims keep their EVIDENCED_BY edges (nothing is deleted).
    Returns ``(superseded, winner)`` id pairs.
    """
    if not predicate_ids or not single_valued:
        return []
    result = tx.run(_SUPERSEDE_CONFLICTS, tenant=tenant, predicate_ids=predicate_ids,
                    single_valued=single_valued, active=ACTIVE, superseded=SUPERSEDED, now=now)
    return [(record["superseded"], record["winner"]) for record in result]


def _write(tx: ManagedTransaction, tenant: str, nodes: list[MemoryItem], rows: ContextRows,
           single_valued: list[str], now: datetime) -> WriteSummary:
    created = ingest_queries.write_memories(tx, tenant, nodes) if nodes else 0
    for query, family in (
        (_MERGE_CHARACTERS, rows.characters), (_MERGE_USERS, rows.users),
        (_MERGE_AGENTS, rows.agents), (_MERGE_SCENES, rows.scenes),
        (_MERGE_CONVERSATIONS, rows.conversations),
    ):
        tx.run(query, tenant=tenant, rows=[family[key] for key in sorted(family)]).consume()
    written = tx.run(_MERGE_MEMORIES, tenant=tenant, rows=rows.memory_rows()).single(strict=True)["written"]
    claims = sorted(rows.claims, key=lambda claim: (claim["predicate_id"], claim["id"]))
    tx.run(_MERGE_CLAIMS, tenant=tenant, rows=claims).consume()
    superseded = supersede_conflicting_claims(tx, tenant, rows.predicate_ids, single_valued, now)
    return WriteSummary(nodes_created=created, memories=written, claims=len(rows.claims),
                        superseded=superseded)


def write_context(session: Session, tenant: str, nodes: list[MemoryItem], rows: ContextRows,
                  single_valued: list[str], now: datetime) -> WriteSummary:
    """Write one batch in one transaction (retried on deadlocks with concurrent writers).

    ``nodes`` are the batch's memories not yet in the graph, written through the memtend memory
    writer (long-term node and working-memory twin); the context then attaches to them.
    """
    return session.execute_write(_write, tenant, nodes, rows, single_valued, now)


# Schema export: aggregated in Cypher, so only summary rows leave Neo4j.
#
# Nodes are grouped by label set, id prefix (``mem:``, ``char:``, …) and id format — the id after
# its prefix with every run of characters other than ``:`` and ``|`` folded to ``<x>``, and md5s,
# dates and chapters named (``<md5>``, ``<date>``, ``ch<n>``). ``tenant`` None means every tenant.
_PREFIX = ("CASE WHEN {v}.id IS :: STRING AND {v}.id CONTAINS ':' "
           "THEN split({v}.id, ':')[0] + ':' ELSE '' END")

_NODE_GROUPS = f"""
WITH labels(n) AS labels, {_PREFIX.format(v='n')} AS prefix, n.id AS id
WITH labels, prefix, CASE WHEN prefix = '' THEN '' ELSE substring(id, size(prefix)) END AS rest
WITH labels, prefix,
     CASE WHEN prefix = '' THEN ''
          WHEN rest =~ '[0-9a-f]{{32}}' THEN '<md5>'
          WHEN rest =~ '[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}' THEN '<date>'
          WHEN rest =~ 'ch[0-9]+' THEN 'ch<n>'
          ELSE reduce(shape = '', c IN split(rest, '') |
                      CASE WHEN c IN [':', '|'] THEN shape + c
                           WHEN shape ENDS WITH '<x>' THEN shape
                           ELSE shape + '<x>' END)
     END AS id_format
RETURN labels, prefix, id_format, count(*) AS count
"""

_NODE_PROPERTIES = f"""
WITH labels(n) AS labels, {_PREFIX.format(v='n')} AS prefix, keys(n) AS keys
UNWIND keys AS key
RETURN labels, prefix, key, count(*) AS count
"""

_RELATIONSHIPS = f"""
MATCH (n)-[r]->(m)
RETURN type(r) AS type,
       labels(n) AS source_labels, {_PREFIX.format(v='n')} AS source_prefix,
       labels(m) AS target_labels, {_PREFIX.format(v='m')} AS target_prefix,
       count(*) AS count,
       sum(CASE WHEN n.user_name = m.user_name THEN 0 ELSE 1 END) AS cross_tenant
"""


def tenant_nodes(tx: ManagedTransaction, tenant: str | None) -> str:
    """Cypher that binds ``n`` to each node of ``$tenant`` once. A tenant's nodes are found label
    by label (memtend's labels through their ``user_name`` indexes, another writer's labels by a
    label scan), so exporting a tenant costs its own size, not the whole database's. Labels are
    identifiers, which Cypher cannot take as parameters (a dynamic ``$(label)`` match scans every
    node in Neo4j 5.26): they come from ``db.labels()``, quoted. Nodes without any label belong
    to no node type and are left out."""
    if tenant is None:
        return "MATCH (n)\n"
    labels = [record["label"] for record in tx.run("CALL db.labels() YIELD label RETURN label ORDER BY label")]
    if not labels:
        return "UNWIND [] AS n\n"
    branches = " UNION ".join(f"MATCH (n:{memory_queries.quote_name(label)}) WHERE n.user_name = $tenant RETURN n"
                              for label in labels)
    return f"CALL () {{ {branches} }}\n"


def schema_rows(tx: ManagedTransaction, tenant: str | None) -> tuple[list[dict[str, Any]], ...]:
    """In one read transaction: one row per (labels, prefix, id_format) with its node count; one
    per (labels, prefix, property key) with how many nodes carry the key; one per (type, source
    labels/prefix, target labels/prefix) with its count and how many cross tenants."""
    nodes = tenant_nodes(tx, tenant)
    return tuple([record.data() for record in tx.run(nodes + query, tenant=tenant)]
                 for query in (_NODE_GROUPS, _NODE_PROPERTIES, _RELATIONSHIPS))


#: What MemOS 2.x's ``TextualMemoryItem`` accepts (memories/textual/item.py): a UUID id, these
#: statuses and memory types, ``sources`` and ``history`` as lists.
MEMOS_STATUSES = ["activated", "resolving", "archived", "deleted"]
MEMOS_MEMORY_TYPES = ["WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "ToolSchemaMemory",
                      "ToolTrajectoryMemory", "RawFileMemory", "SkillMemory", "PreferenceMemory", "Context"]


def memos_unreadable(tx: ManagedTransaction, tenant: str, limit: int = 20) -> list[dict[str, Any]]:
    """The tenant's MemOS memory nodes MemOS could not read back, with why (on a MemOS graph the
    session puts ``MemoryItem`` in MemOS's label; ``n['history']`` is MemOS's own property)."""
    result = tx.run(
        """
        MATCH (n:MemoryItem {user_name: $tenant})
        WITH n, [problem IN [
            CASE WHEN NOT n.id =~ '(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
                 THEN 'id is not a UUID' END,
            CASE WHEN n.status IS NOT NULL AND NOT n.status IN $statuses THEN 'unknown status' END,
            CASE WHEN n.memory_type IS NOT NULL AND NOT n.memory_type IN $types
                 THEN 'unknown memory_type' END,
            CASE WHEN n.sources IS NOT NULL AND NOT n.sources IS :: LIST<ANY> THEN 'sources is not a list' END,
            CASE WHEN n['history'] IS NOT NULL AND NOT n['history'] IS :: LIST<ANY>
                 THEN 'history is not a list' END
        ] WHERE problem IS NOT NULL] AS problems
        WHERE size(problems) > 0
        RETURN n.id AS id, problems ORDER BY id LIMIT $limit
        """,
        tenant=tenant, statuses=MEMOS_STATUSES, types=MEMOS_MEMORY_TYPES, limit=limit,
    )
    return [record.data() for record in result]
