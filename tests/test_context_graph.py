"""The context graph on the real Neo4j: one graph from realtime and offline records, MERGEd
metadata under concurrent writers, claim conflicts, the memtend memory contract."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from mem_assets.context_graph.assets import context_graph
from mem_assets.context_graph.loading import (
    ContextIngestReport,
    ParsedRecord,
    write_batch,
)
from mem_assets.context_graph.records import (
    ContextRecord,
    TenantContext,
    context_memory_id,
)
from mem_assets.context_graph.sensors import build_context_inbox_sensor
from mem_assets.ingest.inbox import InboxResource
from mem_resources.embedder import HashingEmbedder
from mem_resources.memory_model import display_name
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.context_sample import load_sample, with_context_config
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    write_inbox_file,
)

context_inbox_sensor = build_context_inbox_sensor(dg.DefaultSensorStatus.RUNNING)

T0 = datetime(2026, 2, 27, 12, 0, tzinfo=UTC)
PROFILE = TenantContext(user_id="xnne", agent_id="congyin", scene="chill_ai_chat",
                        single_valued_predicates=["LIVES_IN"])


def _rows(neo4j: Neo4jResource, query: str, **params: object) -> list[dict]:
    with neo4j.session() as session:
        return [record.data() for record in session.run(query, **params)]


def _value(neo4j: Neo4jResource, query: str, **params: object) -> object:
    [row] = _rows(neo4j, query, **params)
    return next(iter(row.values()))


def _meta(result: dg.ExecuteInProcessResult, asset: str = "context_graph") -> dict:
    [event] = [e for e in result.get_asset_materialization_events()
               if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _write(neo4j: Neo4jResource, tenant: str, records: list[dict], profile: TenantContext = PROFILE) -> ContextIngestReport:
    report = ContextIngestReport()
    parsed = [ParsedRecord(i, ContextRecord.model_validate(r)) for i, r in enumerate(records, 1)]
    rejected = write_batch(tenant, parsed, "test.jsonl", profile, neo4j,
                           HashingEmbedder(dimension=neo4j.embedding_dimension), report, T0)
    assert rejected == []
    return report


def _claim(text: str, minutes: int, obj: str, predicate: str = "LIVES_IN", **extra: object) -> dict:
    return {"memory": text, "created_at": (T0 + timedelta(minutes=minutes)).isoformat(), **extra,
            "claims": [{"predicate": predicate, "domain": "location", "object": obj}]}


def test_realtime_and_offline_records_write_one_graph(neo4j, instance, tmp_path, tenant):
    result = load_sample(neo4j, tenant, instance, tmp_path)
    assert result.success
    meta = _meta(result)
    assert (meta["accepted"], meta["rejected"], meta["claims_superseded"]) == (14, 0, 2)

    counts = {r["type"]: r["n"] for r in _rows(
        neo4j, "MATCH (n {user_name: $t}) RETURN head(labels(n)) AS type, count(*) AS n", t=tenant)}
    assert {k: counts[k] for k in ("Character", "User", "Agent", "Scene", "Conversation")} == {
        "Character": 2, "User": 1, "Agent": 1, "Scene": 1, "Conversation": 5}
    assert {r["id"] for r in _rows(neo4j, "MATCH (c:Conversation {user_name: $t}) RETURN c.id AS id", t=tenant)} == {
        "conv:ch00", "conv:ch01", "conv:ch02", "conv:2026-02-27", "conv:2026-02-28"}

    shared = "[User] 会使用一个小杯子来给茶散热。"
    shared_id = context_memory_id(tenant, ContextRecord(memory=shared, created_at=T0))
    [node] = _rows(neo4j, """
        MATCH (m:MemoryItem {user_name: $t, data: $text, memory_type: 'LongTermMemory'})
        OPTIONAL MATCH (m)-[:FROM_CONV]->(c:Conversation)
        OPTIONAL MATCH (w:MemoryItem {user_name: $t, id: m.working_binding})
        RETURN m {.*, embedding: size(m.embedding)} AS m, labels(m) AS labels, collect(c.id) AS convs,
               w.memory_type AS twin""", t=tenant, text=shared)
    memory = node["m"]
    assert memory["id"] == shared_id == f"mem:{memory['payload_hash']}"
    assert sorted(node["convs"]) == ["conv:2026-02-27", "conv:ch01"]
    assert sorted(node["labels"]) == ["MemoryItem", "Node"]
    assert memory["display"] == memory["name"] == display_name(shared, memory["payload_hash"])
    assert memory["status"] == "activated" and memory["embedding"] == neo4j.embedding_dimension and node["twin"] == "WorkingMemory"
    assert _value(neo4j, "MATCH (m:MemoryItem {user_name: $t, data: $text}) RETURN count(m)",
                  t=tenant, text=shared) == 2, "plain item and context record share one node (+ its twin)"
    assert memory["point_id"] == "0b0f2b5e-51c2-4bd4-9d5e-1f0b8a7d9c03" and memory["isolation"] == "global"

    owners = _rows(neo4j, """
        MATCH (c:Character {user_name: $t})-[:OWNS_MEMORY]->(m:MemoryItem)
        RETURN c.id AS owner, collect(DISTINCT substring(m.data, 0, 7)) AS prefixes""", t=tenant)
    assert {r["owner"]: r["prefixes"] for r in owners} == {"char:xnne": ["[User] "], "char:congyin": ["[Agent]"]}
    assert _value(neo4j, "MATCH (:Agent {user_name: $t, id: 'agent:congyin'})-[:ACTOR]->(c:Character) "
                         "RETURN c.id", t=tenant) == "char:congyin"
    context_memories = _value(neo4j, "MATCH (m:MemoryItem {user_name: $t})-[:IN_SCENE]->(:Scene) "
                                     "RETURN count(DISTINCT m)", t=tenant)
    assert context_memories == 13


def test_rematerializing_changes_nothing(neo4j, instance, tmp_path, tenant):
    load_sample(neo4j, tenant, instance, tmp_path, plain=False)
    shape = "MATCH (n {user_name: $t}) OPTIONAL MATCH (n)-[r]->() RETURN count(DISTINCT n) AS n, count(r) AS r"
    before = _rows(neo4j, shape, t=tenant)
    again = materialize_partition([context_graph], tenant, instance,
                                  with_context_config(base_resources(neo4j, tmp_path / "inbox", tmp_path / "quarantine")))
    meta = _meta(again)
    assert (meta["files_already_ingested"], meta["accepted"], meta["nodes_created"]) == (2, 0, 0)
    assert _rows(neo4j, shape, t=tenant) == before


def test_bad_records_are_quarantined_while_good_ones_land(neo4j, instance, tmp_path, tenant):
    good = {"memory": "[User] likes jasmine tea.", "created_at": T0.isoformat()}
    lines = [good, {"memory": "likes tea", "created_at": T0.isoformat()},
             {**good, "conversation": "yesterday"}, {**good, "scene": "a|b"}, "{not json",
             {**good, "memory": "[Agent] has no agent id.", "user_id": "xnne"}]
    write_inbox_file(tmp_path / "inbox", f"{tenant}/context", "day.jsonl", lines)
    config = tmp_path / "context.json"
    config.write_text(f'{{"tenants": {{"{tenant}": {{"user_id": "xnne", "scene": "chat"}}}}}}')
    resources = with_context_config(base_resources(neo4j, tmp_path / "inbox", tmp_path / "quarantine"), config)
    result = materialize_partition([context_graph], tenant, instance, resources)
    meta = _meta(result)
    assert (meta["accepted"], meta["rejected"]) == (0, 6)
    reasons = {e["line"]: e for e in resources["inbox"].read_quarantine(tenant)}
    assert "[User] or [Agent]" in reasons[2]["reason"]
    assert "neither YYYY-MM-DD nor chNN" in reasons[3]["reason"]
    assert reasons[5]["kind"] == "not_json"
    assert reasons[1]["kind"] == reasons[6]["kind"] == "no_context"

    config.write_text(f'{{"tenants": {{"{tenant}": {{"user_id": "xnne", "agent_id": "c", "scene": "chat"}}}}}}')
    write_inbox_file(tmp_path / "inbox", f"{tenant}/context", "day2.jsonl", [good])
    meta = _meta(materialize_partition([context_graph], tenant, instance, resources))
    assert meta["accepted"] == 1
    assert _value(neo4j, "MATCH (:Character {user_name: $t, id: 'char:xnne'})-[:OWNS_MEMORY]->(m) "
                         "RETURN m.data", t=tenant) == good["memory"]


def test_concurrent_writers_create_one_conversation_and_one_scene(neo4j, tenant):
    writers = 6
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        records = [{"memory": f"[User] message {index}-{k} in the same chat.",
                    "created_at": (T0 + timedelta(seconds=index * 10 + k)).isoformat()} for k in range(5)]
        records.append({"memory": "[Agent] the same reply everyone writes.", "created_at": T0.isoformat()})
        try:
            barrier.wait()
            _write(neo4j, tenant, records)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    def count(query: str) -> int:
        return int(_value(neo4j, query, t=tenant))

    assert count("MATCH (n:Conversation {user_name: $t}) RETURN count(n)") == 1
    assert count("MATCH (n:Scene {user_name: $t}) RETURN count(n)") == 1
    assert count("MATCH (n:Character {user_name: $t}) RETURN count(n)") == 2
    assert count("MATCH (n:Agent {user_name: $t}) RETURN count(n)") == 1
    assert count("MATCH (:Conversation {user_name: $t})-[r:CONV_IN_SCENE]->() RETURN count(r)") == 1
    assert count("MATCH (:Agent {user_name: $t})-[r:ACTOR]->() RETURN count(r)") == 1
    assert count("MATCH (n:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'}) RETURN count(n)") == writers * 5 + 1
    assert count("MATCH (:Character {user_name: $t})-[r:OWNS_MEMORY]->() RETURN count(r)") == writers * 5 + 1


def test_newer_single_valued_claim_supersedes_the_older(neo4j, tenant):
    _write(neo4j, tenant, [_claim("[User] 住在北京。", 0, "北京"),
                           _claim("[User] likes walking.", 1, "walking", predicate="HOBBY")])
    report = _write(neo4j, tenant, [_claim("[User] 搬到了上海。", 5, "上海"),
                                    _claim("[User] likes cycling.", 6, "cycling", predicate="HOBBY")])
    old, new = "claim:LIVES_IN|location|user:xnne|tag:北京", "claim:LIVES_IN|location|user:xnne|tag:上海"
    assert report.superseded == [(old, new)]

    def claims() -> dict[str, dict]:
        return {r["id"]: r for r in _rows(neo4j, """
            MATCH (p:Predicate {user_name: $t})-[:HAS_CLAIM]->(c:Claim)
            OPTIONAL MATCH (c)-[:EVIDENCED_BY]->(m:MemoryItem)
            RETURN c.id AS id, c.status AS status, c.superseded_by AS by, p.id AS predicate,
                   collect(m.data) AS evidence""", t=tenant)}

    state = claims()
    assert state[old]["status"] == "superseded" and state[old]["by"] == new
    assert state[old]["evidence"] == ["[User] 住在北京。"], "the superseded claim keeps its evidence"
    assert state[new]["status"] == "active"
    assert state[old]["predicate"] == state[new]["predicate"] == "pred:char:xnne:location:LIVES_IN"
    hobbies = [c for c in state.values() if c["predicate"].endswith(":HOBBY")]
    assert [c["status"] for c in hobbies] == ["active", "active"], "multi-valued predicates never conflict"

    again = _write(neo4j, tenant, [_claim("[User] 住在北京。", 0, "北京")])
    assert again.superseded == [] and claims() == state, "replaying an old record changes nothing"

    back = _write(neo4j, tenant, [_claim("[User] 又搬回了北京。", 9, "北京")])
    assert back.superseded == [(new, old)]
    state = claims()
    assert state[old]["status"] == "active" and state[old]["by"] is None
    assert sorted(state[old]["evidence"]) == ["[User] 住在北京。", "[User] 又搬回了北京。"]


def test_a_late_older_claim_arrives_superseded(neo4j, tenant):
    _write(neo4j, tenant, [_claim("[User] 搬到了上海。", 5, "上海")])
    report = _write(neo4j, tenant, [_claim("[User] 住在北京。", 0, "北京")])
    assert report.superseded == [("claim:LIVES_IN|location|user:xnne|tag:北京",
                                  "claim:LIVES_IN|location|user:xnne|tag:上海")]


def test_context_of_a_memory_dedup_merged_away_lands_on_the_survivor(neo4j, tenant):
    _write(neo4j, tenant, [{"memory": "[User] drinks oolong.", "created_at": T0.isoformat()},
                           {"memory": "[User] drinks oolong tea daily.", "created_at": T0.isoformat()}])
    with neo4j.session() as session:
        session.run("""
            MATCH (a:MemoryItem {user_name: $t, data: '[User] drinks oolong.', memory_type: 'LongTermMemory'}),
                  (m:MemoryItem {user_name: $t, data: '[User] drinks oolong tea daily.', memory_type: 'LongTermMemory'})
            SET a.status = 'archived' MERGE (a)-[:MERGED_TO]->(m)""", t=tenant).consume()
    _write(neo4j, tenant, [_claim("[User] drinks oolong.", 30, "oolong", predicate="DRINKS",
                                  conversation="2026-03-01")])
    [row] = _rows(neo4j, """
        MATCH (c:Claim {user_name: $t})-[:EVIDENCED_BY]->(m:MemoryItem)
        MATCH (m)-[:FROM_CONV]->(conv:Conversation {id: 'conv:2026-03-01'})
        RETURN m.data AS data, m.status AS status""", t=tenant)
    assert row == {"data": "[User] drinks oolong tea daily.", "status": "activated"}


def test_sensor_requests_a_context_run_per_changed_tenant(tmp_path: Path, neo4j, tenant):
    root = tmp_path / "inbox"
    inbox = InboxResource(root=str(root), quarantine_dir=str(tmp_path / "q"))
    write_inbox_file(root, f"{tenant}/context", "a.jsonl", [{"memory": "[User] a"}])
    write_inbox_file(root, f"{tenant}_plain", "plain.jsonl", [{"memory": "a"}])
    resources = {"inbox": inbox, "neo4j": neo4j}
    with (dg.instance_for_test() as instance,
          dg.build_sensor_context(instance=instance, resources=resources) as context):
        first = context_inbox_sensor(context)
        assert [r.partition_key for r in first.run_requests] == [tenant]
        assert list(first.dynamic_partitions_requests[0].partition_keys) == [tenant]
        instance.add_dynamic_partitions("tenants", [tenant])
        with dg.build_sensor_context(instance=instance, cursor=first.cursor,
                                     resources=resources) as later:
            again = context_inbox_sensor(later)
        assert again.run_requests == [] and not again.dynamic_partitions_requests
