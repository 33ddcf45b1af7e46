"""One graph: when dedup merges memories, their context edges move to the merged node.

Exercises ``mem_assets.dedup.queries.create_merged``: create the merged node, move every
non-lineage edge of the sources onto it, archive the sources with MERGED_TO.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mem_assets.context_graph import schema_export as schema_doc
from mem_assets.context_graph.loading import (
    ContextIngestReport,
    ParsedRecord,
    write_batch,
)
from mem_assets.context_graph.records import ContextRecord, TenantContext
from mem_assets.dedup import queries as dedup
from mem_resources.embedder import HashingEmbedder
from mem_resources.memory_model import memory_id

T0 = datetime(2026, 2, 27, 12, 0, tzinfo=UTC)
PROFILE = TenantContext(user_id="xnne", agent_id="congyin", scene="chill_ai_chat")
A, B = "[User] drinks oolong.", "[User] drinks oolong tea every day."


def _write(neo4j, tenant: str, records: list[dict]) -> None:
    parsed = [ParsedRecord(i, ContextRecord.model_validate(r)) for i, r in enumerate(records, 1)]
    assert write_batch(tenant, parsed, "t.jsonl", PROFILE, neo4j, HashingEmbedder(),
                       ContextIngestReport(), T0) == []


def _edges(neo4j, tenant: str, node_id: str) -> set[tuple[str, str, str]]:
    with neo4j.session() as session:
        result = session.run("""
            MATCH (m:MemoryItem {user_name: $t, id: $id})-[r]-(o)
            RETURN type(r) AS type, CASE WHEN startNode(r) = m THEN 'out' ELSE 'in' END AS dir,
                   o.id AS other""", t=tenant, id=node_id)
        return {(r["type"], r["dir"], r["other"]) for r in result}


def test_merging_memories_moves_their_context_edges(neo4j, tenant):
    claim = {"predicate": "DRINKS", "domain": "tea", "object": "oolong"}
    _write(neo4j, tenant, [
        {"memory": A, "created_at": T0.isoformat(), "conversation": "ch00", "claims": [claim]},
        {"memory": B, "created_at": (T0 + timedelta(days=1)).isoformat()},
    ])
    with neo4j.session() as session:
        ids = {r["data"]: r["id"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) RETURN m.data AS data, m.id AS id",
            t=tenant)}
    merged = memory_id("0" * 32)
    with neo4j.session() as session:
        session.execute_write(dedup.create_merged, tenant, [dedup.merge_row(
            merged, [ids[A], ids[B]], ids[B], {"memory": B, "data": B}, "duplicate", "same habit")],
            T0 + timedelta(days=2))

    claim_id = "claim:DRINKS|tea|user:xnne|tag:oolong"
    assert _edges(neo4j, tenant, merged) >= {
        ("OWNS_MEMORY", "in", "char:xnne"), ("HAS_CHARACTER", "out", "char:xnne"),
        ("IN_SCENE", "out", "scene:chill_ai_chat"), ("FROM_CONV", "out", "conv:ch00"),
        ("FROM_CONV", "out", "conv:2026-02-28"), ("EVIDENCED_BY", "in", claim_id),
        ("MERGED_TO", "in", ids[A]), ("MERGED_TO", "in", ids[B]),
    }
    for source in (ids[A], ids[B]):
        assert {edge[0] for edge in _edges(neo4j, tenant, source)} == {"MERGED_TO"}

    _write(neo4j, tenant, [{"memory": A, "created_at": (T0 + timedelta(days=3)).isoformat()}])
    assert ("FROM_CONV", "out", "conv:2026-03-02") in _edges(neo4j, tenant, merged)
    reference = schema_doc.load_document(schema_doc.REFERENCE_PATH)
    assert schema_doc.breaking(schema_doc.diff(reference, schema_doc.export_document(neo4j, tenant))) == []


def test_merges_written_together_keep_an_edge_between_their_sources(neo4j, tenant):
    """Merges of one chunk go in one query: an edge from a source of the first to a source of the
    second ends between the two merged nodes, as if they had been written one after another."""
    texts = [A, B, "[User] walks the dog.", "[User] walks the dog every morning."]
    _write(neo4j, tenant, [{"memory": text, "created_at": (T0 + timedelta(hours=i)).isoformat()}
                           for i, text in enumerate(texts)])
    with neo4j.session() as session:
        ids = {r["data"]: r["id"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) RETURN m.data AS data, m.id AS id",
            t=tenant)}
        session.run("MATCH (a:MemoryItem {user_name: $t, id: $a}), (c:MemoryItem {user_name: $t, id: $c}) "
                    "CREATE (a)-[:RELATED_TO {why: 'test'}]->(c)", t=tenant, a=ids[A], c=ids[texts[2]]).consume()
    first, second = memory_id("1" * 32), memory_id("2" * 32)
    with neo4j.session() as session:
        counts = session.execute_write(dedup.create_merged, tenant, [
            dedup.merge_row(first, [ids[A], ids[B]], ids[B], {"memory": B, "data": B}, "duplicate", "same"),
            dedup.merge_row(second, [ids[texts[2]], ids[texts[3]]], ids[texts[3]],
                            {"memory": texts[3], "data": texts[3]}, "duplicate", "same"),
        ], T0 + timedelta(days=1))

    assert {key: value["archived"] for key, value in counts.items()} == {first: 2, second: 2}
    assert ("RELATED_TO", "out", second) in _edges(neo4j, tenant, first)
    for source in ids.values():
        assert {edge[0] for edge in _edges(neo4j, tenant, source)} == {"MERGED_TO"}
