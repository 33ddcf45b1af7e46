"""Topic trees grow with the tenant, through Dagster on the real Neo4j.

Batch 1 of a few themes of the labeled set (research/data/eval/topics.jsonl) is ingested and reorganized;
batch 2 is ingested and reorganized; then dedup merges and supersedes placed memories, and a
rebuild starts the tree over. The themes are ones the offline embedder tells apart well; how
placement does on all 42 labels is what tests/unit/test_topic_eval.py measures.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from mem_assets.dedup import queries as dedup_queries
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.inbox import InboxResource
from mem_assets.reorg.llm_placement import OfflinePlacer
from mem_assets.reorg.summarizers import ExtractiveSummarizer
from mem_assets.reorg.topic_space import language
from mem_resources import memory_queries
from mem_resources.memory_model import utc_now
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.pipeline import materialize_partition, write_inbox_file
from tests.support.reorg_graph import (
    EMBEDDER,
    REORG_ASSETS,
    TOPIC_VECTORS,
    materialization_metadata,
)

ITEMS = Path(__file__).resolve().parents[1] / "research" / "data" / "eval" / "topics.jsonl"
THEMES = ("japan_trip", "dentist", "gardening", "sleep", "guitar")


def _items(batch: int) -> list[dict]:
    rows = [json.loads(line) for line in ITEMS.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["topic"] in THEMES and row["batch"] == batch and language(row["text"]) == "en"]


def _ingest_and_reorganize(neo4j, tenant, instance, tmp_path, batch: int, run_config=None):
    inbox = tmp_path / "inbox"
    write_inbox_file(inbox, tenant, f"batch-{batch}.jsonl", [
        {"memory": row["text"], "memory_type": "LongTermMemory", "created_at": f"2026-11-0{batch}T08:00:00Z"}
        for row in _items(batch)])
    resources = {"neo4j": neo4j, "embedder": EMBEDDER, "summarizer": ExtractiveSummarizer(),
                 "topic_vectors": TOPIC_VECTORS, "topic_placer": OfflinePlacer(),
                 "inbox": InboxResource(root=str(inbox), quarantine_dir=str(tmp_path / "q"))}
    result = materialize_partition([memory_items, *REORG_ASSETS], tenant, instance, resources, run_config)
    assert result.success
    return result


def _reorganize(neo4j, tenant, instance, run_config=None):
    result = dg.materialize(REORG_ASSETS, partition_key=tenant, instance=instance, run_config=run_config or {},
                            resources={"neo4j": neo4j, "embedder": EMBEDDER, "summarizer": ExtractiveSummarizer(),
                                       "topic_vectors": TOPIC_VECTORS, "topic_placer": OfflinePlacer()})
    assert result.success
    return result


def _tree(neo4j: Neo4jResource, tenant: str) -> dict[str, dict]:
    """Activated memories: text, their level-1 topic and its top-level topic."""
    with neo4j.session() as session:
        rows = session.run(
            """
            MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.type <> 'topic' AND m.status = 'activated'
              AND m.memory_type = 'LongTermMemory'
            OPTIONAL MATCH (leaf:MemoryItem {status: 'activated', type: 'topic'})-[:PARENT]->(m)
            OPTIONAL MATCH (root:MemoryItem {status: 'activated', type: 'topic'})-[:PARENT]->(leaf)
            RETURN m.id AS id, m.memory AS text, leaf.id AS leaf, coalesce(root.id, leaf.id) AS root,
                   m.reorg_set_aside_reason AS reason
            """, tenant=tenant).data()
    return {row["id"]: row for row in rows}


def _theme_of() -> dict[str, str]:
    return {row["text"]: row["topic"] for batch in (1, 2) for row in _items(batch)}


def _roots_by_theme(tree: dict[str, dict]) -> dict[str, set[str]]:
    """For each theme, the top-level topics where it holds the majority."""
    theme_of = _theme_of()
    members: dict[str, Counter] = {}
    for row in tree.values():
        if row["root"]:
            members.setdefault(row["root"], Counter())[theme_of[row["text"]]] += 1
    roots: dict[str, set[str]] = {}
    for root, counts in members.items():
        roots.setdefault(counts.most_common(1)[0][0], set()).add(root)
    return roots


@pytest.fixture
def grown(neo4j, tenant, instance, tmp_path):
    first = _ingest_and_reorganize(neo4j, tenant, instance, tmp_path, 1)
    after_first = _tree(neo4j, tenant)
    second = _ingest_and_reorganize(neo4j, tenant, instance, tmp_path, 2)
    return {"tenant": tenant, "first": first, "second": second, "after_first": after_first,
            "after_second": _tree(neo4j, tenant)}


def test_batch_two_joins_the_topics_of_batch_one(grown):
    theme_of = _theme_of()
    before, after = grown["after_first"], grown["after_second"]
    first_roots = _roots_by_theme(before)
    assert set(first_roots) == set(THEMES)
    new_rows = [row for mid, row in after.items() if mid not in before]
    assert len(new_rows) == len(_items(2))
    placed_new = [row for row in new_rows if row["root"]]
    assert len(placed_new) >= 0.7 * len(new_rows)
    at_home = [row for row in placed_new if row["root"] in first_roots[theme_of[row["text"]]]]
    assert len(at_home) >= 0.9 * len(placed_new)
    per_root: dict[str, Counter] = {}
    for row in after.values():
        if row["root"]:
            per_root.setdefault(row["root"], Counter())[theme_of[row["text"]]] += 1
    for theme, (home,) in first_roots.items():
        elsewhere = {root: counts[theme] for root, counts in per_root.items() if root != home and counts[theme] >= 3}
        assert elsewhere == {}, f"a second topic for {theme}"
    metadata = materialization_metadata(grown["second"], "summary_parents")
    assert metadata["topics_grown"] + metadata["topics_promoted"] >= len(THEMES) - 1
    assert all(e.passed for e in grown["second"].get_asset_check_evaluations())


def test_grown_topics_keep_counts_and_their_previous_summary(neo4j, grown):
    with neo4j.session() as session:
        topics = session.run(
            """
            MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'})
            OPTIONAL MATCH (t)-[:PARENT]->(c:MemoryItem {status: 'activated'})
            WITH t, count(c) AS children, sum(CASE WHEN c.type = 'topic' THEN c.member_count ELSE 1 END) AS members
            RETURN t.id AS id, t.member_count AS member_count, members, t.reorg_member_count AS children_count,
                   children, t.updated_at AS updated_at, t.history AS history, t.version AS version
            """, tenant=grown["tenant"]).data()
    assert topics
    assert all(t["member_count"] == t["members"] and t["children_count"] == t["children"] for t in topics)
    assert all(t["updated_at"] is not None for t in topics)
    refreshed = [t for t in topics if t["version"] and t["version"] > 1]
    assert refreshed
    for topic in refreshed:
        history = json.loads(topic["history"])
        assert len(history) == topic["version"] - 1
        assert history[-1]["update_type"] == "refresh" and history[-1]["memory"]


def test_a_merge_afterwards_leaves_no_parent_edge_to_an_archived_memory(neo4j, grown, instance):
    """Dedup moves a topic's edge to the survivor as it archives; reorganization repairs edges that
    a write outside dedup (a foreign tool, an old restore) left on archived members."""
    tenant = grown["tenant"]
    tree = grown["after_second"]
    by_leaf: dict[str, list[str]] = {}
    for mid, row in sorted(tree.items()):
        if row["leaf"]:
            by_leaf.setdefault(row["leaf"], []).append(mid)
    (leaf_a, (a1, a2, a3, *_)), (leaf_b, (b1, b2, b3, *_)) = [
        (leaf, ids) for leaf, ids in sorted(by_leaf.items()) if len(ids) >= 4][:2]
    now = utc_now()
    with neo4j.session() as session:
        props = session.execute_read(dedup_queries.read_nodes, tenant, [a1])[a1]
        session.execute_write(dedup_queries.create_merged, tenant, [dedup_queries.merge_row(
            "mem:merged-a", [a1, a2], a1, {"memory": props["memory"] + " (merged)", "status": "activated"},
            "duplicate", "test merge")], now)
        session.execute_write(dedup_queries.supersede, tenant,
                              [dedup_queries.supersede_row(b1, b2, {}, "test supersede")], now)
        assert session.execute_read(memory_queries.topics_with_archived_members, tenant) == []
        edited = session.run("MATCH (b:MemoryItem {user_name: $tenant, id: $b3}) RETURN properties(b) AS p",
                             tenant=tenant, b3=b3).single()["p"] | {"id": "mem:foreign-edit"}
        session.run(
            """
            MATCH (old:MemoryItem {user_name: $tenant, id: $a3}), (merged:MemoryItem {user_name: $tenant, id: 'mem:merged-a'})
            SET old.status = 'archived' CREATE (old)-[:MERGED_TO]->(merged)
            WITH 1 AS one
            MATCH (b:MemoryItem {user_name: $tenant, id: $b3})
            CREATE (copy:MemoryItem) SET copy = $edited
            SET b.status = 'archived' CREATE (b)-[:SUPERSEDED_BY]->(copy)
            """, tenant=tenant, a3=a3, b3=b3, edited=edited).consume()
        stale = session.execute_read(memory_queries.topics_with_archived_members, tenant)
    assert {row["member"] for row in stale} == {a3, b3}

    result = _reorganize(neo4j, tenant, instance)
    metadata = materialization_metadata(result, "reorg_candidates")
    assert (metadata["edges_moved"], metadata["edges_dropped"]) == (1, 1)
    with neo4j.session() as session:
        assert session.execute_read(memory_queries.topics_with_archived_members, tenant) == []
        homes = dict(session.run(
            "MATCH (t:MemoryItem {type: 'topic', status: 'activated'})-[:PARENT]->(m:MemoryItem {user_name: $tenant}) "
            "WHERE m.id IN $ids RETURN m.id AS id, t.id AS topic", tenant=tenant,
            ids=["mem:merged-a", b2, "mem:foreign-edit"]).values())
    assert homes["mem:merged-a"] == leaf_a and homes["mem:foreign-edit"] == leaf_b
    assert b2 in homes
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["topics_have_no_archived_members"] and checks["parents_have_two_members"]


def test_rebuild_archives_the_old_tree_with_lineage_and_loses_no_member(neo4j, grown, instance):
    tenant = grown["tenant"]
    with neo4j.session() as session:
        old_topics = [r["id"] for r in session.run(
            "MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'}) RETURN t.id AS id",
            tenant=tenant)]
        members_before = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.type <> 'topic' "
            "RETURN m.id AS id, m.memory AS memory, m.status AS status, m.embedding AS embedding ORDER BY id",
            tenant=tenant).data()
    placed_before = {mid for mid, row in grown["after_second"].items() if row["root"]}

    result = _reorganize(neo4j, tenant, instance, {"ops": {"reorg_candidates": {"config": {"rebuild": True}}}})
    metadata = materialization_metadata(result, "summary_parents")
    assert metadata["topics_archived"] == len(old_topics)
    assert metadata["topics_created"] >= len(THEMES)
    with neo4j.session() as session:
        lineage = session.run(
            """
            UNWIND $ids AS id
            MATCH (o:MemoryItem {user_name: $tenant, id: id})
            OPTIONAL MATCH (o)-[:SUPERSEDED_BY]->(n:MemoryItem {user_name: $tenant, status: 'activated', type: 'topic'})
            OPTIONAL MATCH (o)-[r:PARENT]-()
            RETURN o.id AS id, o.status AS status, n.id AS successor, count(r) AS edges
            """, tenant=tenant, ids=old_topics).data()
        members_after = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.type <> 'topic' "
            "RETURN m.id AS id, m.memory AS memory, m.status AS status, m.embedding AS embedding ORDER BY id",
            tenant=tenant).data()
    assert all(row["status"] == "archived" and row["successor"] and row["edges"] == 0 for row in lineage)
    assert members_after == members_before
    after = _tree(neo4j, tenant)
    assert all(after[mid]["root"] or after[mid]["reason"] for mid in placed_before)
    assert sum(1 for mid in placed_before if after[mid]["root"]) >= 0.8 * len(placed_before)
    assert all(e.passed for e in result.get_asset_check_evaluations()), [(e.check_name, e.metadata) for e in result.get_asset_check_evaluations() if not e.passed]
