"""Soft delete / undelete on the real Neo4j: what changes, what stays, what downstream sees."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mem_assets.dedup import queries as dedup_queries
from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.memory_nodes import build_nodes, plan
from mem_assets.ingest.parsing import MemoryItemIn
from mem_assets.lifecycle.queries import MemoryFilter
from mem_assets.lifecycle.soft_delete import soft_delete_memories, undelete_memories
from mem_assets.reorg import queries as reorg_queries
from mem_resources import memory_queries
from mem_resources.embedder import hashing_embed
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.lifecycle import T0, graph_digest, seed_tenant


def _status(neo4j: Neo4jResource, tenant: str) -> dict[str, tuple[str, list[str]]]:
    with neo4j.session() as session:
        result = session.run("MATCH (m:MemoryItem {user_name: $t}) "
                             "RETURN m.id AS id, m.status AS status, m.evolve_to AS evolve_to", t=tenant)
        return {r["id"]: (r["status"], r["evolve_to"]) for r in result}


def _long_term(neo4j: Neo4jResource, tenant: str) -> list[dict]:
    with neo4j.session() as session:
        return session.run("MATCH (m:MemoryItem {user_name: $t}) WHERE m.memory_type <> 'WorkingMemory' "
                           "RETURN m.id AS id, m.working_binding AS twin, m.key AS key ORDER BY m.key",
                           t=tenant).data()


def test_soft_delete_by_id_marks_node_and_working_twin_and_undelete_restores_exactly(
        neo4j: Neo4jResource, tenant: str):
    seed_tenant(neo4j, tenant, memory_count=4)
    other = tenant + "_other"
    seed_tenant(neo4j, other, memory_count=4)
    original, other_digest = graph_digest(neo4j, tenant), graph_digest(neo4j, other)
    target = _long_term(neo4j, tenant)[0]

    changed = soft_delete_memories(neo4j, tenant, [target["id"]], MemoryFilter(),
                                   evolve_to=["mem:newer"])

    assert sorted(changed) == sorted([target["id"], target["twin"]])
    status = _status(neo4j, tenant)
    assert status[target["id"]] == ("deleted", ["mem:newer"])
    assert status[target["twin"]][0] == "deleted"
    assert sum(s == "deleted" for s, _ in status.values()) == 2
    assert graph_digest(neo4j, other) == other_digest

    assert soft_delete_memories(neo4j, tenant, [target["id"]], MemoryFilter()) == []
    assert sorted(undelete_memories(neo4j, tenant, [target["id"]], MemoryFilter())) == sorted(changed)
    assert graph_digest(neo4j, tenant) == original


def test_undelete_returns_an_archived_memory_to_archived(neo4j: Neo4jResource, tenant: str):
    seed_tenant(neo4j, tenant, memory_count=2)
    target = _long_term(neo4j, tenant)[0]
    with neo4j.session() as session:
        session.run("MATCH (m:MemoryItem {user_name: $t, id: $id}) SET m.status = 'archived'",
                    t=tenant, id=target["id"]).consume()
    soft_delete_memories(neo4j, tenant, [target["id"]], MemoryFilter(), with_twins=False)
    assert _status(neo4j, tenant)[target["id"]][0] == "deleted"
    undelete_memories(neo4j, tenant, [target["id"]], MemoryFilter(), with_twins=False)
    assert _status(neo4j, tenant)[target["id"]][0] == "archived"


def test_soft_delete_by_filter_combines_conditions(neo4j: Neo4jResource, tenant: str):
    seed_tenant(neo4j, tenant, memory_count=6)
    where = MemoryFilter(tags=["g1"], memory_types=["LongTermMemory"],
                         created_before=T0 + timedelta(minutes=30))
    changed = soft_delete_memories(neo4j, tenant, [], where, with_twins=False)
    expected = {row["id"] for row in _long_term(neo4j, tenant) if row["key"] in {"k1", "k4"}}
    assert set(changed) == expected
    assert undelete_memories(neo4j, tenant, [], MemoryFilter(statuses=["deleted"]),
                             with_twins=False) == sorted(expected)


def test_a_selection_is_required(neo4j: Neo4jResource, tenant: str):
    with pytest.raises(ValueError, match="name the memories"):
        soft_delete_memories(neo4j, tenant, [], MemoryFilter())


def test_soft_deleted_memories_are_invisible_to_the_pipeline_reads(neo4j: Neo4jResource, tenant: str):
    """The contract: stages read status 'activated' only, and ingest never resurrects."""
    items = [MemoryItemIn(memory=f"fact {i}", created_at=T0 + timedelta(minutes=i)) for i in range(3)]
    planned = plan(tenant, items)
    nodes = build_nodes(tenant, planned, hashing_embed([p.item.memory for p in planned], neo4j.embedding_dimension), T0)
    with neo4j.session() as session:
        session.execute_write(ingest_queries.write_memories, tenant, nodes)
    doomed = planned[2]
    soft_delete_memories(neo4j, tenant, [doomed.node_id], MemoryFilter())

    with neo4j.session() as session:
        by_status = session.execute_read(memory_queries.count_by_type_and_status, tenant)
        assert by_status[("LongTermMemory", "memory", "activated")] == 2
        assert by_status[("LongTermMemory", "memory", "deleted")] == 1
        assert by_status[("WorkingMemory", "memory", "deleted")] == 1
        # Trimming to one working node archives only activated ones: the deleted twin stays deleted.
        assert session.execute_write(ingest_queries.trim_working_memory, tenant, 1, T0) == 1
        # Ingesting the same text again leaves the deleted node deleted.
        assert session.execute_write(ingest_queries.write_memories, tenant, nodes) == 0
    status = _status(neo4j, tenant)
    assert status[doomed.node_id][0] == "deleted"
    assert status[doomed.working_id][0] == "deleted"


def test_soft_deleted_memories_are_invisible_to_dedup_and_reorg_reads(neo4j: Neo4jResource,
                                                                      tenant: str):
    """The stages downstream of ingest never see a deleted memory: not as a candidate to check,
    not as a vector neighbour, not as an orphan to cluster."""
    texts = ["The user owns a red bicycle.", "The user owns a red bicycle!", "The user likes tea."]
    items = [MemoryItemIn(memory=text, created_at=T0 + timedelta(minutes=i))
             for i, text in enumerate(texts)]
    planned = plan(tenant, items)
    vectors = hashing_embed([p.item.memory for p in planned], neo4j.embedding_dimension)
    with neo4j.session() as session:
        session.execute_write(ingest_queries.write_memories, tenant,
                              build_nodes(tenant, planned, vectors, T0))
    doomed, twin_text = planned[1], planned[0]
    soft_delete_memories(neo4j, tenant, [doomed.node_id], MemoryFilter())
    live = {planned[0].node_id, planned[2].node_id}

    with neo4j.session() as session:
        unchecked = session.execute_read(dedup_queries.unchecked_nodes, tenant, 100)
        active_ids = session.execute_read(dedup_queries.active_nodes, tenant, ["LongTermMemory"], neo4j.embedding_dimension)[0]
        [neighbours] = session.execute_read(dedup_queries.vector_neighbours, tenant, [
            {"id": twin_text.node_id, "memory_type": "LongTermMemory",
             "embedding": vectors[0].tolist()}], 50)
        orphans = {orphan.id for orphan in session.execute_read(
            reorg_queries.read_orphans, tenant, ["LongTermMemory"], neo4j.embedding_dimension)}
    assert {row["id"] for row in unchecked} == live
    assert set(active_ids) == live
    assert doomed.node_id not in {hit["id"] for hit in neighbours["neighbours"]}
    assert orphans == live

    undelete_memories(neo4j, tenant, [doomed.node_id], MemoryFilter())
    with neo4j.session() as session:
        [neighbours] = session.execute_read(dedup_queries.vector_neighbours, tenant, [
            {"id": twin_text.node_id, "memory_type": "LongTermMemory",
             "embedding": vectors[0].tolist()}], 50)
    assert doomed.node_id in {hit["id"] for hit in neighbours["neighbours"]}
