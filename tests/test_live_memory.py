"""Dedup and reorganization agree on what a live memory is: nodes other writers put into Neo4j
without our ``status`` or ``memory_type`` are deduplicated *and* reorganized."""

from __future__ import annotations

import dagster as dg

from mem_assets.dedup import queries as dedup_queries
from mem_assets.reorg import queries as reorg_queries
from mem_resources.embedder import HashingEmbedder
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import run_reorg
from tests.support.topic_corpus import topic_memories


def _write_foreign(neo4j: Neo4jResource, tenant: str, texts: list[str]) -> None:
    """Only what a minimal foreign writer sets: no status, no memory_type, no type."""
    vectors = HashingEmbedder(dimension=neo4j.embedding_dimension).embed(texts)
    rows = [{"id": f"ext:{i}", "memory": text, "embedding": vector.tolist()}
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))]
    with neo4j.session() as session:
        session.run("UNWIND $rows AS row CREATE (m:Node:MemoryItem {user_name: $tenant}) SET m += row",
                    rows=rows, tenant=tenant).consume()


def test_foreign_nodes_without_status_are_deduplicated_and_reorganized(
        neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance):
    texts = [text for topic, text in topic_memories(per_topic=15) if topic in {"travel", "cooking"}]
    _write_foreign(neo4j, tenant, texts)
    with neo4j.session() as session:
        unchecked = session.execute_read(dedup_queries.unchecked_nodes, tenant, 1000)
        orphans = session.execute_read(reorg_queries.orphan_counts, tenant)
    assert len(unchecked) == len(texts)
    assert [(c.memory_type, c.fresh) for c in orphans] == [("LongTermMemory", len(texts))]

    result = run_reorg(neo4j, tenant, instance)
    assert result.success
    with neo4j.session() as session:
        placed = session.run(
            "MATCH (:MemoryItem {user_name: $tenant, type: 'topic'})-[:PARENT]->(m:MemoryItem) "
            "WHERE m.id STARTS WITH 'ext:' RETURN count(DISTINCT m) AS n", tenant=tenant).single()["n"]
    assert placed >= len(texts) // 2
