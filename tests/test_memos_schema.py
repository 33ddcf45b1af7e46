"""memtend tending a MemOS 2.x graph in place, on the real Neo4j: nodes written as MemOS's graph
store writes them are deduplicated and reorganized under MemOS's label, ids and fields, with
the same guarantees as in memtend's own schema (lineage, idempotent reruns, nothing lost, no
cross-tenant edge, the asset checks) and without touching what MemOS owns."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import dagster as dg
import numpy as np
import pytest

from mem_assets.context_graph.assets import graph_schema
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_assets.dedup.sensors import build_dedup_sensor
from mem_assets.dedup.undo import undo
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.operations import backup_tenant, drop_tenant, restore_tenant
from mem_assets.planning import plan_tenant
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_resources.graph_schema_adapter import OWN_HISTORY_PROPERTY, OWN_VECTOR_PROPERTY, GraphDialect, GraphSchema
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.memos_graph import (
    CATS,
    EMBEDDER,
    HOME,
    MEMOS_FIELDS,
    OTHERS,
    T0,
    TOPICAL,
    checks_pass,
    memos_edges,
    memos_nodes,
    memos_resource,
    metadata,
    other_labels,
    run_dedup,
    write_memos_nodes,
)
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file
from tests.support.reorg_graph import run_reorg

#: What a resolution may change on a node MemOS wrote (archive it, or let it win a conflict).
RESOLUTION_FIELDS = {"status", "evolve_to", "version"}


@pytest.fixture
def memos(neo4j: Neo4jResource) -> Iterator[Neo4jResource]:
    resource = memos_resource(neo4j)
    yield resource
    resource.close()


def owned(props: dict[str, Any], skip: set[str] = frozenset()) -> dict[str, Any]:
    return {k: props.get(k) for k in MEMOS_FIELDS if k not in skip}


def test_the_dialect_changes_identifiers_only():
    memos = GraphDialect(schema_name=GraphSchema.MEMOS)
    query = ("MATCH (n:MemoryItem {user_name: $tenant}) USING INDEX n:MemoryItem(user_name, id) "
             "CREATE (m:Node:MemoryItem) SET m.embedding = row.embedding MERGE (t:MemoryItem {id: 1}) "
             "ON CREATE SET t:Node, t += $props SET t.history = row.history RETURN 'MemoryItem' AS kept")
    assert memos.cypher(query) == (
        "MATCH (n:Memory {user_name: $tenant}) USING INDEX n:Memory(user_name, id) "
        "CREATE (m:Memory) SET m.memtend_embedding = row.embedding MERGE (t:Memory {id: 1}) "
        "ON CREATE SET t += $props SET t.memtend_history = row.history RETURN 'MemoryItem' AS kept")
    shared = memos.model_copy(update={"shared_embedding": True})
    assert "m.embedding = row.embedding" in shared.cypher(query)
    assert GraphDialect().cypher(query) == query
    assert str(uuid.UUID(memos.node_id("0" * 32))) == memos.node_id("0" * 32)


def test_a_memos_graph_is_deduplicated_and_reorganized_in_place(memos, instance, tenant):
    other = tenant + "_b"
    a, b = write_memos_nodes(memos, tenant, CATS)
    older, newer = write_memos_nodes(memos, tenant, HOME, start_minutes=10)
    rest = write_memos_nodes(memos, tenant, OTHERS, start_minutes=20)
    write_memos_nodes(memos, tenant, TOPICAL, start_minutes=30)
    theirs = write_memos_nodes(memos, other, CATS)
    with memos.driver.session(database=memos.database) as session:  # as MemOS's add_edge links them
        session.run("MATCH (a:Memory {id: $a}), (b:Memory {id: $b}) MERGE (a)-[:RELATE_TO]->(b)",
                    a=a, b=rest[0]).consume()
    before = memos_nodes(memos, tenant)
    theirs_before = memos_nodes(memos, other)

    dedup = run_dedup(memos, tenant, instance)

    assert dedup.success and checks_pass(dedup)
    assert metadata(dedup, "merged_nodes")["merges"] >= 1
    graph, rels = memos_nodes(memos, tenant), memos_edges(memos, tenant)
    assert all(node["labels"] == ["Memory"] for node in graph.values())
    # memtend's judgment cache, resolution records and review queue: beside MemOS's nodes
    assert other_labels(memos, tenant) <= {"DedupJudgment", "DedupResolution", "DedupReview"}
    [merged] = [n for i, n in graph.items() if (a, "MERGED_TO", i) in rels]
    assert (b, "MERGED_TO", merged["id"]) in rels and str(uuid.UUID(merged["id"])) == merged["id"]
    assert graph[a]["status"] == graph[b]["status"] == "archived"
    assert graph[a]["evolve_to"] == [merged["id"]]
    assert (merged["id"], "RELATE_TO", rest[0]) in rels and not [r for r in rels if r[0] == a and r[1] != "MERGED_TO"]
    assert merged["status"] == "activated" and len(merged["embedding"]) == memos.embedding_dimension
    assert {json.loads(s)["content"] for s in merged["sources"]} == set(CATS)
    assert {h["archived_memory_id"] for h in json.loads(merged[OWN_HISTORY_PROPERTY])} == {a, b}
    assert merged["history"] == [] and "data" not in merged and merged["memory_type"] == "LongTermMemory"
    assert graph[older]["status"] == "archived" and graph[newer]["status"] == "activated"
    assert (older, "SUPERSEDED_BY", newer) in rels and graph[newer]["version"] == 2
    assert [h["archived_memory_id"] for h in json.loads(graph[newer][OWN_HISTORY_PROPERTY])] == [older]
    for node_id, props in before.items():  # MemOS's fields: only what a resolution must change
        changed = {k for k in MEMOS_FIELDS if graph[node_id].get(k) != props.get(k)}
        assert changed <= RESOLUTION_FIELDS, (node_id, changed)
        assert graph[node_id]["embedding"] == props["embedding"]
    assert all(graph[i]["status"] == "activated" for i in rest)
    assert memos_nodes(memos, other) == theirs_before  # the other user's identical text: untouched
    assert {(x, y) for x, _, y in memos_edges(memos, other)} == set()
    assert all(theirs_before[i]["status"] == "activated" for i in theirs)

    deduplicated = graph
    reorg = run_reorg(memos, tenant, instance)

    assert reorg.success and checks_pass(reorg)
    graph, rels = memos_nodes(memos, tenant), memos_edges(memos, tenant)
    assert all(owned(graph[i]) == owned(props) for i, props in deduplicated.items())
    topics = {i for i, n in graph.items() if n.get("type") == "topic"}
    assert topics and all(graph[t]["labels"] == ["Memory"] and str(uuid.UUID(t)) == t for t in topics)
    parents = {(p, c) for p, r, c in rels if r == "PARENT"}
    assert parents and all(graph[c]["status"] == "activated" for _, c in parents)
    assert all(isinstance(graph[t]["sources"], list) and "history" not in graph[t] for t in topics)
    assert {n["user_name"] for n in graph.values()} == {tenant}
    assert not [n for n in graph.values() if n.get("reorg_set_aside_nearest") != n.get("reorg_set_aside_nearest")]
    assert all(graph[i]["status"] in ("activated", "archived") for i in graph)  # nothing deleted
    assert set(before) <= set(graph)

    assert checks_pass(schema_check(memos, tenant, instance))  # every node one MemOS reads back

    state = memos_nodes(memos, tenant), memos_edges(memos, tenant)
    again = run_dedup(memos, tenant, instance)
    assert again.success and metadata(again, "relation_judgments")["judge_calls"] == 0
    assert run_reorg(memos, tenant, instance).success
    assert (memos_nodes(memos, tenant), memos_edges(memos, tenant)) == state


def test_memtend_keeps_its_own_vector_when_memos_embeds_with_another_model(neo4j, instance, tenant):
    own = memos_resource(neo4j, shared_embedding=False)
    foreign = np.random.default_rng(3).normal(size=(len(CATS) + 2, 48))  # another model, another size
    try:
        ids = write_memos_nodes(own, tenant, [*CATS, *OTHERS[:2]], vectors=foreign)
        before = memos_nodes(own, tenant)
        result = run_dedup(own, tenant, instance)
        assert result.success and checks_pass(result)
        graph = memos_nodes(own, tenant)
    finally:
        own.close()
    assert all(graph[i]["embedding"] == before[i]["embedding"] for i in ids)
    assert all(len(graph[i][OWN_VECTOR_PROPERTY]) == neo4j.embedding_dimension for i in ids)
    [merged] = [n for n in graph.values() if n["id"] not in ids]
    assert graph[ids[0]]["status"] == graph[ids[1]]["status"] == "archived"
    assert len(merged[OWN_VECTOR_PROPERTY]) == neo4j.embedding_dimension
    assert len(merged["embedding"]) == 48  # MemOS's vector of a source: MemOS's search still finds it


def test_the_sensor_finds_new_memos_users_and_adds_them_as_partitions(memos, instance, tenant):
    write_memos_nodes(memos, tenant, OTHERS[:2])
    sensor = build_dedup_sensor(dg.DefaultSensorStatus.RUNNING)
    with dg.build_sensor_context(instance=instance, resources={"neo4j": memos}) as context:
        result = sensor(context)
    assert tenant in {r.partition_key for r in result.run_requests}
    assert tenant in {key for req in result.dynamic_partitions_requests for key in req.partition_keys}


def test_a_tended_memos_graph_goes_back_to_its_backup(memos, instance, tenant, tmp_path):
    """The way back: a backup before tending; `drop` (which backs the tended state up first) and
    `restore` of the earlier backup give MemOS its graph back exactly."""
    write_memos_nodes(memos, tenant, [*CATS, *OTHERS[:2]])
    before = memos_nodes(memos, tenant), memos_edges(memos, tenant)
    untended = backup_tenant(memos, tmp_path, tenant, keep_last=3).manifest.backup_id

    assert run_dedup(memos, tenant, instance).success
    assert memos_edges(memos, tenant) != before[1]
    drop_tenant(memos, tmp_path, tenant, keep_last=3)
    restore_tenant(memos, tmp_path, tenant, backup_id=untended)

    assert (memos_nodes(memos, tenant), memos_edges(memos, tenant)) == before
    assert other_labels(memos, tenant) == set()


def test_memtends_own_inbox_writes_memos_shaped_nodes(memos, instance, tenant, tmp_path):
    """A MemOS deployment may still feed memtend's inbox: the nodes it writes are MemOS's."""
    inbox, quarantine = tmp_path / "inbox", tmp_path / "quarantine"
    write_inbox_file(inbox, tenant, "a.jsonl", [
        {"memory": text, "created_at": T0.isoformat(), "sources": [{"role": "user", "content": text}]}
        for text in OTHERS[:2]])
    assert materialize_partition([memory_items], tenant, instance,
                                 base_resources(memos, inbox, quarantine)).success

    graph = memos_nodes(memos, tenant)
    assert sorted(n["memory_type"] for n in graph.values()) == ["LongTermMemory"] * 2 + ["WorkingMemory"] * 2
    for node in graph.values():
        assert node["labels"] == ["Memory"] and str(uuid.UUID(node["id"])) == node["id"]
        assert [json.loads(s)["content"] for s in node["sources"]] == [node["memory"]]
        assert "history" not in node and "data" not in node and node["working_binding"] in graph


def test_undo_of_a_run_gives_memos_its_nodes_back(memos, instance, tenant):
    """memtend's undo works on a MemOS graph: every MemOS field of every node as before the run;
    the fused memory stays, archived as undone (never deleted), out of MemOS's activated reads."""
    cats = write_memos_nodes(memos, tenant, CATS)
    older, newer = write_memos_nodes(memos, tenant, HOME, start_minutes=10)
    before = memos_nodes(memos, tenant)
    result = run_dedup(memos, tenant, instance)
    assert result.success and metadata(result, "merged_nodes")["supersedes"] == 1
    assert memos_nodes(memos, tenant)[older]["status"] == "archived"

    report = undo(memos, tenant, run_id=result.run_id)

    assert sorted(r["kind"] for r in report.undone) == ["merge", "supersede"]
    after = memos_nodes(memos, tenant)
    assert {i: owned(after[i]) for i in before} == {i: owned(n) for i, n in before.items()}
    [fused] = set(after) - set(before)
    assert after[fused]["status"] == "archived" and after[fused]["archived_reason"] == "undone"
    assert OWN_HISTORY_PROPERTY not in after[newer] and after[newer]["history"] == []
    assert not [r for r in memos_edges(memos, tenant) if r[1] in ("MERGED_TO", "SUPERSEDED_BY")]
    assert all(after[i]["status"] == "activated" for i in [*cats, older, newer])


def test_a_plan_of_a_memos_graph_changes_nothing_and_names_memos_ids(memos, tenant):
    write_memos_nodes(memos, tenant, [*CATS, *HOME])
    before = memos_nodes(memos, tenant), memos_edges(memos, tenant)

    plan = plan_tenant(memos, tenant, EMBEDDER, OfflineJudge(), TopicVectorsResource())

    assert (plan.counts["merge"], plan.counts["supersede"]) == (1, 1)
    merged = plan.table[plan.table["kind"] == "merge"]
    assert all(str(uuid.UUID(i)) == i for i in merged["result"])
    assert (memos_nodes(memos, tenant), memos_edges(memos, tenant)) == before


def schema_check(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize([graph_schema], partition_key=tenant, instance=instance, resources={"neo4j": neo4j})


def test_the_schema_check_fails_on_a_node_memos_cannot_read(memos, instance, tenant):
    [node] = write_memos_nodes(memos, tenant, OTHERS[:1])
    with memos.driver.session(database=memos.database) as session:  # as a seed-002 writer would
        session.run("MATCH (n:Memory {id: $id}) SET n.history = '[]', n.sources = '[]'", id=node).consume()
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])

    [evaluation] = schema_check(memos, tenant, instance).get_asset_check_evaluations()

    assert not evaluation.passed
    assert "history is not a list" in evaluation.metadata["differences"].value
    assert "sources is not a list" in evaluation.metadata["differences"].value
