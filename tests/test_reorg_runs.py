"""Reorganization runs on the real Neo4j: LLM summaries, set-aside memory, time budget, schedule."""

from __future__ import annotations

import itertools
import json
import logging
from datetime import UTC, datetime

import dagster as dg
import pytest

from mem_assets.reorg import queries
from mem_assets.reorg.assets import memory_clusters, reorg_candidates
from mem_assets.reorg.hierarchy import Reorganizer
from mem_assets.reorg.schedules import build_reorg_schedule
from mem_assets.reorg.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    TopicSummary,
)
from mem_resources.embedder import HashingEmbedder
from mem_resources.llm import OpenAIChatResource
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.fake_openai import chat_answer, fake_openai_server
from tests.support.reorg_graph import (
    graph_counts,
    materialization_metadata,
    reorg_resources,
    run_reorg,
    write_memories,
)
from tests.support.topic_corpus import topic_memories

reorg_schedule = build_reorg_schedule("0 3 * * *", dg.DefaultScheduleStatus.RUNNING)


def _texts(topics: set[str], per_topic: int) -> list[str]:
    return [text for topic, text in topic_memories(per_topic=per_topic) if topic in topics]


def _chat_calls(fake) -> int:
    return sum(1 for path, _ in fake.requests if path.endswith("/chat/completions"))


def test_llm_summaries_and_a_malformed_answer_skips_only_its_cluster(neo4j, tenant, instance):
    travel = set(_texts({"travel"}, 30))
    write_memories(neo4j, tenant, _texts({"cooking", "travel"}, 30))

    def answer(body):
        memories = json.loads(body["messages"][1]["content"])["memories"]
        if any(text in travel for text in memories):
            return 200, chat_answer("Sure! Here is a summary: the trip")
        return 200, chat_answer(json.dumps({"key": "Cooking at home", "value": "Home cooking notes.",
                                            "tags": ["cooking"], "background": "Dinner recipes."}))

    with fake_openai_server() as fake:
        fake.chat = answer
        summarizer = LLMSummarizer(chat=OpenAIChatResource(base_url=fake.base_url, max_retries=0))
        result = run_reorg(neo4j, tenant, instance, summarizer)
        calls = _chat_calls(fake)
        metadata = materialization_metadata(result, "summary_parents")
        assert metadata["llm_calls"] == calls > 0
        assert metadata["rejected_summaries"] >= 1

        with neo4j.session() as session:
            keys = {r["key"] for r in session.run(
                "MATCH (p:MemoryItem {user_name: $tenant, type: 'topic'}) RETURN p.key AS key",
                tenant=tenant)}
            travel_linked = session.run(
                "MATCH (m:MemoryItem {user_name: $tenant})<-[:PARENT]-() WHERE m.memory IN $travel "
                "RETURN count(m) AS n", tenant=tenant, travel=list(travel)).single()["n"]
            rejected = session.run(
                "MATCH (m:MemoryItem {user_name: $tenant, reorg_set_aside_reason: 'summary_rejected'}) "
                "RETURN count(m) AS n", tenant=tenant).single()["n"]
        assert keys == {"Cooking at home"}
        assert travel_linked == 0
        assert rejected >= 20
        logs = [entry.user_message for entry in instance.all_logs(result.run_id)]
        assert any("Skipping" in message and "unusable" in message for message in logs)

        before = graph_counts(neo4j, tenant)
        run_reorg(neo4j, tenant, instance, summarizer)
        assert _chat_calls(fake) == calls
        assert graph_counts(neo4j, tenant) == before


def test_set_aside_memories_wait_for_new_orphans_then_rejoin(neo4j, tenant, instance):
    small_clusters = {"ops": {"memory_clusters": {"config": {"min_cluster_size": 20}}}}
    first = _texts({"fitness"}, 25)
    write_memories(neo4j, tenant, first)
    result = run_reorg(neo4j, tenant, instance, run_config=small_clusters)
    assert materialization_metadata(result, "memory_clusters")["left_unclustered"] == 25
    assert graph_counts(neo4j, tenant)["topics"] == 0

    again = run_reorg(neo4j, tenant, instance, run_config=small_clusters)
    assert materialization_metadata(again, "reorg_candidates")["candidates"] == 0

    write_memories(neo4j, tenant, [f"Gym note {i}: {text}" for i, text in enumerate(first[:20])])
    rejoined = run_reorg(neo4j, tenant, instance)
    candidates = rejoined.output_for_node("reorg_candidates")
    assert len(candidates) == 45
    assert int(candidates["set_aside"].sum()) == 25
    assert graph_counts(neo4j, tenant)["topics"] >= 2


def test_time_budget_writes_whole_topics_and_the_next_run_continues(neo4j, tenant, instance):
    write_memories(neo4j, tenant, _texts({"cooking", "music", "programming"}, 40))
    instance.add_dynamic_partitions("tenants", [tenant])
    planned = dg.materialize([reorg_candidates, memory_clusters], partition_key=tenant, instance=instance,
                             resources=reorg_resources(neo4j))
    candidates = planned.output_for_node("reorg_candidates")
    clusters = planned.output_for_node("memory_clusters")
    kept = clusters[clusters["status"] == "kept"]
    assert kept["topic"].nunique() >= 3

    ticks = itertools.count()
    reorganizer = Reorganizer(tenant, neo4j, HashingEmbedder(), ExtractiveSummarizer(),
                              logging.getLogger("test"), clock=lambda: float(next(ticks)))
    outcome = reorganizer.run(candidates, clusters, time_budget_s=2.5)
    assert outcome.stopped_by_budget
    with neo4j.session() as session:
        tree = session.execute_read(queries.topic_tree, tenant)
        deferred = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.reorg_deferred_at IS NOT NULL "
            "RETURN collect(m.id) AS ids", tenant=tenant).single()["ids"]
    linked = {edge["child"] for edge in tree}
    written_topics = set(kept[kept["node_ids"].map(lambda ids: ids[0] in linked)]["topic"])
    assert len(written_topics) == 2
    for _, leaf in kept.iterrows():
        assert all(n in linked for n in leaf["node_ids"]) == (leaf["topic"] in written_topics)
    assert set(deferred) == {n for ids in kept[~kept["topic"].isin(written_topics)]["node_ids"] for n in ids}

    later = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 10_000}}}})
    assert materialization_metadata(later, "reorg_candidates")["candidates"] == (
        len(deferred) + outcome.set_aside_small)
    with neo4j.session() as session:
        left = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.reorg_deferred_at IS NOT NULL "
            "RETURN count(m) AS n", tenant=tenant).single()["n"]
    assert left == 0
    assert materialization_metadata(later, "summary_parents")["parents_created"] > 0


def test_schedule_requests_one_run_per_eligible_tenant(neo4j: Neo4jResource, instance):
    names = [f"sched_{i}_{datetime.now(UTC).strftime('%H%M%S%f')}" for i in range(5)]
    busy_a, busy_b, few, empty, deferred = names
    write_memories(neo4j, busy_a, _texts({"music"}, 25))
    write_memories(neo4j, busy_b, _texts({"travel"}, 22))
    write_memories(neo4j, few, _texts({"music"}, 5))
    left_over = write_memories(neo4j, deferred, _texts({"cooking"}, 3))
    with neo4j.session() as session:
        session.execute_write(queries.mark_deferred, deferred, left_over)
    instance.add_dynamic_partitions("tenants", names)

    with dg.build_schedule_context(instance=instance, resources={"neo4j": neo4j},
                                   scheduled_execution_time=datetime(2026, 11, 30, 3, tzinfo=UTC)) as context:
        requests = reorg_schedule(context)
    assert sorted((r.partition_key, r.run_key) for r in requests) == sorted(
        (t, f"reorg-2026-11-30-{t}") for t in (busy_a, busy_b, deferred))
    assert empty not in {r.partition_key for r in requests}


def test_checks_find_cycles_thin_parents_and_double_parents(neo4j, tenant):
    ids = write_memories(neo4j, tenant, ["alpha fact", "beta fact", "gamma fact"])
    with neo4j.session() as session:
        session.run(
            """
            UNWIND [['p1', 1], ['p2', 2], ['p3', 1]] AS row
            CREATE (:Node:MemoryItem {user_name: $tenant, id: row[0], type: 'topic', reorg_level: row[1],
                                      status: 'activated', memory_type: 'LongTermMemory'})
            """, tenant=tenant).consume()
        session.run(
            """
            MATCH (p1 {user_name: $tenant, id: 'p1'}), (p2 {user_name: $tenant, id: 'p2'}),
                  (p3 {user_name: $tenant, id: 'p3'})
            MATCH (a {user_name: $tenant, id: $a}), (b {user_name: $tenant, id: $b})
            CREATE (p2)-[:PARENT]->(p1), (p1)-[:PARENT]->(p2), (p1)-[:PARENT]->(a), (p3)-[:PARENT]->(a),
                   (p1)-[:PARENT]->(b)
            """, tenant=tenant, a=ids[0], b=ids[1]).consume()
        assert session.execute_read(queries.parents_on_cycles, tenant) == ["p1", "p2"]
        assert [row["id"] for row in session.execute_read(queries.parents_with_few_members, tenant)] == ["p2", "p3"]
        assert session.execute_read(queries.nodes_with_two_parents_at_one_level, tenant) == [
            {"id": ids[0], "level": 1, "parents": 2}]


@pytest.mark.parametrize("answer", [
    '{"key": "", "value": "Trips.", "tags": [], "background": ""}',
    '{"key": "Travel", "tags": ["trip"]}',
    '{"key": "Travel", "value": "Trips.", "tags": "not a list"}',
])
def test_llm_summaries_that_fail_validation_are_rejected(answer):
    with fake_openai_server() as fake:
        fake.chat = lambda body: (200, chat_answer(answer))
        summarizer = LLMSummarizer(chat=OpenAIChatResource(base_url=fake.base_url, max_retries=0))
        summary, usage = summarizer.summarize(["Booked a flight to Kyoto"], _draft(), "en")
    assert summary is None
    assert usage.calls == 1 and usage.failures == 1


def test_llm_summarizer_asks_in_the_members_language():
    with fake_openai_server() as fake:
        fake.chat = lambda body: (200, chat_answer(json.dumps(
            {"key": "旅行", "value": "用户的旅行计划。", "tags": ["旅行"], "background": "出行。"})))
        summarizer = LLMSummarizer(chat=OpenAIChatResource(base_url=fake.base_url, max_retries=0))
        summary, _ = summarizer.summarize(["我打算去云南旅行"], _draft(), "zh")
        [(_, body)] = fake.requests
    assert summary is not None and summary.key == "旅行"
    assert "Chinese" in body["messages"][0]["content"]
    assert json.loads(body["messages"][1]["content"])["memories"] == ["我打算去云南旅行"]


def _draft() -> TopicSummary:
    return TopicSummary(key="trip", value="A trip.", tags=["trip"], background="1 memories about trip.")
