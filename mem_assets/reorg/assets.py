"""Hierarchical reorganization per tenant (seed 000 §6): orphans → clusters → summary parents."""

import dagster as dg
import pandas as pd
from pydantic import Field, model_validator

from mem_assets.reorg.clustering import ClusteringParams, cluster_table
from mem_assets.reorg.hierarchy import Reorganizer, load_candidates
from mem_assets.reorg.summarizers import SummarizerResource
from mem_resources.embedder import EmbedderResource
from mem_resources.metadata import count_table, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_partitions


class CandidatesConfig(dg.Config):
    min_group_size: int = Field(
        default=20, ge=1,
        description="A memory type is reorganized once it has this many new orphans (seed: 20).")


class ClusteringConfig(dg.Config):
    max_cluster_size: int = Field(default=20, ge=2, description="Most memories under one parent.")
    min_cluster_size: int = Field(
        default=5, ge=1, description="Smaller clusters are set aside until new orphans arrive.")
    max_topics: int = Field(default=12, ge=2,
                            description="Most top-level topics chosen by silhouette in one pass.")
    seed: int = Field(default=0, description="KMeans seed: the same orphans give the same clusters.")

    @model_validator(mode="after")
    def _sizes_in_order(self) -> "ClusteringConfig":
        if self.min_cluster_size > self.max_cluster_size:
            raise ValueError("min_cluster_size must not exceed max_cluster_size")
        return self


class SummaryConfig(dg.Config):
    time_budget_s: float = Field(
        default=600.0, gt=0,
        description="Stop between topics after this long; the next run continues (seed: 600 s).")


@dg.asset(
    partitions_def=tenant_partitions,
    deps=["memory_items", "merged_nodes"],
    kinds={"neo4j", "pandas"},
    group_name="reorganize",
)
def reorg_candidates(context: dg.AssetExecutionContext, config: CandidatesConfig,
                     neo4j: Neo4jResource, embedder: EmbedderResource) -> pd.DataFrame:
    """The tenant's orphan memories (no PARENT edge), for memory types with enough new ones."""
    frame, counts, re_embedded = load_candidates(neo4j, embedder, context.partition_key, config.min_group_size)
    context.add_output_metadata({
        "candidates": len(frame),
        "eligible_memory_types": ", ".join(counts.loc[counts["eligible"], "memory_type"]) or "none",
        "re_embedded": re_embedded,
        "orphans_by_type": preview_table(counts, list(counts.columns)),
        "preview": preview_table(frame, ["id", "memory_type", "memory", "set_aside"]),
    })
    return frame


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"scikitlearn", "pandas"},
    group_name="reorganize",
)
def memory_clusters(context: dg.AssetExecutionContext, config: ClusteringConfig,
                    reorg_candidates: pd.DataFrame) -> pd.DataFrame:
    """Candidates split into topics of leaf clusters (recursive MiniBatchKMeans, seeded)."""
    frame = cluster_table(reorg_candidates, ClusteringParams(
        max_cluster_size=config.max_cluster_size, min_cluster_size=config.min_cluster_size,
        max_topics=config.max_topics, seed=config.seed))
    kept = frame[frame["status"] == "kept"]
    leaves_per_topic = kept.groupby("topic").size()
    context.add_output_metadata({
        "clusters": len(kept),
        "topics": len(leaves_per_topic),
        "two_level_topics": int((leaves_per_topic > 1).sum()),
        "clustered": int(kept["size"].sum()),
        "left_unclustered": int(frame.loc[frame["status"] == "set_aside", "size"].sum()),
        "cluster_sizes": count_table(kept["size"].value_counts().to_dict(), "size"),
        "preview": preview_table(frame, ["cluster", "status", "size"]),
    })
    return frame


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "pandas"},
    group_name="reorganize",
)
def summary_parents(context: dg.AssetExecutionContext, config: SummaryConfig, neo4j: Neo4jResource,
                    embedder: EmbedderResource, summarizer: SummarizerResource,
                    reorg_candidates: pd.DataFrame, memory_clusters: pd.DataFrame) -> pd.DataFrame:
    """One topic parent per cluster (and one over sub-topics), linked to its members by PARENT."""
    reorganizer = Reorganizer(context.partition_key, neo4j, embedder, summarizer, context.log)
    outcome = reorganizer.run(reorg_candidates, memory_clusters, config.time_budget_s)
    frame = outcome.frame()
    context.add_output_metadata({
        "parents_written": len(frame),
        "parents_created": outcome.parents_created,
        "parent_edges_created": outcome.edges_created,
        "topics_two_level": int((frame["level"] == 2).sum()),
        "set_aside_small_clusters": outcome.set_aside_small,
        "set_aside_rejected_summaries": outcome.set_aside_rejected,
        "rejected_summaries": outcome.rejected_summaries,
        "deferred_to_next_run": outcome.deferred_nodes,
        "stopped_by_time_budget": outcome.stopped_by_budget,
        "llm_calls": outcome.usage.calls,
        "llm_prompt_tokens": outcome.usage.prompt_tokens,
        "llm_completion_tokens": outcome.usage.completion_tokens,
        "preview": preview_table(frame, ["level", "key", "value", "children"]),
    })
    return frame
