"""A realistic small tenant for lifecycle tests, and an independent digest of a tenant's graph."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytz
from neo4j.spatial import CartesianPoint, WGS84Point
from neo4j.time import Date, DateTime, Duration, Time

from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.memory_nodes import build_nodes, plan
from mem_assets.ingest.parsing import MemoryItemIn
from mem_assets.lifecycle.backup_codec import encode_properties
from mem_resources.embedder import hashing_embed
from mem_resources.memory_model import MemoryType
from mem_resources.neo4j_resource import Neo4jResource

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
TEXTS = [
    "The user has a cat named Mochi.", "用户住在北京。", "The user prefers green tea.",
    "用户下周去上海出差。", "The user is allergic to peanuts.", "The user's sister is Anna.",
]
EXOTIC = {
    "when_zoned": pytz.timezone("Europe/Berlin").localize(DateTime(2026, 3, 29, 3, 30, 0, 123456789)),
    "when_offset": DateTime(2026, 1, 2, 3, 4, 5, 987654321, tzinfo=pytz.FixedOffset(-330)),
    "when_local": DateTime(2026, 1, 2, 3, 4, 5, 1),
    "day": Date(2026, 2, 28),
    "clock": Time(3, 4, 5, 7, tzinfo=pytz.FixedOffset(60)),
    "wall_clock": Time(23, 59, 59, 999999999),
    "span": Duration(months=14, days=3, seconds=14706, nanoseconds=7),
    "place": WGS84Point((13.4, 52.5)),
    "spot": CartesianPoint((1.0, 2.0, 3.0)),
    "blob": bytearray(b"\x00\xffmemtend"),
    "stamps": [DateTime(2026, 1, 1, 0, 0, 0, 5, tzinfo=pytz.UTC)],
    "weights": [0.1, 1e-300, -2.5],
    "flags": [True, False],
    "count": 7,
    "ratio": 7.0,
    "note": "中文 and \"quotes\"\nnewline",
}


def seed_tenant(neo4j: Neo4jResource, tenant: str, memory_count: int = 12) -> None:
    """Long-term memories with working twins (via the ingest planner), one node of every other
    key label, and relationships: typed, with properties, parallel, and a self-loop."""
    items = [MemoryItemIn(memory=f"{TEXTS[i % len(TEXTS)]} ({i})", created_at=T0 + timedelta(minutes=i),
                          tags=["t", f"g{i % 3}"], key=f"k{i}",
                          memory_type=MemoryType.USER if i % 5 == 0 else MemoryType.LONG_TERM)
             for i in range(memory_count)]
    planned = plan(tenant, items)
    nodes = build_nodes(tenant, planned, hashing_embed([p.item.memory for p in planned], neo4j.embedding_dimension), T0)
    ids = [p.node_id for p in planned]
    with neo4j.session() as session:
        session.execute_write(ingest_queries.write_memories, tenant, nodes)
        session.execute_write(ingest_queries.record_ingested_files, tenant, [{
            "sha256": "ab" * 32, "path": "/inbox/x.jsonl", "name": "x.jsonl", "ingested_at": T0}])
        session.run(
            """
            MERGE (c:Character {user_name: $tenant, id: 'char:mochi'}) SET c.name = 'Mochi'
            MERGE (v:Conversation {user_name: $tenant, id: 'conv:1'}) SET v.started_at = $t0
            MERGE (t:Topic:Node {user_name: $tenant, id: 'topic:home'}) SET t += $exotic
            WITH c, v, t
            MATCH (a:MemoryItem {user_name: $tenant, id: $ids[0]}),
                  (b:MemoryItem {user_name: $tenant, id: $ids[1]}),
                  (z:MemoryItem {user_name: $tenant, id: $ids[2]})
            CREATE (a)-[:PARENT]->(t), (b)-[:PARENT]->(t),
                   (a)-[:MENTIONS {weight: 0.5, at: $t0}]->(c),
                   (a)-[:MENTIONS {weight: 0.9}]->(c),
                   (v)-[:CONTAINS {turn: 1}]->(a),
                   (z)-[:MERGED_TO {reason: 'duplicate'}]->(a),
                   (t)-[:RELATED_TO]->(t)
            """,
            tenant=tenant, ids=ids, t0=T0, exotic=EXOTIC,
        ).consume()


def graph_digest(neo4j: Neo4jResource, tenant: str) -> str:
    """sha256 over the tenant's nodes and relationships, independent of elementIds and of the
    backup code: labels, every property (type-tagged) and each relationship's two ends."""
    with neo4j.session() as session:
        nodes = session.run(
            "MATCH (n) WHERE n.user_name = $tenant RETURN labels(n) AS labels, properties(n) AS props",
            tenant=tenant).data()
        rels = session.run(
            "MATCH (a)-[r]->(b) WHERE a.user_name = $tenant AND b.user_name = $tenant "
            "RETURN labels(a) AS la, a.id AS a, type(r) AS type, labels(b) AS lb, b.id AS b, "
            "properties(r) AS props", tenant=tenant).data()
    lines = sorted(json.dumps([sorted(n["labels"]), encode_properties(n["props"])], sort_keys=True)
                   for n in nodes)
    lines += sorted(json.dumps([sorted(r["la"]), r["a"], r["type"], sorted(r["lb"]), r["b"],
                                encode_properties(r["props"])], sort_keys=True) for r in rels)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def counts(neo4j: Neo4jResource, tenant: str) -> tuple[int, int]:
    with neo4j.session() as session:
        record = session.run(
            "MATCH (n) WHERE n.user_name = $tenant "
            "OPTIONAL MATCH (n)-[r]->() RETURN count(DISTINCT n) AS nodes, count(r) AS rels",
            tenant=tenant).single()
    return record["nodes"], record["rels"]
