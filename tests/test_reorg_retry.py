"""A retried reorganization write on the real Neo4j: the same plan written again adds no edge.

``summary_parents`` has a retry policy and reads the stored plan (``memory_clusters``), so a
retry writes units the failed attempt already committed a second time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import dagster as dg
import pandas as pd
import pytest

from mem_assets.reorg.assets import memory_clusters, reorg_candidates
from mem_assets.reorg.checks import no_duplicate_parent_edges
from mem_assets.reorg.summarizers import ExtractiveSummarizer, Named, SummaryRequest
from mem_assets.reorg.topic_writer import TopicWriter
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import EMBEDDER, reorg_resources, run_reorg, write_memories
from tests.support.topic_corpus import topic_memories

LOG = logging.getLogger("test")


class CrashingSummarizer:
    """The offline summarizer until its ``after``-th topic, then an error: the step dies mid-write."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.calls = 0

    def batch_size(self) -> int:
        return 1

    def summarize(self, requests: Sequence[SummaryRequest], budget: None = None) -> Named:
        self.calls += len(requests)
        if self.calls > self.after:
            raise RuntimeError("killed mid-write")
        return ExtractiveSummarizer().summarize(requests)


def _texts(topics: set[str], per_topic: int) -> list[str]:
    return [text for topic, text in topic_memories(per_topic=per_topic) if topic in topics]


def _plan(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance,
          rebuild: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])
    planned = dg.materialize([reorg_candidates, memory_clusters], partition_key=tenant, instance=instance,
                             resources=reorg_resources(neo4j),
                             run_config={"ops": {"reorg_candidates": {"config": {"rebuild": rebuild}}}})
    return planned.output_for_node("reorg_candidates"), planned.output_for_node("memory_clusters")


def _edges(neo4j: Neo4jResource, tenant: str, kind: str) -> dict[str, Any]:
    """All ``kind`` relationships between the tenant's memories, and how many (start, end) pairs."""
    with neo4j.session() as session:
        return session.run(
            f"""
            MATCH (a:MemoryItem {{user_name: $tenant}})-[r:{kind}]->(b:MemoryItem {{user_name: $tenant}})
            WITH a, b, count(r) AS n
            RETURN sum(n) AS edges, count(*) AS pairs,
                   [x IN collect({{start: a.id, end: b.id, n: n}}) WHERE x.n > 1][..5] AS doubled
            """, tenant=tenant).single().data()


def _state(neo4j: Neo4jResource, tenant: str) -> list[dict[str, Any]]:
    with neo4j.session() as session:
        return session.run(
            """
            MATCH (t:MemoryItem {user_name: $tenant, type: 'topic'})
            RETURN t.id AS id, t.status AS status, t.key AS key, t.memory AS memory,
                   t.member_count AS members, t.archived_at AS archived_at ORDER BY id
            """, tenant=tenant).data()


def test_a_write_retried_after_dying_midway_doubles_no_parent_edge(neo4j, tenant, instance):
    write_memories(neo4j, tenant, _texts({"cooking", "music", "programming"}, 30))
    candidates, plan = _plan(neo4j, tenant, instance)
    created = plan[(plan["kind"] == "topic") & (plan["action"] == "created")]
    assert len(created) >= 4

    first = TopicWriter(tenant, neo4j, EMBEDDER, CrashingSummarizer(after=len(created) - 2), LOG, batch_edges=1)
    with pytest.raises(RuntimeError, match="killed mid-write"):
        first.run(plan, candidates, time_budget_s=600)
    assert first.outcome.created > 0, "the first attempt committed no unit: nothing to retry over"

    retry = TopicWriter(tenant, neo4j, EMBEDDER, ExtractiveSummarizer(), LOG, batch_edges=1)
    retry.run(plan, candidates, time_budget_s=600)
    edges = _edges(neo4j, tenant, "PARENT")
    assert edges["edges"] == edges["pairs"], edges["doubled"]
    with neo4j.session() as session:
        assert no_duplicate_parent_edges(session, tenant).passed
    planned = {(row.id, child) for row in plan[plan["kind"] == "topic"].itertuples() for child in row.children}
    assert edges["pairs"] == len(planned)

    before = _state(neo4j, tenant)
    again = TopicWriter(tenant, neo4j, EMBEDDER, ExtractiveSummarizer(), LOG)
    outcome = again.run(plan, candidates, time_budget_s=600)
    assert outcome.edges_created == 0 and outcome.edges_removed == 0
    assert _edges(neo4j, tenant, "PARENT") == edges
    assert _state(neo4j, tenant) == before


def test_a_retried_rebuild_write_archives_each_old_topic_behind_one_lineage_edge(neo4j, tenant, instance):
    write_memories(neo4j, tenant, _texts({"cooking", "travel"}, 30))
    run_reorg(neo4j, tenant, instance)
    candidates, plan = _plan(neo4j, tenant, instance, rebuild=True)
    retired = plan[plan["kind"] == "retire"]
    assert len(retired) >= 2

    TopicWriter(tenant, neo4j, EMBEDDER, ExtractiveSummarizer(), LOG).run(plan, candidates, time_budget_s=600)
    lineage = _edges(neo4j, tenant, "SUPERSEDED_BY")
    assert lineage["edges"] == lineage["pairs"] == len(retired)
    before = _state(neo4j, tenant)

    retry = TopicWriter(tenant, neo4j, EMBEDDER, ExtractiveSummarizer(), LOG)
    retry.run(plan, candidates, time_budget_s=600)
    after = _edges(neo4j, tenant, "SUPERSEDED_BY")
    assert after == lineage, after["doubled"]
    assert _edges(neo4j, tenant, "PARENT")["doubled"] == []
    assert _state(neo4j, tenant) == before


def test_the_check_names_topics_with_a_doubled_parent_edge(neo4j, tenant):
    ids = write_memories(neo4j, tenant, ["alpha fact", "beta fact"])
    with neo4j.session() as session:
        session.run(
            """
            CREATE (p:Node:MemoryItem {user_name: $tenant, id: 'p1', type: 'topic', reorg_level: 1,
                                       status: 'activated', memory_type: 'LongTermMemory'})
            WITH p
            MATCH (a:MemoryItem {user_name: $tenant, id: $a}), (b:MemoryItem {user_name: $tenant, id: $b})
            CREATE (p)-[:PARENT]->(a), (p)-[:PARENT]->(a), (p)-[:PARENT]->(b)
            """, tenant=tenant, a=ids[0], b=ids[1]).consume()
        result = no_duplicate_parent_edges(session, tenant)
    assert not result.passed
    assert ids[0] in str(result.metadata) and ids[1] not in str(result.metadata)
