"""Dedup through Dagster against the real Neo4j: merges with lineage and moved edges, newer-wins
contradictions, tenant isolation, idempotent reruns, failing judges, the sensor and checks."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pytest

from mem_assets.dedup import queries
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.pair_judge import JudgeResource, OfflineJudge, OpenAIJudge
from mem_assets.dedup.sensors import build_dedup_sensor
from mem_assets.ingest import queries as ingest_queries
from mem_resources.embedder import E5_PASSAGE_SPACE, HashingEmbedder, e5_embed
from mem_resources.llm import OpenAIChatResource
from mem_resources.memory_model import (
    MemoryItem,
    MemoryMetadata,
    SourceMessage,
    memory_id,
    payload_hash,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.table_io import TableIOManager
from tests.support.fake_openai import chat_answer, fake_openai_server, verdicts

dedup_sensor = build_dedup_sensor(dg.DefaultSensorStatus.RUNNING)

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
DEDUP = [dedup_candidates, relation_judgments, merged_nodes]


def write_items(neo4j: Neo4jResource, tenant: str, texts: list[str], memory_type: str = "LongTermMemory",
                start_minutes: int = 0) -> list[str]:
    """Long-term nodes the way ingest writes them (minus the working twin), one minute apart."""
    vectors = HashingEmbedder(dimension=neo4j.embedding_dimension).embed(texts)
    items = []
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        h = payload_hash(tenant, memory_type, text)
        at = T0 + timedelta(minutes=start_minutes + i)
        items.append(MemoryItem(id=memory_id(h), memory=text, metadata=MemoryMetadata(
            user_name=tenant, memory_type=memory_type, created_at=at, updated_at=at, payload_hash=h,
            embedding=vector.tolist(), sources=[SourceMessage(role="user", content=text)])))
    with neo4j.session() as session:
        session.execute_write(ingest_queries.write_memories, tenant, items)
    return [item.id for item in items]


def run_dedup(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance,
              judge: JudgeResource | None = None, with_checks: bool = False) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])
    resources = {"neo4j": neo4j, "embedder": HashingEmbedder(dimension=neo4j.embedding_dimension),
                 "judge": judge or OfflineJudge(),
                 # the store deployments use: each step reads the previous one's output back from it
                 "io_manager": TableIOManager(base_path=str(Path(instance.root_directory) / "storage"))}
    return dg.materialize([*DEDUP, *(dedup_checks if with_checks else [])], partition_key=tenant,
                          instance=instance, resources=resources)


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events()
               if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def nodes(neo4j: Neo4jResource, tenant: str) -> dict[str, dict[str, Any]]:
    with neo4j.session() as session:
        result = session.run("MATCH (n:MemoryItem {user_name: $t}) RETURN n.id AS id, properties(n) AS p",
                             t=tenant)
        return {r["id"]: r["p"] for r in result}


def edges(neo4j: Neo4jResource, tenant: str) -> set[tuple[str, str, str]]:
    with neo4j.session() as session:
        result = session.run("MATCH (a {user_name: $t})-[r]->(b) RETURN a.id AS a, type(r) AS r, b.id AS b",
                             t=tenant)
        return {(r["a"], r["r"], r["b"]) for r in result}


def graph_state(neo4j: Neo4jResource, tenant: str) -> tuple:
    def stable(props: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in props.items() if k != "dedup_checked_at"}
    return {k: stable(v) for k, v in nodes(neo4j, tenant).items()}, edges(neo4j, tenant)


def add_context(neo4j: Neo4jResource, tenant: str, memory: str, conv: str, owner: str) -> None:
    """Seed-002 style context edges in both directions: Character -OWNS_MEMORY-> memory -FROM_CONV-> conv."""
    with neo4j.session() as session:
        session.run(
            """
            MATCH (m:MemoryItem {user_name: $t, id: $m})
            MERGE (c:Conversation {user_name: $t, id: $conv})
            MERGE (u:Character {user_name: $t, id: $owner})
            MERGE (m)-[:FROM_CONV]->(c)
            MERGE (u)-[:OWNS_MEMORY {since: 1}]->(m)
            """, t=tenant, m=memory, conv=conv, owner=owner).consume()


def test_duplicates_merge_with_lineage_metadata_and_moved_edges(neo4j, instance, tenant):
    a, b, other = write_items(neo4j, tenant, [
        "The user has two cats, Luna and Milo.", "The user has two cats named Luna and Milo.",
        "The user plays chess."])
    add_context(neo4j, tenant, a, "conv:2026-11-01", "char:user")
    add_context(neo4j, tenant, b, "conv:2026-11-02", "char:user")

    result = run_dedup(neo4j, tenant, instance, with_checks=True)

    assert result.success
    assert metadata(result, "merged_nodes")["merges"] == 1
    graph = nodes(neo4j, tenant)
    [merged] = [n for n in graph.values() if n["id"] not in (a, b, other)]
    assert merged["memory"] == "The user has two cats named Luna and Milo."  # the more informative
    assert merged["status"] == "activated" and merged["version"] == 2
    assert {h["archived_memory_id"] for h in json.loads(merged["history"])} == {a, b}
    assert {s["content"] for s in json.loads(merged["sources"])} == {graph[a]["memory"], graph[b]["memory"]}
    assert len(merged["embedding"]) == neo4j.embedding_dimension
    assert graph[a]["status"] == graph[b]["status"] == "archived"
    assert graph[other]["status"] == "activated"
    rels = edges(neo4j, tenant)
    assert {(a, "MERGED_TO", merged["id"]), (b, "MERGED_TO", merged["id"])} <= rels
    assert {(merged["id"], "FROM_CONV", "conv:2026-11-01"), (merged["id"], "FROM_CONV", "conv:2026-11-02"),
            ("char:user", "OWNS_MEMORY", merged["id"])} <= rels
    assert not {r for r in rels if a in (r[0], r[2]) and r[1] != "MERGED_TO"}
    assert not {r for r in rels if b in (r[0], r[2]) and r[1] != "MERGED_TO"}
    assert all(check.passed for check in result.get_asset_check_evaluations())


def test_contradiction_newer_wins_and_the_older_is_archived_and_linked(neo4j, instance, tenant):
    older, newer = write_items(neo4j, tenant, ["The user lives in Berlin.", "The user now lives in Paris."])
    zh_old, zh_new = write_items(neo4j, tenant, ["用户住在北京", "用户现在住在上海"], start_minutes=10)

    result = run_dedup(neo4j, tenant, instance, with_checks=True)

    assert result.success
    assert metadata(result, "merged_nodes")["supersedes"] == 2
    graph, rels = nodes(neo4j, tenant), edges(neo4j, tenant)
    for old, new in ((older, newer), (zh_old, zh_new)):
        assert graph[old]["status"] == "archived" and graph[new]["status"] == "activated"
        assert (old, "SUPERSEDED_BY", new) in rels
        [entry] = json.loads(graph[new]["history"])
        assert entry["archived_memory_id"] == old and entry["update_type"] == "conflict"
        assert graph[new]["version"] == 2
    assert all(check.passed for check in result.get_asset_check_evaluations())


def test_identical_text_in_two_tenants_is_never_merged(neo4j, instance, tenant):
    other = tenant + "_b"
    texts = ["The user has a cat named Mochi.", "The user has a cat named Mochi!"]
    a_ids = write_items(neo4j, tenant, texts[:1])
    b_ids = write_items(neo4j, other, texts)

    for name in (tenant, other):
        assert run_dedup(neo4j, name, instance).success

    assert nodes(neo4j, tenant)[a_ids[0]]["status"] == "activated"
    assert len(nodes(neo4j, tenant)) == 1
    assert all(nodes(neo4j, other)[i]["status"] == "archived" for i in b_ids)
    assert not [r for r in edges(neo4j, other) if r[2] in a_ids]


def test_rerun_changes_nothing_and_makes_no_judge_calls(neo4j, instance, tenant):
    write_items(neo4j, tenant, ["The user likes tea.", "The user no longer drinks tea.",
                                "用户养了一只猫,叫咪咪。", "用户养了一只叫咪咪的猫。", "The user plays chess."])
    first = run_dedup(neo4j, tenant, instance)
    assert metadata(first, "relation_judgments")["judge_calls"] > 0
    before = graph_state(neo4j, tenant)

    second = run_dedup(neo4j, tenant, instance)
    assert metadata(second, "relation_judgments")["judge_calls"] == 0
    assert graph_state(neo4j, tenant) == before

    with neo4j.session() as session:  # forget every mark: only the judgment cache stands in the way
        session.run("MATCH (n:MemoryItem {user_name: $t}) REMOVE n.dedup_checked_at", t=tenant).consume()
    third = run_dedup(neo4j, tenant, instance)
    assert metadata(third, "dedup_candidates")["unchecked_nodes"] == 3
    assert metadata(third, "relation_judgments")["judge_calls"] == 0
    assert graph_state(neo4j, tenant) == before


def test_the_judges_text_vectors_are_kept_on_nodes_and_each_text_is_embedded_once(neo4j, instance, tenant):
    """The accurate judge embeds a memory once in its life, not once per run it is a candidate in:
    a later run reads the older candidates' vectors back, bit for bit what it would make."""
    tea, honey = write_items(neo4j, tenant, ["The user likes green tea.", "The user likes green tea with honey."])
    first = metadata(run_dedup(neo4j, tenant, instance), "relation_judgments")
    assert (first["text_vectors_made"], first["text_vectors_reused"]) == (2, 0)
    stored = {n["memory"]: np.frombuffer(n["judge_vector"], dtype="<f4")
              for n in nodes(neo4j, tenant).values() if "judge_vector" in n}
    assert set(stored) == {"The user likes green tea.", "The user likes green tea with honey."}
    for text, vector in stored.items():
        assert np.array_equal(vector, e5_embed([text])[0])

    write_items(neo4j, tenant, ["The user drinks green tea every morning."], start_minutes=30)
    second = run_dedup(neo4j, tenant, instance)
    pairs = second.output_for_node("dedup_candidates")
    assert {frozenset(p) for p in zip(pairs.left_id, pairs.right_id, strict=True)} >= {frozenset((tea, memory_id(
        payload_hash(tenant, "LongTermMemory", "The user drinks green tea every morning."))))}
    judged = metadata(second, "relation_judgments")
    assert judged["text_vectors_made"] == 1
    assert judged["text_vectors_reused"] == len(set(pairs.left_text) | set(pairs.right_text)) - 1

    with neo4j.session() as session:  # a rewritten text: its kept vector no longer stands for it
        session.run("MATCH (n:MemoryItem {user_name: $t, id: $id}) SET n.memory = 'The user likes espresso.'",
                    t=tenant, id=honey).consume()
        kept = session.execute_read(queries.judge_vectors, tenant, [tea, honey], E5_PASSAGE_SPACE)
    assert set(kept) == {"The user likes green tea."}


def test_pairs_the_gate_calls_clearly_independent_cost_no_e5_pass(neo4j, instance, tenant):
    """The accurate judge's e5 gate: a candidate pair the fast model calls clearly independent is
    judged independent without e5, says why, leaves no vector on its nodes, and is counted."""
    write_items(neo4j, tenant, ["The user likes green tea.", "The user likes hiking in the mountains."])
    result = run_dedup(neo4j, tenant, instance)
    judged = metadata(result, "relation_judgments")
    assert (judged["pairs"], judged["pairs_gated"], judged["text_vectors_skipped"]) == (1, 1, 2)
    assert judged["text_vectors_made"] == 0
    assert (judged["pairs_exact_stage"], judged["pairs_fast_stage"], judged["pairs_accurate_stage"]) == (0, 1, 0)
    frame = result.output_for_node("relation_judgments")
    assert frame["label"].tolist() == ["independent"] and frame["reason"][0].startswith("gated by judge-v2")
    assert not [n for n in nodes(neo4j, tenant).values() if "judge_vector" in n]


def test_relation_judgments_reports_pairs_per_cascade_stage(neo4j, instance, tenant):
    """The judge cascade in a run (its middle stage switched on): each pair judged is counted by
    the stage that answered it (exact, fast, middle, accurate), and the later stages' pairs by
    whether they changed what the stage before them alone would have said; a rerun judges
    nothing, so every stage counts zero."""
    from mem_assets.dedup import offline_judge_model as judge_model

    texts = ["The user likes green tea.", "The user no longer drinks green tea.",
             "The user likes hiking in the mountains.", "The user enjoys hiking in the great outdoors."]
    write_items(neo4j, tenant, texts)
    result = run_dedup(neo4j, tenant, instance, judge=OfflineJudge(middle=True))
    judged = metadata(result, "relation_judgments")
    frame = result.output_for_node("relation_judgments")
    pairs = result.output_for_node("dedup_candidates")
    older_first = [tuple(sorted((a, b), key=texts.index)) for a, b in zip(pairs.left_text, pairs.right_text,
                                                                            strict=True)]
    expected = judge_model.predict(older_first, gate=judge_model.gate("accurate", cascade=True),
                                   band={"redundant": 0.15, "contradictory": 0.15},
                                   middle=judge_model.middle_gate("accurate"))
    counts = {stage: sum(d.stage == stage for d in expected) for stage in ("exact", "fast", "middle", "accurate")}
    assert {stage: judged[f"pairs_{stage}_stage"] for stage in counts} == counts
    assert sum(counts.values()) == judged["pairs"] == len(frame) and counts["middle"] >= 1 and counts["accurate"] >= 1
    assert judged["middle_stage_changed"] == sum(d.stage == "middle" and d.fast_label != d.label for d in expected)
    assert judged["accurate_stage_changed"] == sum(d.stage == "accurate" and (d.middle_label or d.fast_label) != d.label
                                                   for d in expected)
    rerun = metadata(run_dedup(neo4j, tenant, instance, judge=OfflineJudge(middle=True)), "relation_judgments")
    assert [rerun[f"pairs_{stage}_stage"] for stage in counts] == [0, 0, 0, 0]


def test_a_new_repeat_of_a_merged_node_is_compared_with_the_merged_node(neo4j, instance, tenant):
    a, b = write_items(neo4j, tenant, ["用户养了一只叫咪咪的猫。", "用户养了一只猫,叫咪咪。"])
    assert run_dedup(neo4j, tenant, instance).success
    [merged] = [i for i, n in nodes(neo4j, tenant).items() if n["status"] == "activated"]

    [c] = write_items(neo4j, tenant, ["用户有一只名叫咪咪的猫。"], start_minutes=30)
    result = run_dedup(neo4j, tenant, instance)

    pairs = result.output_for_node("dedup_candidates")
    assert {frozenset(p) for p in zip(pairs.left_id, pairs.right_id, strict=True)} == {frozenset((merged, c))}
    graph = nodes(neo4j, tenant)
    [final] = [i for i, n in graph.items() if n["status"] == "activated"]
    assert (merged, "MERGED_TO", final) in edges(neo4j, tenant)
    assert {h["archived_memory_id"] for h in json.loads(graph[final]["history"])} >= {a, b, merged, c}


@pytest.mark.parametrize("memory", [None, ""], ids=["no memory property", "empty memory"])
def test_nodes_written_straight_into_neo4j_are_found_embedded_and_merged(neo4j, instance, tenant, memory):
    """A realtime writer: seed-002 properties only, the text in ``data``, no embedding."""
    [mine] = write_items(neo4j, tenant, ["The user works at Google."])
    with neo4j.session() as session:
        session.run("CREATE (:Node:MemoryItem {user_name: $t, id: 'mem:realtime1', memory: $memory, "
                    "data: 'The user works at Google', created_at: datetime($at)})",
                    t=tenant, memory=memory, at=(T0 + timedelta(hours=1)).isoformat()).consume()

    result = run_dedup(neo4j, tenant, instance)

    assert metadata(result, "dedup_candidates")["embedded_missing_vectors"] == 1
    graph = nodes(neo4j, tenant)
    assert graph[mine]["status"] == graph["mem:realtime1"]["status"] == "archived"


def _chat_judge(base_url: str, **chat: Any) -> OpenAIJudge:
    return OpenAIJudge(chat=OpenAIChatResource(base_url=base_url, model="test-model", **chat),
                       max_concurrency=2)


@pytest.mark.parametrize("failure", ["garbage", "timeout", "error"])
def test_a_failing_judge_merges_nothing_logs_and_finishes(neo4j, instance, tenant, failure):
    ids = write_items(neo4j, tenant, ["The user has two cats.", "The user has two cats, Luna and Milo."])

    def chat(body: dict) -> tuple[int, Any]:
        if failure == "timeout":
            time.sleep(1.5)
            return 200, chat_answer('{"reason": "late", "relation": "redundant"}')
        if failure == "error":
            return 500, {"error": {"message": "boom"}}
        return 200, chat_answer("I think they are kind of the same?")

    with fake_openai_server() as server:
        server.chat = chat
        judge = _chat_judge(server.base_url, timeout_s=0.3, max_retries=1)
        result = run_dedup(neo4j, tenant, instance, judge=judge)

    assert result.success
    assert metadata(result, "relation_judgments")["failed"] == 1
    assert metadata(result, "merged_nodes")["merges"] == 0
    graph = nodes(neo4j, tenant)
    assert set(graph) == set(ids) and all(n["status"] == "activated" for n in graph.values())
    assert all("dedup_checked_at" not in n for n in graph.values())
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any("Judge failed on pair" in m and "nothing merged" in m for m in messages)


def test_openai_judge_end_to_end_over_http(neo4j, instance, tenant):
    ids = write_items(neo4j, tenant, ["The user has two cats.", "The user has two cats, Luna and Milo.",
                                      "The user lives in Berlin.", "The user lives in Paris."])

    def chat(body: dict) -> tuple[int, Any]:
        system, data = body["messages"][0]["content"], json.loads(body["messages"][1]["content"])
        if "reconcilable" in system:
            if "cats" in data["memories"][0]["text"]:
                return 200, chat_answer(json.dumps({"reason": "same cats", "reconcilable": True,
                                                    "merged": "The user has two cats: Luna and Milo."}))
            return 200, chat_answer(json.dumps({"reason": "moved", "reconcilable": False, "merged": None}))
        answer = verdicts(body, lambda new, c: "redundant" if "cats" in new and "cats" in c["text"] else
                          "contradictory" if "lives" in new and "lives" in c["text"] else "independent", "compared")
        return 200, chat_answer(f'```json\n{answer}\n```',
                                prompt_tokens=50, completion_tokens=9)

    with fake_openai_server() as server:
        server.chat = chat
        result = run_dedup(neo4j, tenant, instance, judge=_chat_judge(server.base_url))
        bodies = [body for path, body in server.requests if path.endswith("/chat/completions")]

    assert result.success
    judged = metadata(result, "relation_judgments")
    assert judged["judge_calls"] == -(-judged["nodes_judged"] // 4) and judged["failed"] == 0  # four new a call
    assert judged["nodes_judged"] < judged["pairs"]
    assert judged["prompt_tokens"] == 50 * judged["judge_calls"]
    assert all(b["model"] == "test-model" and b["response_format"]["type"] == "json_schema" for b in bodies)
    graph = nodes(neo4j, tenant)
    active = sorted(n["memory"] for n in graph.values() if n["status"] == "activated")
    assert active == ["The user has two cats: Luna and Milo.", "The user lives in Paris."]
    assert graph[ids[2]]["status"] == "archived"
    [merged] = [n for n in graph.values() if n["memory"].endswith(": Luna and Milo.")]
    assert "dedup_checked_at" not in merged  # new fused text: compared again by the next run


def test_sensor_requests_exactly_the_tenants_with_pending_nodes(neo4j, instance, tenant):
    pending, done, working_only = tenant, tenant + "_done", tenant + "_wm"
    write_items(neo4j, pending, ["The user likes jazz."])
    write_items(neo4j, done, ["The user likes tea."])
    assert run_dedup(neo4j, done, instance).success
    write_items(neo4j, working_only, ["The user is cooking."], memory_type="WorkingMemory")

    with dg.build_sensor_context(instance=instance, resources={"neo4j": neo4j}) as context:
        result = dedup_sensor(context)

    requested = [r.partition_key for r in result.run_requests]
    assert {pending, done, working_only}.intersection(requested) == {pending}
    assert len(requested) == len(set(requested))
    added = {key for req in result.dynamic_partitions_requests for key in req.partition_keys}
    assert pending in added and done not in added

    with dg.build_sensor_context(instance=instance, resources={"neo4j": neo4j},
                                 cursor=result.cursor) as context:
        again = dedup_sensor(context)
    assert pending not in {r.partition_key for r in again.run_requests}

    with neo4j.session() as session:  # another writer edits a checked memory: compared again
        session.run("MATCH (n:MemoryItem {user_name: $t}) SET n.memory = 'The user likes green tea.', "
                    "n.updated_at = n.dedup_checked_at + duration('PT1S')", t=done).consume()
    with dg.build_sensor_context(instance=instance, resources={"neo4j": neo4j},
                                 cursor=again.cursor) as context:
        edited = dedup_sensor(context)
    assert {r.partition_key for r in edited.run_requests} & {pending, done, working_only} == {done}


def test_checks_fail_on_a_broken_graph(neo4j, instance, tenant):
    a, b = write_items(neo4j, tenant, ["The user likes jazz.", "The user reads novels."])
    with neo4j.session() as session:
        session.run("MATCH (n:MemoryItem {user_name: $t, id: $a}) SET n.status = 'archived'",
                    t=tenant, a=a).consume()
        session.run("MATCH (n:MemoryItem {user_name: $t, id: $b}) "
                    "CREATE (n)-[:RELATE]->(:Topic {user_name: $o, id: 'topic:x'})",
                    t=tenant, b=b, o=tenant + "_other").consume()

    try:
        result = run_dedup(neo4j, tenant, instance, with_checks=True)
    finally:  # the shared test database must not keep a cross-tenant edge for other tests to see
        with neo4j.session() as session:
            session.run("MATCH (t:Topic {user_name: $o, id: 'topic:x'}) DETACH DELETE t",
                        o=tenant + "_other").consume()

    outcome = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcome == {"no_duplicate_payloads": True, "archived_have_successor": False,
                       "lineage_edges_unique": True, "no_cross_tenant_edges": False,
                       "archived_left_their_topics": True, "judge_failures": True}
