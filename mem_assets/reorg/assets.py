"""Hierarchical reorganization per tenant (seed 000 §6): candidates → placement plan → topics."""

import dagster as dg
import pandas as pd
from pydantic import Field

from mem_assets.reorg.cascade import CLEAR
from mem_assets.reorg.llm_placement import TopicPlacerResource
from mem_assets.reorg.placement_plan import CHANGED, RETIRE, ROUTE, SET_ASIDE, TOPIC, KeptCounts, plan_table
from mem_assets.reorg.queries import owed_summary_count, topic_sizes
from mem_assets.reorg.summarizers import SummarizerResource
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_assets.reorg.topic_writer import (
    TopicWriter,
    histogram_rows,
    load_candidates,
    tidy_topics,
)
from mem_resources import model_passes
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import utc_now
from mem_resources.metadata import change_marker, count_table, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import LLM_POOL, LLM_RETRY, OWNERS


class CandidatesConfig(dg.Config):
    min_group_size: int = Field(
        default=20, ge=1,
        description="A memory type is reorganized once it has this many new orphans (seed: 20).")
    e5_max_per_run: int = Field(
        default=1000, ge=0,
        description="Most memories given their kept vector (multilingual-e5 and the topic encoders) per run "
                    "(~13-25 ms each; each is embedded once, the vector kept on its node); the others are "
                    "deferred to the next run. Raise it for a backfill of a large backlog.")
    rebuild: bool = Field(
        default=False,
        description="Re-cluster every live memory of the tenant from scratch; the old topics are "
                    "archived with SUPERSEDED_BY lineage to the new ones (members are not touched).")


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
    tenant, started = tenant_of(context), model_passes.snapshot()
    tidy = tidy_topics(neo4j, tenant)
    frame, counts, re_embedded, waiting, deferred = load_candidates(
        neo4j, embedder, topic_vectors, tenant, config.min_group_size, config.rebuild, config.e5_max_per_run)
    frame["rebuild"] = config.rebuild
    context.add_output_metadata({
        **change_marker(context, len(frame) > 0),
        "candidates": len(frame),
        "rebuild": config.rebuild,
        "eligible_memory_types": ", ".join(counts.loc[counts["eligible"], "memory_type"]) or "none",
        "re_embedded": re_embedded,
        "e5_deferred_to_next_run": deferred,
        "marked_awaiting_batch": waiting,
        **model_passes.metadata(started),
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
    pool=LLM_POOL,
)
def memory_clusters(context: dg.AssetExecutionContext, neo4j: Neo4jResource,
                    embedder: EmbedderResource, topic_vectors: TopicVectorsResource,
                    topic_placer: TopicPlacerResource, reorg_candidates: pd.DataFrame) -> pd.DataFrame:
    """The placement plan: candidates offered to the tenant's topics, the rest grouped into new
    topics or left unplaced with a reason (a rebuild plans from scratch and retires the old tree).
    Each topic space's thresholds are the ``topic_vectors`` resource's: tuned with its models,
    overridden per deployment only (``MEMTEND_TOPIC_THRESHOLDS``), not per run. With an LLM
    (``topic_placer``), the memories the offline plan is unsure of are placed by it. With the
    ``cascade`` on, a candidate without its kept vector is routed first: only uncertain ones pay."""
    started = model_passes.snapshot()
    rebuild = bool(len(reorg_candidates)) and bool(reorg_candidates["rebuild"].iloc[0])
    salt = f"rebuild:{utc_now().isoformat()}" if rebuild else ""
    advisor = topic_placer.advisor()
    made = KeptCounts()
    frame = plan_table(neo4j, embedder, topic_vectors, tenant_of(context), reorg_candidates,
                       topic_vectors.space_params(), rebuild, salt, topic_vectors.cross_params(), advisor=advisor,
                       cascade=topic_vectors.cascade_params(), counts=made)
    routed = frame[frame["kind"] == ROUTE]
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
        **model_passes.metadata(started),
        "cascade_cheap": int((routed["reason"] == CLEAR).sum()),
        "cascade_encoder": int((routed["reason"] != CLEAR).sum()),
        "cascade_encoder_changed": int((routed["action"] == CHANGED).sum()),
        "kept_vectors_made": made.made,
        "kept_vectors_completed": made.completed,
        "unplaced_reasons": count_table(aside["reason"].value_counts().to_dict(), "reason"),
        "cascade_stages": count_table(routed["reason"].value_counts().to_dict(), "stage"),
        **(advisor.metadata() if advisor is not None else {}),
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
    the refresh fraction, the old one kept in history), retired ones archived with lineage. An
    LLM summarizer spends the run's budget; topics beyond it keep the offline summary and are
    named by the next run with budget (``summaries_owed_left``)."""
    started = model_passes.snapshot()
    budget = summarizer.run_budget()
    writer = TopicWriter(tenant_of(context), neo4j, embedder, summarizer, context.log,
                         sink=context.log.info, budget=budget)
    outcome = writer.run(memory_clusters, reorg_candidates, config.time_budget_s)
    frame = outcome.frame()
    with neo4j.session() as session:
        sizes = session.execute_read(topic_sizes, tenant_of(context))
        owed = session.execute_read(owed_summary_count, tenant_of(context)) if budget is not None else 0
    largest = (frame.assign(change=(frame["members"] - frame["members_before"]).abs())
               .sort_values(["change", "id"], ascending=[False, True]))
    context.add_output_metadata({
        **change_marker(context, outcome.created + outcome.grown + outcome.retired + outcome.summaries_owed_named > 0),
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
        "llm_theme_names_refused": outcome.theme_names_refused,
        "summaries_over_budget": outcome.summaries_over_budget,
        "summaries_owed_named": outcome.summaries_owed_named,
        "summaries_owed_left": owed,
        **(budget.left("llm_summary") if budget is not None else {}),
        "summaries_kept_unchanged_membership": outcome.summaries_kept,
        **model_passes.metadata(started),
        "member_count_histogram": count_table(histogram_rows(sizes), "topics"),
        "largest_changes": preview_table(largest, ["action", "level", "members_before", "members", "key", "id"],
                                         limit=10),
    })
    return frame
