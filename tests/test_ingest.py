"""Ingest through Dagster into the real Neo4j: isolation, idempotency, quarantine, dual write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.assets import memory_items
from mem_resources import memory_queries
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    node_count,
    write_inbox_file,
)

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def _item(text: str, minutes: int = 0, **extra: object) -> dict:
    return {"memory": text, "created_at": (T0 + timedelta(minutes=minutes)).isoformat(), **extra}


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "inbox", tmp_path / "quarantine"


def _meta(result: dg.ExecuteInProcessResult) -> dict:
    [event] = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def _texts(neo4j: Neo4jResource, tenant: str, memory_type: str = "LongTermMemory") -> list[str]:
    with neo4j.session() as session:
        result = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.memory_type = $type "
            "RETURN m.memory AS text ORDER BY text", tenant=tenant, type=memory_type)
        return [r["text"] for r in result]


def test_two_tenants_with_identical_texts_stay_isolated(neo4j, instance, paths, tenant):
    inbox, quarantine = paths
    other = tenant + "_b"
    shared = ["The user has a cat named Mochi.", "用户住在北京。"]
    write_inbox_file(inbox, tenant, "a.jsonl", [_item(t) for t in [*shared, "Only in A."]])
    write_inbox_file(inbox, other, "b.jsonl", [_item(t) for t in shared])
    resources = base_resources(neo4j, inbox, quarantine)

    for name in (tenant, other):
        assert materialize_partition([memory_items], name, instance, resources).success

    assert _texts(neo4j, tenant) == sorted([*shared, "Only in A."])
    assert _texts(neo4j, other) == sorted(shared)
    with neo4j.session() as session:
        ids_a = {r["id"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t}) RETURN m.id AS id", t=tenant)}
        ids_b = {r["id"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t}) RETURN m.id AS id", t=other)}
        assert ids_a.isdisjoint(ids_b)
        read_as_b = session.execute_read(memory_queries.read_memories, other, sorted(ids_a))
    assert read_as_b == []


def test_second_materialization_adds_nothing_and_points_at_the_run_that_did(
        neo4j, instance, paths, tenant):
    inbox, quarantine = paths
    path = write_inbox_file(inbox, tenant, "day1.jsonl",
                            [_item(f"Fact number {i} about the user.", i) for i in range(30)])
    resources = base_resources(neo4j, inbox, quarantine)
    first_run = materialize_partition([memory_items], tenant, instance, resources)
    first = _meta(first_run)
    assert first["new"] == 30 and first["nodes_created"] == 60
    assert first["changed"] is True and first["last_change"] == first_run.run_id
    before = node_count(neo4j, tenant)

    second = _meta(materialize_partition([memory_items], tenant, instance, resources))
    assert second["new"] == 0 and second["files_already_ingested"] == 1
    assert second["changed"] is False and second["last_change"] == first_run.run_id
    assert node_count(neo4j, tenant) == before

    path.touch()
    write_inbox_file(inbox, tenant, "copy.jsonl", [_item("Fact number 3 about the user.", 3)])
    third = _meta(materialize_partition([memory_items], tenant, instance, resources))
    assert third["files_ingested"] == 1 and third["files"] == ["copy.jsonl"]
    assert (third["new"], third["already_present"]) == (0, 1)
    assert third["changed"] is False and third["last_change"] == first_run.run_id
    assert node_count(neo4j, tenant) == before + 1  # only the ledger entry of copy.jsonl


def test_bad_lines_are_quarantined_with_reasons_and_good_lines_land(neo4j, instance, paths, tenant):
    inbox, quarantine = paths
    lines: list[dict | str | bytes] = [
        _item("Good line one."),
        "{this is not json",
        {"tags": ["x"]},
        {"memory": "   "},
        {"memory": "Tags are wrong.", "tags": "not-a-list"},
        {"memory": "x" * 9000},
        b'{"memory": "bad bytes \xff\xfe here"}',
        "[1, 2, 3]",
        _item("Good line two.", 1),
    ]
    write_inbox_file(inbox, tenant, "mixed.jsonl", lines)
    resources = base_resources(neo4j, inbox, quarantine)
    meta = _meta(materialize_partition([memory_items], tenant, instance, resources,
                                       {"ops": {"memory_items": {"config": {"max_text_chars": 8000}}}}))

    assert (meta["accepted"], meta["rejected"]) == (2, 7)
    assert _texts(neo4j, tenant) == ["Good line one.", "Good line two."]
    entries = {e["line"]: e for e in resources["inbox"].read_quarantine(tenant)}
    assert set(entries) == {2, 3, 4, 5, 6, 7, 8}
    assert all(e["file"] == "mixed.jsonl" for e in entries.values())
    assert entries[2]["kind"] == "not_json"
    assert "memory: Field required" in entries[3]["reason"]
    assert "memory: String should have at least 1 character" in entries[4]["reason"]
    assert "tags: Input should be a valid list" in entries[5]["reason"]
    assert entries[6]["kind"] == "too_long" and "9000 characters, limit 8000" in entries[6]["reason"]
    assert entries[7]["kind"] == "invalid_utf8"
    assert entries[8]["kind"] == "not_object"


def test_dual_write_binds_working_memory_and_trims_oldest_first(neo4j, instance, paths, tenant):
    inbox, quarantine = paths
    texts = [f"Working fact {i}." for i in range(5)]
    write_inbox_file(inbox, tenant, "w.jsonl", [_item(t, minutes=i) for i, t in enumerate(texts)])
    resources = base_resources(neo4j, inbox, quarantine)
    config = {"ops": {"memory_items": {"config": {"working_memory_capacity": 3}}}}
    meta = _meta(materialize_partition([memory_items], tenant, instance, resources, config))
    assert meta["working_memory_archived"] == 2

    with neo4j.session() as session:
        rows = session.run(
            """
            MATCH (l:MemoryItem {user_name: $t, memory_type: 'LongTermMemory'})
            MATCH (w:MemoryItem {user_name: $t, id: l.working_binding})
            RETURN l.memory AS text, l.status AS long_status, w.status AS working_status,
                   w.memory_type AS working_type, w.working_binding = l.id AS bound_back
            ORDER BY text
            """, t=tenant).data()
    assert [r["text"] for r in rows] == texts
    assert all(r["long_status"] == "activated" and r["bound_back"] for r in rows)
    assert {r["working_type"] for r in rows} == {"WorkingMemory"}
    assert [r["working_status"] for r in rows] == ["archived", "archived", "activated",
                                                   "activated", "activated"]


def test_memory_round_trips_nested_metadata_exactly(neo4j, tenant):
    from mem_resources.memory_model import (
        ArchivedVersion,
        MemoryItem,
        MemoryMetadata,
        SourceMessage,
        UpdateType,
        memory_id,
        payload_hash,
    )
    digest = payload_hash(tenant, "LongTermMemory", "Round trip.")
    item = MemoryItem(id=memory_id(digest), memory="Round trip.", metadata=MemoryMetadata(
        user_name=tenant, payload_hash=digest, key="rt", tags=["a", "b"], background="bg",
        sources=[SourceMessage(type="chat", role="user", content="说 \"hi\"", chat_time="t1"),
                 SourceMessage(type="doc", doc_path="notes/a.md", page=3)],
        embedding=[0.25, -0.5, 1.0], confidence=0.75, created_at=T0, updated_at=T0 + timedelta(1),
        version=3, evolve_to=["mem:x"], working_binding="mem:w",
        history=[ArchivedVersion(version=2, update_type=UpdateType.CONFLICT,
                                 archived_memory_id="mem:old", memory="旧的", created_at=T0)],
    ))
    with neo4j.session() as session:
        session.execute_write(ingest_queries.write_memories, tenant, [item])
        [back] = session.execute_read(memory_queries.read_memories, tenant, [item.id])
    assert back == item
    assert back.metadata.sources[1].model_extra == {"page": 3}


def test_writes_for_another_tenant_are_refused(neo4j, tenant):
    from mem_resources.memory_model import MemoryItem, MemoryMetadata
    stray = MemoryItem(id="mem:stray", memory="x", metadata=MemoryMetadata(
        user_name="someone_else", payload_hash="0" * 32, created_at=T0, updated_at=T0))
    with neo4j.session() as session, pytest.raises(ValueError, match="another tenant"):
        session.execute_write(ingest_queries.write_memories, tenant, [stray])
