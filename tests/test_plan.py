"""`memtend plan` on the real Neo4j: it changes no memory (the graph's fingerprint, judgment cache
aside, is the same after it), and the real dedup + reorganization run that follows makes exactly
the planned merges, supersedes and placements — even with a judge that answers otherwise the
second time, since the run reads the plan's judgments back from the cache. The judge is an LLM
over HTTP whose answers the test scripts (tests/test_resolution.py's ``ScriptedModel``)."""

from __future__ import annotations

import csv
import hashlib
import json
from typing import Any

import dagster as dg
import pytest
from typer.testing import CliRunner

from mem_assets.cli import app
from mem_assets.dedup.assets import DedupConfig, dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.llm_judge_prompt import FUSE_SYSTEM
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.backup_codec import encode_properties
from mem_assets.planning import PLAN_COLUMNS, plan_tenant
from mem_assets.reorg.assets import CandidatesConfig, memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.llm_placement import OfflinePlacer
from mem_assets.reorg.summarizers import ExtractiveSummarizer
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_resources.llm import OpenAIChatResource
from mem_resources.tenant_lock import TenantIncomplete, incomplete_operation, refuse_if_incomplete
from tests.support.pipeline import base_resources, materialize_partition, write_inbox_file
from tests.test_resolution import ScriptedModel, _contradicts, _item

OLD, NEW = "Rosa lives in Lisbon.", "Rosa lives in Porto."
CATS, CATS_AGAIN = "Rosa is allergic to cats.", "Rosa is allergic to cats!"
RELATIONS = {**_contradicts(OLD, NEW), frozenset((CATS, CATS_AGAIN)): "redundant"}
UNPLACED = [f"I cooked {dish} with garlic in the kitchen for dinner" for dish in ("pasta", "curry", "soup", "risotto")] \
    + [f"Booked the flight and the hotel for my trip to {city}" for city in ("Kyoto", "Vienna", "Cairo", "Bali")]
DEDUP = DedupConfig(threshold=-1.0)
REORG = CandidatesConfig(min_group_size=3)
RUN_CONFIG = {"ops": {"dedup_candidates": {"config": {"threshold": -1.0}},
                      "reorg_candidates": {"config": {"min_group_size": 3}}}}
TOPICS = TopicVectorsResource(e5_languages=[], combined_languages=[])


def _resources(neo4j, inbox, server) -> dict[str, Any]:
    return {**base_resources(neo4j, inbox, inbox.parent / "quarantine"),
            "judge": OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0)),
            "topic_vectors": TOPICS, "summarizer": ExtractiveSummarizer(),
            "topic_placer": OfflinePlacer()}


def fingerprint(neo4j, tenant) -> str:
    """Every node of the tenant but the judgment cache (properties, type-tagged) and every edge
    between them."""
    with neo4j.session() as session:
        nodes = sorted(json.dumps([sorted(r["labels"]), encode_properties(r["p"])], sort_keys=True)
                       for r in session.run("MATCH (n {user_name: $t}) WHERE NOT n:DedupJudgment "
                                            "RETURN labels(n) AS labels, properties(n) AS p", t=tenant))
        edges = sorted(json.dumps([r["a"], r["type"], r["b"], encode_properties(r["p"])], sort_keys=True)
                       for r in session.run(
            "MATCH (a {user_name: $t})-[r]->(b {user_name: $t}) WHERE NOT a:DedupJudgment AND NOT b:DedupJudgment "
            "RETURN a.id AS a, type(r) AS type, b.id AS b, properties(r) AS p", t=tenant))
    return hashlib.sha256(json.dumps([nodes, edges]).encode()).hexdigest()


def _seed(neo4j, tenant, instance, server, tmp_path):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, "2026-03-01.jsonl", [_item(OLD), _item(CATS), *map(_item, UNPLACED)])
    write_inbox_file(inbox, tenant, "2026-03-02.jsonl", [_item(NEW, "2026-03-02T10:00:00Z"),
                                                         _item(CATS_AGAIN, "2026-03-02T10:00:00Z")])
    server.chat = ScriptedModel({})
    assert materialize_partition([memory_items], tenant, instance, _resources(neo4j, inbox, server)).success
    return inbox


def _parents(neo4j, tenant) -> dict[str, set[str]]:
    with neo4j.session() as session:
        rows = session.run("MATCH (t:MemoryItem {user_name: $t, type: 'topic', status: 'activated'})-[:PARENT]->"
                           "(m:MemoryItem {user_name: $t}) RETURN m.id AS m, t.id AS t", t=tenant)
        out: dict[str, set[str]] = {}
        for row in rows:
            out.setdefault(row["m"], set()).add(row["t"])
    return out


def test_the_plan_writes_no_memory_and_the_run_makes_exactly_the_planned_decisions(
        neo4j, instance, tenant, tmp_path, model):
    inbox = _seed(neo4j, tenant, instance, model, tmp_path)
    resources = _resources(neo4j, inbox, model)
    before = fingerprint(neo4j, tenant)
    model.chat = ScriptedModel(RELATIONS)
    with neo4j.lease(tenant, info="test plan"):
        plan = plan_tenant(neo4j, tenant, resources["embedder"], resources["judge"], TOPICS, DEDUP, REORG)
    assert fingerprint(neo4j, tenant) == before
    table = plan.table
    assert plan.counts["merge"] == 1 and plan.counts["supersede"] == 1
    [merge] = table[table["kind"] == "merge"].to_dict("records")
    assert set(merge["source_texts"].split(" | ")) == {CATS, CATS_AGAIN}
    [supersede] = table[table["kind"] == "supersede"].to_dict("records")
    assert supersede["text"] == NEW and supersede["score"] is not None
    placed = table[table["kind"] == "placement"]
    unplaced = table[table["kind"] == "unplaced"]
    assert len(placed) >= 3
    assert merge["result"] in set(placed["ids"]) | set(unplaced["ids"])  # planned on the graph after the merge

    model.chat = ScriptedModel({})  # the judge changed its mind: the run reads the plan's judgments
    calls = len(model.chat_calls())
    result = materialize_partition([dedup_candidates, relation_judgments, merged_nodes, reorg_candidates,
                                    memory_clusters, summary_parents], tenant, instance, resources, RUN_CONFIG)
    assert result.success
    [done] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("merged_nodes")]
    assert done.materialization.metadata["merges"].value == 1
    with neo4j.session() as session:
        merged = session.run("MATCH (s:MemoryItem {user_name: $t})-[:MERGED_TO]->(m) "
                             "RETURN m.id AS m, collect(s.id) AS s", t=tenant).data()
        superseded = session.run("MATCH (o:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'})"
                                 "-[:SUPERSEDED_BY]->(n) RETURN o.id AS o, n.id AS n", t=tenant).data()
    assert {(r["m"], tuple(sorted(r["s"]))) for r in merged} == {(merge["result"], tuple(merge["ids"].split(" | ")))}
    assert [(r["o"], r["n"]) for r in superseded] == [tuple(supersede["ids"].split(" | "))]
    parents = _parents(neo4j, tenant)
    assert {m: parents.get(m) for m in placed["ids"]} == {m: {t} for m, t in zip(placed["ids"], placed["result"],
                                                                                 strict=True)}
    assert all(m not in parents for m in unplaced["ids"])
    asked = [body["messages"][0]["content"] for body in model.chat_calls()[calls:]]
    assert asked == [FUSE_SYSTEM, FUSE_SYSTEM]  # the resolver only (a merge, a contradiction): no pair judged again


def test_memtend_plan_writes_json_and_csv_and_refuses_an_incomplete_tenant(
        neo4j, neo4j_uri, instance, tenant, tmp_path, model, monkeypatch):
    _seed(neo4j, tenant, instance, model, tmp_path)
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("MEMTEND_EMBEDDER", "hashing")
    monkeypatch.setenv("MEMTEND_EMBEDDING_DIM", str(neo4j.embedding_dimension))
    monkeypatch.setenv("MEMTEND_TOPIC_COMBINED_LANGUAGES", "none")
    monkeypatch.setenv("MEMTEND_OFFLINE_JUDGE", "fast")
    before = fingerprint(neo4j, tenant)
    out = tmp_path / "plan"
    result = CliRunner().invoke(app, ["plan", tenant, "--out", str(out), "--min-group-size", "3"])
    assert result.exit_code == 0, result.output
    assert f"plan of {tenant}:" in result.output and str(out / "plan.csv") in result.output
    assert fingerprint(neo4j, tenant) == before
    with (out / "plan.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == PLAN_COLUMNS
    document = json.loads((out / "plan.json").read_text("utf-8"))
    assert document["tenant"] == tenant and len(document["rows"]) == len(rows)
    assert {row["kind"] for row in rows} & {"placement", "unplaced"}

    with pytest.raises(RuntimeError), incomplete_operation(neo4j, tenant, f"memtend restore {tenant}"):
        raise RuntimeError("killed")
    with pytest.raises(TenantIncomplete):
        refuse_if_incomplete(neo4j, tenant)
    refused = CliRunner().invoke(app, ["plan", tenant, "--out", str(out)])
    assert refused.exit_code == 1
    assert f"memtend restore {tenant}" in refused.output
