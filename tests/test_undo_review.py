"""See before, undo after, on the real Neo4j through the real dedup assets: undoing a run gives
the graph back as it was before the run (apart from the undo's own record), twice is refused, the
next run does not redo it; a resolution undone alone; unsure pairs queued, answered and respected;
a memory's history; a tenant marked incomplete refuses runs. The judge is an LLM over HTTP whose
answers the test scripts (tests/test_resolution.py's ``ScriptedModel``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import dagster as dg
import pytest

from mem_assets.dedup import queries
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.history import memory_history
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.dedup.review_queue import ReviewError, answer, export
from mem_assets.dedup.undo import UndoError, undo
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.backup_codec import encode_properties
from mem_resources.llm import OpenAIChatResource
from mem_resources.tenant_lock import TenantIncomplete, incomplete_operation, refuse_if_incomplete
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file
from tests.test_resolution import EVERY_PAIR, ScriptedModel, _contradicts, _item

OLD, NEW = "Rosa lives in Lisbon.", "Rosa lives in Porto."
CATS, CATS_AGAIN = "Rosa is allergic to cats.", "Rosa has a cat allergy."
TWINS_A, TWINS_B = "Rosa has two children.", "Rosa has three kids."
RELATIONS = {**_contradicts(OLD, NEW), frozenset((CATS, CATS_AGAIN)): "redundant"}


def _resources(neo4j, inbox, server) -> dict[str, Any]:
    return {**base_resources(neo4j, inbox, inbox.parent / "quarantine"),
            "judge": OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0))}


def _dedup(neo4j, tenant, instance, server, inbox, relations) -> dg.ExecuteInProcessResult:
    server.chat = ScriptedModel(relations)
    result = materialize_partition([dedup_candidates, relation_judgments, merged_nodes, *dedup_checks],
                                   tenant, instance, _resources(neo4j, inbox, server), EVERY_PAIR)
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    return result


def _meta(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _memory_graph(neo4j, tenant) -> dict[str, Any]:
    """Every memory node (properties, type-tagged) and every edge between the tenant's nodes, by id."""
    with neo4j.session() as session:
        nodes = {r["id"]: json.dumps(encode_properties(r["p"]), sort_keys=True) for r in session.run(
            "MATCH (n:MemoryItem {user_name: $t}) RETURN n.id AS id, properties(n) AS p", t=tenant)}
        edges = sorted(json.dumps([r["a"], r["type"], r["b"], encode_properties(r["p"])], sort_keys=True)
                       for r in session.run(
            "MATCH (a {user_name: $t})-[r]->(b {user_name: $t}) "
            "RETURN a.id AS a, type(r) AS type, b.id AS b, properties(r) AS p", t=tenant))
    return {"nodes": nodes, "edges": edges}


def _fingerprint(graph: dict[str, Any], ids: set[str]) -> str:
    nodes = sorted(v for k, v in graph["nodes"].items() if k in ids)
    edges = [e for e in graph["edges"] if json.loads(e)[0] in ids and json.loads(e)[2] in ids]
    return hashlib.sha256(json.dumps([nodes, edges]).encode()).hexdigest()


def _seed(neo4j, tenant, instance, server, tmp_path):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "2026-03-01.jsonl", [_item(OLD), _item(CATS)])
    write_inbox_file(inbox, tenant, "2026-03-02.jsonl", [_item(NEW, "2026-03-02T10:00:00Z"),
                                                         _item(CATS_AGAIN, "2026-03-02T10:00:00Z")])
    server.chat = ScriptedModel({})
    assert materialize_partition([memory_items], tenant, instance, _resources(neo4j, inbox, server)).success
    with neo4j.session() as session:  # topics of an earlier reorganization, and a mention
        session.run(
            """
            UNWIND [['topic:home', $old], ['topic:health', $cats], ['topic:health', $cats_again]] AS row
            MATCH (f:MemoryItem {user_name: $t, memory: row[1], memory_type: 'LongTermMemory'})
            MERGE (p:Node:MemoryItem {user_name: $t, id: row[0]})
            ON CREATE SET p.memory = row[0], p.type = 'topic', p.memory_type = 'LongTermMemory',
                          p.status = 'activated', p.reorg_level = 1
            CREATE (p)-[:PARENT {created_at: datetime('2026-03-01T00:00:00Z')}]->(f)
            WITH f WHERE f.memory = $cats
            MERGE (c:Character {user_name: $t, id: 'char:rosa'})
            CREATE (f)-[:MENTIONS {weight: 0.5}]->(c)
            """, t=tenant, old=OLD, cats=CATS, cats_again=CATS_AGAIN).consume()
    return inbox


def test_undo_of_a_run_gives_the_graph_back_and_the_next_run_does_not_redo_it(
        neo4j, instance, tenant, tmp_path, model):
    inbox = _seed(neo4j, tenant, instance, model, tmp_path)
    before = _memory_graph(neo4j, tenant)
    result = _dedup(neo4j, tenant, instance, model, inbox, RELATIONS)
    merged = _meta(result, "merged_nodes")
    assert (merged["merges"], merged["supersedes"]) == (1, 1)
    assert merged["undo"] == f"memtend undo {tenant} --run {result.run_id}"
    assert len(merged["changes"].records) == 2
    assert _memory_graph(neo4j, tenant) != before

    with pytest.raises(UndoError, match="resolved nothing"):
        undo(neo4j, tenant, run_id="no-such-run")
    with pytest.raises(UndoError, match="resolved nothing"):
        undo(neo4j, "t_someone_else", run_id=result.run_id)
    report = undo(neo4j, tenant, run_id=result.run_id)
    assert sorted(r["kind"] for r in report.undone) == ["merge", "supersede"]

    after = _memory_graph(neo4j, tenant)
    assert _fingerprint(after, set(before["nodes"])) == _fingerprint(before, set(before["nodes"]))
    [fused] = set(after["nodes"]) - set(before["nodes"])
    fused_props = json.loads(after["nodes"][fused])
    assert fused_props["status"] == "archived" and fused_props["archived_reason"] == "undone"
    assert not [e for e in after["edges"] if fused in (json.loads(e)[0], json.loads(e)[2])]
    with pytest.raises(UndoError, match="already undone"):
        undo(neo4j, tenant, run_id=result.run_id)
    with pytest.raises(UndoError, match="already undone"):
        undo(neo4j, tenant, resolution_id=report.undone[0]["id"])
    assert _memory_graph(neo4j, tenant) == after

    calls = len(model.chat_calls())
    rerun = _dedup(neo4j, tenant, instance, model, inbox, RELATIONS)
    merged = _meta(rerun, "merged_nodes")
    assert (merged["merges"], merged["supersedes"]) == (0, 0)
    assert _meta(rerun, "relation_judgments")["reviewed_pairs"] == 2
    assert len(model.chat_calls()) == calls  # judged from the cache, no resolver asked
    again = _dedup(neo4j, tenant, instance, model, inbox, RELATIONS)
    assert _meta(again, "dedup_candidates")["pairs"] == 0

    lines = memory_history(neo4j, tenant, before_ids(before, NEW))
    assert any("supersede" in line and result.run_id in line for line in lines)
    assert any("undone" in line for line in lines)


def before_ids(graph: dict[str, Any], text: str) -> str:
    """The long-term memory of this text."""
    return next(k for k, v in graph["nodes"].items() if text in v and "LongTermMemory" in v)


def test_one_resolution_undone_alone(neo4j, instance, tenant, tmp_path, model):
    inbox = _seed(neo4j, tenant, instance, model, tmp_path)
    before = _memory_graph(neo4j, tenant)
    result = _dedup(neo4j, tenant, instance, model, inbox, RELATIONS)
    with neo4j.session() as session:
        records = session.execute_read(queries.resolutions_of_run, tenant, result.run_id)
    merge = next(r for r in records if r["kind"] == "merge")
    undo(neo4j, tenant, resolution_id=merge["id"])
    after = _memory_graph(neo4j, tenant)
    cats = {k for k, v in before["nodes"].items() if "cat" in v}
    assert all(after["nodes"][k] == before["nodes"][k] for k in cats)
    lisbon = next(k for k, v in after["nodes"].items() if OLD in v and "LongTermMemory" in v)
    assert '"archived"' in after["nodes"][lisbon]  # the supersede stays
    with pytest.raises(UndoError, match="no resolution"):
        undo(neo4j, "t_other_tenant", resolution_id=merge["id"])


def test_unsure_pairs_are_queued_answered_and_respected(neo4j, instance, tenant, tmp_path, model):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "session.jsonl", [_item(TWINS_A), _item(TWINS_B)])
    model.chat = ScriptedModel({})
    assert materialize_partition([memory_items], tenant, instance, _resources(neo4j, inbox, model)).success
    result = _dedup(neo4j, tenant, instance, model, inbox, _contradicts(TWINS_A, TWINS_B))
    merged = _meta(result, "merged_nodes")
    assert merged["unresolved"] == 1 and merged["review_queue"] == 1
    [row] = merged["review_queue_pairs"].records
    assert {row.data["first_text"], row.data["second_text"]} == {TWINS_A, TWINS_B}
    with neo4j.session() as session:
        [item] = session.execute_read(queries.reviews, tenant, "pending")
    with pytest.raises(ReviewError, match="--keep"):
        answer(neo4j, tenant, item["id"], accept=True)
    keep = item["second_id"]
    answered = answer(neo4j, tenant, item["id"], accept=True, keep=keep)
    assert answered["label"] == "contradictory" and answered["resolution_id"]
    with pytest.raises(ReviewError, match="already answered"):
        answer(neo4j, tenant, item["id"], accept=False)
    with neo4j.session() as session:
        states = dict(session.run("MATCH (n:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) "
                                  "RETURN n.id, n.status", t=tenant).values())
    assert states[keep] == "activated" and states[item["first_id"]] == "archived"
    path = tmp_path / "reviewed.jsonl"
    assert export(neo4j, tenant, path) == 1
    assert json.loads(path.read_text("utf-8"))["label"] == "contradictory"
    undo(neo4j, tenant, resolution_id=answered["resolution_id"])
    with neo4j.session() as session:
        labels = session.execute_read(queries.reviews, tenant, "answered")
    assert [v["label"] for v in labels] == ["independent"]


def test_an_incomplete_tenant_refuses_runs_and_names_the_finishing_command(neo4j, instance, tenant, tmp_path, model):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "s.jsonl", [_item(OLD)])

    class Killed(Exception):
        pass

    with pytest.raises(Killed), incomplete_operation(neo4j, tenant, f"memtend undo {tenant} --run r1"):
        raise Killed
    with pytest.raises(dg.DagsterResourceFunctionError) as refused:
        materialize_partition([memory_items], tenant, instance, _resources(neo4j, inbox, model))
    assert f"run `memtend undo {tenant} --run r1` to finish it" in str(refused.value.__cause__)
    with pytest.raises(TenantIncomplete, match="stopped midway"):
        refuse_if_incomplete(neo4j, tenant)
    with incomplete_operation(neo4j, tenant, "finished"):
        pass
    assert materialize_partition([memory_items], tenant, instance, _resources(neo4j, inbox, model)).success
