"""What a resolution means, on the real Neo4j, through ingest and dedup in Dagster: newer is
created_at then arrival (file, then line), never an id; a contradiction of one moment is kept
both and reported; archiving takes the working twin along and moves topic edges; chains end at
the newest in one run. The judge is an LLM over HTTP whose answers the test scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.ingest.assets import memory_items
from mem_resources.llm import OpenAIChatResource
from mem_resources.memory_model import memory_id, payload_hash
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.fake_openai import FakeOpenAI, chat_answer, verdicts
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    write_inbox_file,
)

EVERY_PAIR = {"ops": {"dedup_candidates": {"config": {"threshold": -1.0}}}}


class ScriptedModel:
    """Answers like a careful model: a relation per pair of texts (default independent); never
    reconciles a contradiction; fuses a redundant group into its first text."""

    def __init__(self, relations: dict[frozenset[str], str]) -> None:
        self.relations = relations

    def __call__(self, body: dict) -> tuple[int, Any]:
        system, data = body["messages"][0]["content"], json.loads(body["messages"][1]["content"])
        if "reconcilable" in system:
            redundant = data["relation"] == "redundant"
            return 200, chat_answer(json.dumps({
                "reason": "scripted", "reconcilable": redundant,
                "merged": data["memories"][-1]["text"] if redundant else None}))
        return 200, chat_answer(verdicts(
            body, lambda new, c: self.relations.get(frozenset((new, c["text"])), "independent")))


def _run(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance, server: FakeOpenAI,
         inbox: Path, relations: dict[frozenset[str], str]) -> dg.ExecuteInProcessResult:
    server.chat = ScriptedModel(relations)
    resources = {**base_resources(neo4j, inbox, inbox.parent / "quarantine"),
                 "judge": OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0))}
    result = materialize_partition([memory_items, dedup_candidates, relation_judgments, merged_nodes,
                                    *dedup_checks], tenant, instance, resources, EVERY_PAIR)
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    return result


def _nodes(neo4j: Neo4jResource, tenant: str) -> dict[str, dict[str, Any]]:
    with neo4j.session() as session:
        return {r["p"]["memory"] + ("#wm" if r["p"]["memory_type"] == "WorkingMemory" else ""): r["p"]
                for r in session.run("MATCH (n:MemoryItem {user_name: $t}) RETURN properties(n) AS p",
                                     t=tenant)}


def _edges(neo4j: Neo4jResource, tenant: str, kind: str) -> set[tuple[str, str]]:
    with neo4j.session() as session:
        return {(r["a"], r["b"]) for r in session.run(
            f"MATCH (a:MemoryItem {{user_name: $t}})-[:{kind}]->(b) RETURN a.memory AS a, b.memory AS b",
            t=tenant)}


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _item(text: str, at: str | None = "2026-03-01T10:00:00Z") -> dict[str, Any]:
    return {"memory": text, **({"created_at": at} if at else {})}


def _contradicts(a: str, b: str) -> dict[frozenset[str], str]:
    return {frozenset((a, b)): "contradictory"}


CITIES = ("Porto", "Faro", "Braga", "Evora", "Coimbra", "Sintra", "Aveiro", "Viseu", "Leiria",
          "Tavira", "Lagos", "Guarda")


def test_same_created_at_the_later_file_is_newer_whatever_the_ids(neo4j, instance, tenant, tmp_path, model):
    def mid(text: str) -> str:
        return memory_id(payload_hash(tenant, "LongTermMemory", text))

    homes = [f"Rosa lives in {c}." for c in ("Lisbon", *CITIES)]
    works = [f"Rosa works in {c}." for c in ("Lisbon", *CITIES)]
    # Ids depend on the (random) tenant: pick the pairs so the newer id sorts after, then before.
    pairs = [next((a, b) for a in homes for b in homes if mid(b) > mid(a)),
             next((a, b) for a in works for b in works if mid(b) < mid(a))]
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "2026-03-01.jsonl", [_item(old) for old, _ in pairs])
    write_inbox_file(inbox, tenant, "2026-03-02.jsonl", [_item(new) for _, new in pairs])

    result = _run(neo4j, tenant, instance, model, inbox,
                  {**_contradicts(*pairs[0]), **_contradicts(*pairs[1])})

    assert _meta(result, "merged_nodes")["supersedes"] == 2
    assert _edges(neo4j, tenant, "SUPERSEDED_BY") == set(pairs)
    graph = _nodes(neo4j, tenant)
    assert all(graph[new]["status"] == "activated" and graph[old]["status"] == "archived" for old, new in pairs)
    assert graph[pairs[0][0]]["arrival"].endswith("|2026-03-01.jsonl|000000001")


def test_created_at_decides_before_arrival(neo4j, instance, tenant, tmp_path, model):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "a.jsonl", [_item("Rosa lives in Porto.", "2026-04-02T10:00:00Z")])
    write_inbox_file(inbox, tenant, "b.jsonl", [_item("Rosa lives in Lisbon.", "2026-03-01T10:00:00Z")])

    _run(neo4j, tenant, instance, model, inbox, _contradicts("Rosa lives in Lisbon.", "Rosa lives in Porto."))

    assert _edges(neo4j, tenant, "SUPERSEDED_BY") == {("Rosa lives in Lisbon.", "Rosa lives in Porto.")}


@pytest.mark.parametrize("at", ["2026-03-01T10:00:00Z", None], ids=["same created_at", "no created_at"])
def test_a_contradiction_of_one_moment_keeps_both_and_says_why(neo4j, instance, tenant, tmp_path, model, at):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "session.jsonl",
                     [_item("Rosa has two children.", at), _item("Rosa has three kids.", at)])

    result = _run(neo4j, tenant, instance, model, inbox,
                  _contradicts("Rosa has two children.", "Rosa has three kids."))

    merged = _meta(result, "merged_nodes")
    assert (merged["supersedes"], merged["merges"], merged["unresolved"]) == (0, 0, 1)
    [row] = merged["unresolved_pairs"].records
    assert {row.data["first"], row.data["second"]} == {"Rosa has two children.", "Rosa has three kids."}
    assert "same moment" in row.data["reason"] and "session.jsonl" in row.data["reason"]
    graph = _nodes(neo4j, tenant)
    for text in ("Rosa has two children.", "Rosa has three kids."):
        assert graph[text]["status"] == "activated" and "dedup_checked_at" in graph[text]
    calls = len(model.chat_calls())
    rerun = _run(neo4j, tenant, instance, model, inbox, {})
    assert len(model.chat_calls()) == calls and _meta(rerun, "merged_nodes")["unresolved"] == 0


def test_archiving_takes_the_working_twin_along_and_moves_topic_edges(neo4j, instance, tenant, tmp_path, model):
    old, new = "Rosa lives in Lisbon.", "Rosa lives in Porto."
    cats, cats_again = "Rosa is allergic to cats.", "Rosa has a cat allergy."
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "2026-03-01.jsonl", [_item(old), _item(cats)])
    write_inbox_file(inbox, tenant, "2026-03-02.jsonl", [_item(new, "2026-03-02T10:00:00Z"),
                                                         _item(cats_again, "2026-03-02T10:00:00Z")])
    server = model
    server.chat = ScriptedModel({})
    resources = base_resources(neo4j, inbox, tmp_path / "q")
    assert materialize_partition([memory_items], tenant, instance, resources).success
    with neo4j.session() as session:  # topics from an earlier reorganization: home and health
        session.run(
            """
            UNWIND [['topic:home', $old], ['topic:health', $cats], ['topic:health', $cats_again]] AS row
            MATCH (f:MemoryItem {user_name: $t, memory: row[1], memory_type: 'LongTermMemory'})
            MERGE (p:Node:MemoryItem {user_name: $t, id: row[0]})
            ON CREATE SET p.memory = row[0], p.type = 'topic', p.memory_type = 'LongTermMemory',
                          p.status = 'activated', p.reorg_level = 1
            CREATE (p)-[:PARENT]->(f)
            """, t=tenant, old=old, cats=cats, cats_again=cats_again).consume()

    result = _run(neo4j, tenant, instance, model, inbox,
                  {**_contradicts(old, new), frozenset((cats, cats_again)): "redundant"})

    merged = _meta(result, "merged_nodes")
    assert (merged["supersedes"], merged["merges"], merged["working_twins_archived"]) == (1, 1, 3)
    with neo4j.session() as session:
        graph = {r["id"]: r["p"] for r in session.run(
            "MATCH (n:MemoryItem {user_name: $t}) RETURN n.id AS id, properties(n) AS p", t=tenant)}

    def node(text: str, memory_type: str = "LongTermMemory") -> dict[str, Any]:
        return graph[memory_id(payload_hash(tenant, memory_type, text))]

    for archived in (old, cats, cats_again):
        assert node(archived)["status"] == node(archived, "WorkingMemory")["status"] == "archived"
    assert node(old, "WorkingMemory")["archived_reason"] == "superseded"
    assert node(cats, "WorkingMemory")["archived_reason"] == "merged"
    assert node(new, "WorkingMemory")["status"] == "activated"
    parents = _edges(neo4j, tenant, "PARENT")
    assert parents == {("topic:home", new), ("topic:health", cats_again)}  # merged text: the newest


def test_a_topic_pointing_at_an_archived_member_fails_the_check(neo4j, instance, tenant, tmp_path, model):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "s.jsonl", [_item("Rosa likes jazz."), _item("Rosa reads novels.")])
    server = model
    server.chat = ScriptedModel({})
    resources = {**base_resources(neo4j, inbox, tmp_path / "q"),
                 "judge": OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0))}
    assert materialize_partition([memory_items], tenant, instance, resources).success
    with neo4j.session() as session:
        session.run(
            """
            MATCH (f:MemoryItem {user_name: $t, memory: 'Rosa likes jazz.', memory_type: 'LongTermMemory'})
            SET f.status = 'archived'
            CREATE (:Node:MemoryItem {user_name: $t, id: 'topic:music', memory: 'music', type: 'topic',
                                      memory_type: 'LongTermMemory', status: 'activated'})-[:PARENT]->(f)
            """, t=tenant).consume()
    result = materialize_partition([dedup_candidates, relation_judgments, merged_nodes, *dedup_checks],
                                   tenant, instance, resources)
    outcome = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert outcome["archived_left_their_topics"] is False


@pytest.mark.parametrize("a_contradicts_c", [True, False], ids=["all pairs", "a chain only"])
def test_a_chain_resolves_in_one_run_to_the_newest(neo4j, instance, tenant, tmp_path, model, a_contradicts_c):
    a, b, c = "Rosa lives in Lisbon.", "Rosa moved to Porto.", "Rosa moved on to Madrid."
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "s.jsonl", [_item(a, "2026-03-01T10:00:00Z"),
                                                 _item(b, "2026-03-10T10:00:00Z"),
                                                 _item(c, "2026-03-20T10:00:00Z")])
    relations = {**_contradicts(a, b), **_contradicts(b, c), **(_contradicts(a, c) if a_contradicts_c else {})}

    result = _run(neo4j, tenant, instance, model, inbox, relations)

    assert _meta(result, "merged_nodes")["supersedes"] == 2
    assert _edges(neo4j, tenant, "SUPERSEDED_BY") == {(a, c), (b, c)}
    graph = _nodes(neo4j, tenant)
    assert graph[c]["status"] == "activated" and graph[a]["status"] == graph[b]["status"] == "archived"
    assert graph[a]["evolve_to"] == graph[b]["evolve_to"] == [graph[c]["id"]]
    history = json.loads(graph[c]["history"])
    assert [entry["memory"] for entry in history] == [a, b]
    assert graph[c]["version"] == 3


@pytest.mark.parametrize("shape", ["chain", "star"])
def test_a_merge_absorbs_only_memories_judged_redundant_with_its_survivor(neo4j, instance, tenant, tmp_path,
                                                                           model, shape):
    """C, checked by an earlier run, then A and B arrive. A chain A≈B, B≈C with A≉C (judged)
    merges A and B into A, the most informative text; C, related to A only through B, stays
    activated and apart, checked by the same run: a rerun changes nothing and asks the judge
    nothing. A star A≈B, A≈C still merges all three."""
    survivor, lives = "Mia lives in Oslo and works as a nurse.", "Mia lives in Oslo."
    other = "Mia works in Oslo." if shape == "chain" else "Mia works as a nurse."
    inbox = tmp_path / "inbox"
    relations = {frozenset((survivor, lives)): "redundant",
                 frozenset((lives, other) if shape == "chain" else (survivor, other)): "redundant"}
    write_inbox_file(inbox, tenant, "earlier.jsonl", [_item(other, "2026-03-05T10:00:00Z")])
    _run(neo4j, tenant, instance, model, inbox, relations)
    assert _nodes(neo4j, tenant)[other].get("dedup_checked_at") is not None
    write_inbox_file(inbox, tenant, "later.jsonl", [_item(lives, "2026-03-01T10:00:00Z"),
                                                     _item(survivor, "2026-03-10T10:00:00Z")])

    first = _run(neo4j, tenant, instance, model, inbox, relations)

    def absorbed_only_what_was_judged_redundant() -> None:
        for source, merged in _edges(neo4j, tenant, "MERGED_TO"):
            assert source == merged or relations.get(frozenset((source, merged))) == "redundant", (source, merged)

    absorbed_only_what_was_judged_redundant()
    graph = _nodes(neo4j, tenant)
    if shape == "star":
        assert _edges(neo4j, tenant, "MERGED_TO") == {(t, survivor) for t in (survivor, lives, other)}
        assert _meta(first, "merged_nodes")["left_out_of_merges"] == 0
        return
    assert _edges(neo4j, tenant, "MERGED_TO") == {(survivor, survivor), (lives, survivor)}
    assert _meta(first, "merged_nodes")["left_out_of_merges"] == 1
    assert graph[other]["status"] == "activated" and graph[other].get("dedup_checked_at") is not None
    calls = len(model.chat_calls())

    second = _run(neo4j, tenant, instance, model, inbox, relations)

    assert len(model.chat_calls()) == calls
    assert _meta(second, "dedup_candidates")["unchecked_nodes"] == 0
    assert _meta(second, "merged_nodes")["merges"] == 0
    assert _nodes(neo4j, tenant) == graph
