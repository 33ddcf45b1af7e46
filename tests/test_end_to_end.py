"""The whole tend_memory pipeline on the bundled sample data, and how dedup and the topic tree meet."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_assets.definitions import tenant_pipeline
from mem_assets.ingest.inbox import InboxResource
from mem_assets.reorg import queries
from mem_assets.reorg.llm_placement import OfflinePlacer
from mem_assets.reorg.summarizers import ExtractiveSummarizer
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_resources.embedder import HashingEmbedder
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.table_io import TableIOManager
from tests.support.pipeline import materialize_partition
from tests.support.reorg_graph import write_memories

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "inbox" / "alice"


def _resources(neo4j: Neo4jResource, inbox: Path, quarantine: Path) -> dict:
    return {"neo4j": neo4j, "embedder": HashingEmbedder(dimension=neo4j.embedding_dimension),
            "judge": OfflineJudge(), "summarizer": ExtractiveSummarizer(), "topic_vectors": TopicVectorsResource(),
            "topic_placer": OfflinePlacer(),
            "inbox": InboxResource(root=str(inbox), quarantine_dir=str(quarantine)),
            "context_profiles": ContextProfiles(),
            "io_manager": TableIOManager(base_path=str(quarantine.parent / "tables"))}


def _fingerprint(neo4j: Neo4jResource, tenant: str) -> tuple[int, int, str]:
    """Nodes, relationships, and a digest of every node's properties and every edge."""
    with neo4j.session() as session:
        nodes = session.run(
            "MATCH (n {user_name: $t}) RETURN n.id AS id, properties(n) AS p ORDER BY id", t=tenant
        ).data()
        edges = session.run(
            "MATCH (a {user_name: $t})-[r]->(b) RETURN a.id AS a, type(r) AS type, b.id AS b, "
            "properties(r) AS p ORDER BY a, type, b", t=tenant).data()
    digest = hashlib.sha256(repr((nodes, edges)).encode()).hexdigest()
    return len(nodes), len(edges), digest


def test_sample_tenant_is_ingested_deduplicated_and_reorganized_and_a_rerun_changes_nothing(
        neo4j, instance, tenant, tmp_path):
    inbox = tmp_path / "inbox"
    shutil.copytree(SAMPLE, inbox / tenant)
    resources = _resources(neo4j, inbox, tmp_path / "q")

    assert materialize_partition(tenant_pipeline, tenant, instance, resources).success
    with neo4j.session() as session:
        statuses = dict(session.run(
            "MATCH (m:MemoryItem {user_name: $t}) WHERE m.memory_type <> 'WorkingMemory' "
            "RETURN coalesce(m.type, 'fact') + '/' + m.status AS k, count(*) AS n", t=tenant
        ).values())
        lineage = session.run(
            "MATCH (:MemoryItem {user_name: $t})-[r:MERGED_TO|SUPERSEDED_BY]->() "
            "RETURN type(r) AS type, count(*) AS n", t=tenant).data()
        two_parents = session.execute_read(queries.nodes_with_two_parents_at_one_level, tenant)
    assert statuses.get("fact/archived", 0) > 0, statuses
    assert statuses.get("topic/activated", 0) >= 4, statuses
    assert {row["type"] for row in lineage} == {"MERGED_TO", "SUPERSEDED_BY"}
    assert two_parents == []

    before = _fingerprint(neo4j, tenant)
    rerun = materialize_partition(tenant_pipeline, tenant, instance, resources)
    assert rerun.success
    assert _fingerprint(neo4j, tenant) == before


def test_merging_facts_under_two_topics_keeps_one_parent_and_never_touches_topics(
        neo4j, instance, tenant, tmp_path):
    text_a = "The user drinks green tea every morning before work."
    text_b = "Every morning before work, the user drinks green tea."
    fact_a, fact_b = write_memories(neo4j, tenant, [text_a, text_b])
    with neo4j.session() as session:
        session.run(
            """
            UNWIND [[$a, 'topic:a', $ta], [$b, 'topic:b', $tb]] AS row
            MATCH (f:MemoryItem {user_name: $t, id: row[0]})
            CREATE (p:Node:MemoryItem {user_name: $t, id: row[1], memory: row[2], type: 'topic',
                    memory_type: 'LongTermMemory', status: 'activated', reorg_level: 1,
                    embedding: f.embedding, payload_hash: f.payload_hash})
            CREATE (p)-[:PARENT]->(f)
            """, t=tenant, a=fact_a, b=fact_b, ta=text_a, tb=text_b).consume()
    resources = _resources(neo4j, tmp_path, tmp_path / "q")

    dedup = [dedup_candidates, relation_judgments, merged_nodes]
    assert materialize_partition(dedup, tenant, instance, resources).success
    with neo4j.session() as session:
        rows = session.run(
            "MATCH (n:MemoryItem {user_name: $t}) OPTIONAL MATCH (p)-[:PARENT]->(n) "
            "RETURN n.id AS id, n.type AS type, n.status AS status, collect(p.id) AS parents",
            t=tenant).data()
        two_parents = session.execute_read(queries.nodes_with_two_parents_at_one_level, tenant)
    by_id = {row["id"]: row for row in rows}
    assert by_id["topic:a"]["status"] == by_id["topic:b"]["status"] == "activated"
    assert by_id[fact_a]["status"] == by_id[fact_b]["status"] == "archived"
    [merged] = [row for row in rows if row["type"] != "topic" and row["status"] == "activated"]
    assert len(merged["parents"]) == 1
    assert two_parents == []
