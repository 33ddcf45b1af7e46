"""Reorganization on the real Neo4j: flat memories on known topics become a two-level topic tree."""

from __future__ import annotations

from collections import Counter, defaultdict

import dagster as dg
import pytest

from mem_assets.reorg import queries
from mem_resources.memory_model import MemoryType
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import (
    EMBEDDER,
    graph_counts,
    materialization_metadata,
    run_reorg,
    write_memories,
)
from tests.support.topic_corpus import topic_memories


def _purity(groups: dict[str, list[str]], topic_of: dict[str, str]) -> float:
    total = sum(len(members) for members in groups.values())
    majority = sum(Counter(topic_of[m] for m in members).most_common(1)[0][1]
                   for members in groups.values())
    return majority / total


@pytest.fixture(scope="module")
def module_instance():
    """One instance for the module, since ``reorganized`` is built once per module."""
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture(scope="module")
def reorganized(neo4j: Neo4jResource, module_instance: dg.DagsterInstance):
    """250 memories on five topics in one tenant, reorganized once; and an untouched neighbour."""
    tenant, neighbour = "reorg_tree_a", "reorg_tree_b"
    with neo4j.session() as session:
        session.run("MATCH (n) WHERE n.user_name IN $tenants DETACH DELETE n",
                    tenants=[tenant, neighbour]).consume()
    corpus = topic_memories(per_topic=50)
    ids = write_memories(neo4j, tenant, [text for _, text in corpus])
    working = write_memories(neo4j, tenant, [text for _, text in corpus[:30]], MemoryType.WORKING)
    write_memories(neo4j, neighbour, [text for _, text in corpus])
    result = run_reorg(neo4j, tenant, module_instance)
    return {"tenant": tenant, "neighbour": neighbour, "result": result, "working": working,
            "topic_of": {node: topic for node, (topic, _) in zip(ids, corpus, strict=True)}}


def test_flat_memories_become_a_two_level_tree_that_follows_the_topics(neo4j, reorganized):
    tenant, topic_of = reorganized["tenant"], reorganized["topic_of"]
    with neo4j.session() as session:
        edges = session.execute_read(queries.topic_tree, tenant)
    children: dict[str, list[str]] = defaultdict(list)
    level: dict[str, int] = {}
    for edge in edges:
        children[edge["parent"]].append(edge["child"])
        level[edge["parent"]] = edge["level"]
    leaf_parents = {p: kids for p, kids in children.items() if level[p] == 1}
    top = {p: kids for p, kids in children.items() if level[p] == 2}
    assert top, "no topic got sub-topics"
    assert all(len(kids) >= 2 and all(level.get(k) == 1 for k in kids) for kids in top.values())
    assert all(all(k in topic_of for k in kids) for kids in leaf_parents.values())
    assert all(len(kids) <= 20 for kids in leaf_parents.values())
    parent_of = Counter(child for kids in leaf_parents.values() for child in kids)
    assert max(parent_of.values()) == 1
    assert len(parent_of) >= 0.8 * len(topic_of)
    assert _purity(leaf_parents, topic_of) >= 0.8
    top_members = {p: [fact for sub in kids for fact in children[sub]] for p, kids in top.items()}
    assert _purity(top_members, topic_of) >= 0.8
    assert reorganized["result"].success


def test_summary_parents_are_topic_memories_of_the_tenant(neo4j, reorganized):
    tenant = reorganized["tenant"]
    with neo4j.session() as session:
        topics = [record.data() for record in session.run(
            """
            MATCH (p:Node:MemoryItem {user_name: $tenant, type: 'topic'})
            RETURN p.memory_type AS memory_type, p.confidence AS confidence, p.key AS key,
                   p.memory AS memory, size(p.embedding) AS dim, p.status AS status,
                   p.sources AS sources, p.reorg_level AS level
            """, tenant=tenant)]
        working_linked = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant})-[:PARENT]-() WHERE m.id IN $ids RETURN count(m) AS n",
            tenant=tenant, ids=reorganized["working"]).single()["n"]
    assert topics
    assert {t["memory_type"] for t in topics} == {"LongTermMemory"}
    assert {t["confidence"] for t in topics} == {0.66}
    assert {t["status"] for t in topics} == {"activated"}
    assert all(t["key"] and t["memory"] and t["dim"] == EMBEDDER.dimension for t in topics)
    assert all('"memory_id"' in t["sources"] for t in topics)
    assert working_linked == 0


def test_neighbour_tenant_is_untouched(neo4j, reorganized):
    assert graph_counts(neo4j, reorganized["neighbour"]) == {
        "nodes": 250, "parent_edges": 0, "topics": 0}


def test_tree_checks_pass(reorganized):
    evaluations = reorganized["result"].get_asset_check_evaluations()
    assert {e.check_name for e in evaluations} == {
        "parent_edges_acyclic", "parents_have_two_members", "one_parent_per_level", "topics_have_no_archived_members",
        "no_duplicate_parent_edges", "no_near_duplicate_topics", "unplaced_memories_have_reasons"}
    assert all(e.passed for e in evaluations)


def test_plan_metadata_accounts_for_every_candidate(reorganized):
    metadata = materialization_metadata(reorganized["result"], "memory_clusters")
    reasons = {row.data["reason"]: row.data["count"] for row in metadata["unplaced_reasons"].records}
    assert metadata["placed"] + metadata["left_unplaced"] == 250
    assert sum(reasons.values()) == metadata["left_unplaced"]
    assert metadata["topics"] >= 5


def test_rerun_with_nothing_new_changes_nothing(neo4j, reorganized, instance):
    tenant = reorganized["tenant"]
    before = graph_counts(neo4j, tenant)
    with neo4j.session() as session:
        snapshot = session.run(
            "MATCH (n:MemoryItem {user_name: $tenant}) RETURN n.id AS id, properties(n) AS props",
            tenant=tenant).data()
    result = run_reorg(neo4j, tenant, instance)
    assert graph_counts(neo4j, tenant) == before
    with neo4j.session() as session:
        after = session.run(
            "MATCH (n:MemoryItem {user_name: $tenant}) RETURN n.id AS id, properties(n) AS props",
            tenant=tenant).data()
    assert sorted(after, key=lambda r: r["id"]) == sorted(snapshot, key=lambda r: r["id"])
    assert materialization_metadata(result, "reorg_candidates")["candidates"] == 0
    assert materialization_metadata(result, "summary_parents")["topics_created"] == 0
    assert materialization_metadata(result, "summary_parents")["parent_edges_created"] == 0
