"""Write flat memory nodes straight into Neo4j and run the reorganization assets on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg

from mem_assets.reorg.assets import memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.checks import reorg_checks
from mem_assets.reorg.llm_placement import OfflinePlacer, TopicPlacerResource
from mem_assets.reorg.summarizers import ExtractiveSummarizer, SummarizerResource
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_resources.embedder import WordLlamaEmbedder
from mem_resources.memory_model import (
    MemoryItem,
    MemoryMetadata,
    MemoryType,
    memory_id,
    payload_hash,
    utc_now,
)
from mem_resources.neo4j_resource import Neo4jResource

REORG_ASSETS = [reorg_candidates, memory_clusters, summary_parents, *reorg_checks]
#: The offline semantic embedder the reorganization is tuned for (256 dimensions).
EMBEDDER = WordLlamaEmbedder()
#: Chinese topics in the multilingual-e5 space, English in the embedder's (the defaults).
TOPIC_VECTORS = TopicVectorsResource()


def write_memories(neo4j: Neo4jResource, tenant: str, texts: Sequence[str],
                   memory_type: MemoryType = MemoryType.LONG_TERM) -> list[str]:
    """Activated memory nodes as the ingest writes them (labels, properties, embedding)."""
    vectors = EMBEDDER.embed(list(texts))
    now = utc_now()
    rows = []
    for text, vector in zip(texts, vectors, strict=True):
        digest = payload_hash(tenant, memory_type.value, text)
        item = MemoryItem(id=memory_id(digest), memory=text, metadata=MemoryMetadata(
            user_name=tenant, memory_type=memory_type, embedding=vector.astype(float).tolist(),
            created_at=now, updated_at=now, payload_hash=digest))
        rows.append(item.to_properties())
    with neo4j.session() as session:
        session.run("UNWIND $rows AS row CREATE (m:Node:MemoryItem) SET m = row", rows=rows).consume()
    return [row["id"] for row in rows]


def reorg_resources(neo4j: Neo4jResource, summarizer: SummarizerResource | None = None,
                    topic_vectors: TopicVectorsResource | None = None,
                    topic_placer: TopicPlacerResource | None = None) -> dict[str, Any]:
    return {"neo4j": neo4j, "embedder": EMBEDDER, "topic_vectors": topic_vectors or TOPIC_VECTORS,
            "summarizer": summarizer or ExtractiveSummarizer(), "topic_placer": topic_placer or OfflinePlacer()}


def run_reorg(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance,
              summarizer: SummarizerResource | None = None,
              run_config: dict[str, Any] | None = None,
              topic_vectors: TopicVectorsResource | None = None,
              topic_placer: TopicPlacerResource | None = None) -> dg.ExecuteInProcessResult:
    """``topic_vectors``: e.g. one with a deployment's thresholds file (MEMTEND_TOPIC_THRESHOLDS)."""
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])
    return dg.materialize(REORG_ASSETS, partition_key=tenant, instance=instance,
                          resources=reorg_resources(neo4j, summarizer, topic_vectors, topic_placer),
                          run_config=run_config or {})


def graph_counts(neo4j: Neo4jResource, tenant: str) -> dict[str, int]:
    with neo4j.session() as session:
        record = session.run(
            """
            MATCH (n:MemoryItem {user_name: $tenant})
            OPTIONAL MATCH (n)-[r:PARENT]->()
            RETURN count(DISTINCT n) AS nodes, count(r) AS parent_edges,
                   count(DISTINCT CASE WHEN n.type = 'topic' THEN n END) AS topics
            """,
            tenant=tenant,
        ).single()
    return dict(record)


def materialization_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = result.asset_materializations_for_node(asset)
    return {key: value.value for key, value in event.metadata.items()}
