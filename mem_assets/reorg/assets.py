"""Hierarchical reorganization per tenant (seed 000 §6): candidates → placement plan → topics."""

from dataclasses import replace
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field, model_validator

from mem_assets.reorg.placement import COMBINED_PARAMS, CROSS_PARAMS, E5_PARAMS, CrossParams, PlacementParams
from mem_assets.reorg.placement_plan import RETIRE, SET_ASIDE, TOPIC, plan_table
from mem_assets.reorg.queries import topic_sizes
from mem_assets.reorg.summarizers import SummarizerResource
from mem_assets.reorg.topic_vectors import E5_SPACE, ENCODER_SPACES, MAIN_SPACE, TopicVectorsResource
from mem_assets.reorg.topic_writer import (
    TopicWriter,
    histogram_rows,
    load_candidates,
    tidy_topics,
)
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import utc_now
from mem_resources.metadata import change_marker, count_table, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import LLM_POOL, LLM_RETRY, OWNERS

DEFAULTS = PlacementParams()


class CandidatesConfig(dg.Config):
    min_group_size: int = Field(
        default=20, ge=1,
        description="A memory type is reorganized once it has this many new orphans (seed: 20).")
    e5_max_per_run: int = Field(
        default=1000, ge=0,
        description="Most memories given their kept vector (multilingual-e5 and the topic encoder, for the "
                    "e5 and combined spaces) per run (~20-25 ms each, so ~20-25 s; each is embedded once, "
                    "the vector kept on its node); the others are deferred to the next run. Raise it for a "
                    "backfill of a large backlog.")
    rebuild: bool = Field(
        default=False,
        description="Re-cluster every live memory of the tenant from scratch; the old topics are "
                    "archived with SUPERSEDED_BY lineage to the new ones (members are not touched).")


def _in_e5_space(param: str, **bounds: float) -> Any:
    """A run-config field for ``PlacementParams.<param>`` in the multilingual-e5 space (``E5_PARAMS``)."""
    return Field(default=getattr(E5_PARAMS, param), description=f"{param} for languages in the e5 space.",
                 **bounds)


def _in_combined_space(param: str, **bounds: float) -> Any:
    """A run-config field for ``PlacementParams.<param>`` in the encoder spaces (``COMBINED_PARAMS``)."""
    return Field(default=getattr(COMBINED_PARAMS, param),
                 description=f"{param} for languages in their topic encoder's space.", **bounds)


class PlacementConfig(dg.Config):
    """Thresholds are cosines in the topic space (docs/reorg.md: how they were tuned)."""

    place_similarity: float = Field(default=DEFAULTS.place_similarity, ge=-1, le=1,
                                    description="A memory joins a topic at least this close to its centroid.")
    place_margin: float = Field(default=DEFAULTS.place_margin, ge=0,
                                description="...and closer by this much than to any other theme.")
    group_similarity: float = Field(default=DEFAULTS.group_similarity, ge=-1, le=1,
                                    description="Average similarity within a new group (linkage cut).")
    merge_similarity: float = Field(default=DEFAULTS.merge_similarity, ge=-1, le=1,
                                    description="Themes this alike are one topic (near-duplicate check too).")
    attach_similarity: float = Field(default=DEFAULTS.attach_similarity, ge=-1, le=1,
                                     description="A new group joins an existing theme this close (by centroid).")
    attach_margin: float = Field(default=DEFAULTS.attach_margin, ge=0,
                                 description="...and closer by this much than to any other theme.")
    max_cluster_size: int = Field(default=DEFAULTS.max_members, ge=2, description="Most memories under one topic.")
    min_cluster_size: int = Field(default=DEFAULTS.min_cluster_size, ge=2,
                                  description="Smallest new topic; smaller groups stay unplaced.")
    theme_similarity: float = Field(default=DEFAULTS.theme_similarity, ge=-1, le=1,
                                    description="New groups in one looser linkage group at this similarity are "
                                                "sub-topics of one theme (1: only merge_similarity joins them).")
    min_theme_size: int = Field(default=DEFAULTS.min_theme_size, ge=1,
                                description="Smallest new top-level topic; a smaller theme stays unplaced.")
    refresh_fraction: float = Field(default=DEFAULTS.refresh_fraction, gt=0, le=1,
                                    description="A topic whose memories changed this much gets a new summary.")
    e5_place_similarity: float = _in_e5_space("place_similarity", ge=-1, le=1)
    e5_place_margin: float = _in_e5_space("place_margin", ge=0)
    e5_group_similarity: float = _in_e5_space("group_similarity", ge=-1, le=1)
    e5_merge_similarity: float = _in_e5_space("merge_similarity", ge=-1, le=1)
    e5_attach_similarity: float = _in_e5_space("attach_similarity", ge=-1, le=1)
    e5_attach_margin: float = _in_e5_space("attach_margin", ge=0)
    e5_min_cluster_size: int = _in_e5_space("min_cluster_size", ge=2)
    e5_theme_similarity: float = _in_e5_space("theme_similarity", ge=-1, le=1)
    e5_min_theme_size: int = _in_e5_space("min_theme_size", ge=1)
    combined_place_similarity: float = _in_combined_space("place_similarity", ge=-1, le=1)
    combined_place_margin: float = _in_combined_space("place_margin", ge=0)
    combined_group_similarity: float = _in_combined_space("group_similarity", ge=-1, le=1)
    combined_merge_similarity: float = _in_combined_space("merge_similarity", ge=-1, le=1)
    combined_attach_similarity: float = _in_combined_space("attach_similarity", ge=-1, le=1)
    combined_attach_margin: float = _in_combined_space("attach_margin", ge=0)
    combined_min_cluster_size: int = _in_combined_space("min_cluster_size", ge=2)
    combined_theme_similarity: float = _in_combined_space("theme_similarity", ge=-1, le=1)
    combined_min_theme_size: int = _in_combined_space("min_theme_size", ge=1)
    cross_place_similarity: float = Field(
        default=CROSS_PARAMS.place_similarity, ge=-1, le=1,
        description="A memory that fits no topic of its language joins the other language's topic at "
                    "least this close in e5 space (MEMTEND_TOPIC_CROSS_LANGUAGE).")
    cross_place_margin: float = Field(default=CROSS_PARAMS.place_margin, ge=0,
                                      description="...and closer by this much than to its other themes.")
    seed: int = Field(default=0, description="KMeans seed: the same input gives the same plan.")

    @model_validator(mode="after")
    def _sizes_in_order(self) -> "PlacementConfig":
        if max(self.min_cluster_size, self.e5_min_cluster_size, self.combined_min_cluster_size) \
                > self.max_cluster_size:
            raise ValueError("min_cluster_size, e5_min_cluster_size and combined_min_cluster_size must not "
                             "exceed max_cluster_size")
        return self

    def params(self) -> PlacementParams:
        return PlacementParams(
            place_similarity=self.place_similarity, place_margin=self.place_margin,
            group_similarity=self.group_similarity, merge_similarity=self.merge_similarity,
            attach_similarity=self.attach_similarity, attach_margin=self.attach_margin,
            max_members=self.max_cluster_size, min_cluster_size=self.min_cluster_size,
            theme_similarity=self.theme_similarity, min_theme_size=self.min_theme_size,
            refresh_fraction=self.refresh_fraction, seed=self.seed)

    def e5_params(self) -> PlacementParams:
        """``params`` with each ``e5_<name>`` setting in place of ``<name>``."""
        return self._prefixed("e5_")

    def combined_params(self) -> PlacementParams:
        """``params`` with each ``combined_<name>`` setting in place of ``<name>``."""
        return self._prefixed("combined_")

    def _prefixed(self, prefix: str) -> PlacementParams:
        return replace(self.params(), **{name.removeprefix(prefix): getattr(self, name)
                                         for name in type(self).model_fields if name.startswith(prefix)})

    def cross_params(self) -> CrossParams:
        return CrossParams(place_similarity=self.cross_place_similarity, place_margin=self.cross_place_margin)

    def space_params(self) -> dict[str, PlacementParams]:
        """The thresholds of each topic space (``reorg.vectors``)."""
        return {MAIN_SPACE: self.params(), E5_SPACE: self.e5_params(),
                **dict.fromkeys(ENCODER_SPACES.values(), self.combined_params())}


class SummaryConfig(dg.Config):
    time_budget_s: float = Field(
        default=600.0, gt=0,
        description="Stop between topic groups after this long; the next run continues (seed: 600 s).")


@dg.asset(
    partitions_def=tenant_partitions,
    deps=["memory_items", "merged_nodes"],
    kinds={"neo4j", "pandas"},
    group_name="reorganize",
    owners=OWNERS,
    code_version="1",
)
def reorg_candidates(context: dg.AssetExecutionContext, config: CandidatesConfig, neo4j: Neo4jResource,
                     embedder: EmbedderResource, topic_vectors: TopicVectorsResource) -> pd.DataFrame:
    """The tenant's unplaced memories (every live one on a rebuild), after topic hygiene, each
    with its vector in its language's topic space."""
    tenant = tenant_of(context)
    tidy = tidy_topics(neo4j, tenant)
    frame, counts, re_embedded, waiting, stored, deferred = load_candidates(
        neo4j, embedder, topic_vectors, tenant, config.min_group_size, config.rebuild, config.e5_max_per_run)
    frame["rebuild"] = config.rebuild
    context.add_output_metadata({
        **change_marker(context, len(frame) > 0),
        "candidates": len(frame),
        "rebuild": config.rebuild,
        "eligible_memory_types": ", ".join(counts.loc[counts["eligible"], "memory_type"]) or "none",
        "re_embedded": re_embedded,
        "e5_vectors_stored": stored,
        "e5_deferred_to_next_run": deferred,
        "marked_awaiting_batch": waiting,
        **tidy,
        "orphans_by_type": preview_table(counts, list(counts.columns)),
        "preview": preview_table(frame, ["id", "memory_type", "memory", "set_aside"]),
    })
    return frame


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"scikitlearn", "pandas"},
    group_name="reorganize",
    owners=OWNERS,
    code_version="1",
)
def memory_clusters(context: dg.AssetExecutionContext, config: PlacementConfig, neo4j: Neo4jResource,
                    embedder: EmbedderResource, topic_vectors: TopicVectorsResource,
                    reorg_candidates: pd.DataFrame) -> pd.DataFrame:
    """The placement plan: candidates offered to the tenant's topics, the rest grouped into new
    topics or left unplaced with a reason (a rebuild plans from scratch and retires the old tree)."""
    rebuild = bool(len(reorg_candidates)) and bool(reorg_candidates["rebuild"].iloc[0])
    salt = f"rebuild:{utc_now().isoformat()}" if rebuild else ""
    frame = plan_table(neo4j, embedder, topic_vectors, tenant_of(context), reorg_candidates,
                       config.space_params(), rebuild, salt, config.cross_params())
    topics = frame[frame["kind"] == TOPIC]
    aside = frame[frame["kind"] == SET_ASIDE]
    placed = sum(len(set(children) & set(reorg_candidates["id"]))
                 for children in topics.loc[topics["level"] == 1, "children"])
    context.add_output_metadata({
        **change_marker(context, placed + len(topics) > 0),
        "placed": placed,
        "left_unplaced": len(aside),
        "topics": int((topics["action"] == "created").sum()),
        "topics_touched": len(topics),
        "topics_retired": int((frame["kind"] == RETIRE).sum()),
        "unplaced_reasons": count_table(aside["reason"].value_counts().to_dict(), "reason"),
        "preview": preview_table(frame, ["kind", "id", "level", "action", "member_count", "reason"]),
    })
    return frame


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "pandas"},
    group_name="reorganize",
    owners=OWNERS,
    code_version="1",
    pool=LLM_POOL,
    retry_policy=LLM_RETRY,
)
def summary_parents(context: dg.AssetExecutionContext, config: SummaryConfig, neo4j: Neo4jResource,
                    embedder: EmbedderResource, summarizer: SummarizerResource,
                    reorg_candidates: pd.DataFrame, memory_clusters: pd.DataFrame) -> pd.DataFrame:
    """Topics written as planned: new ones created, grown ones updated (summaries refreshed past
    the refresh fraction, the old one kept in history), retired ones archived with lineage."""
    writer = TopicWriter(tenant_of(context), neo4j, embedder, summarizer, context.log,
                         sink=context.log.info)
    outcome = writer.run(memory_clusters, reorg_candidates, config.time_budget_s)
    frame = outcome.frame()
    with neo4j.session() as session:
        sizes = session.execute_read(topic_sizes, tenant_of(context))
    largest = (frame.assign(change=(frame["members"] - frame["members_before"]).abs())
               .sort_values(["change", "id"], ascending=[False, True]))
    context.add_output_metadata({
        **change_marker(context, outcome.created + outcome.grown + outcome.retired > 0),
        "topics_created": outcome.created,
        "topics_grown": outcome.grown,
        "topics_promoted": outcome.promoted,
        "topics_refreshed": outcome.refreshed,
        "topics_archived": outcome.retired,
        "parent_edges_created": outcome.edges_created,
        "parent_edges_removed": outcome.edges_removed,
        "set_aside": outcome.set_aside,
        "deferred_to_next_run": outcome.deferred,
        "stopped_by_time_budget": outcome.stopped_by_budget,
        "llm_calls": outcome.usage.calls,
        "llm_prompt_tokens": outcome.usage.prompt_tokens,
        "llm_completion_tokens": outcome.usage.completion_tokens,
        "llm_fallbacks_to_offline": outcome.llm_fallbacks,
        "member_count_histogram": count_table(histogram_rows(sizes), "topics"),
        "largest_changes": preview_table(largest, ["action", "level", "members_before", "members", "key", "id"],
                                         limit=10),
    })
    return frame
