"""Incremental dedup of one tenant: candidates -> judgments -> merged nodes (seed 000 §4–§5)."""

from collections.abc import Iterator
from typing import get_args

import dagster as dg
import pandas as pd
from pydantic import Field

from mem_assets.dedup import queries
from mem_assets.dedup.apply_resolutions import DONE, resolve_judgments
from mem_assets.dedup.candidate_search import Search, search_candidates
from mem_assets.dedup.candidates import default_threshold
from mem_assets.dedup.judgment_cache import JudgingReport, judge_tenant
from mem_assets.dedup.pair_judge import JudgeResource, budgeted_fuse
from mem_assets.dedup.relations import CascadeStage
from mem_assets.dedup.review_queue import queued, unsure_pairs
from mem_resources import model_passes
from mem_resources.embedder import EmbedderResource
from mem_resources.llm import ChatUsage, budget_left
from mem_resources.memory_model import utc_now
from mem_resources.metadata import change_marker, histogram, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import LLM_POOL, LLM_RETRY, NEO4J_WRITE_POOL, OWNERS


class DedupConfig(dg.Config):
    threshold: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="Cosine threshold; default per embedder (0.35 WordLlama, 0.2 hashing, 0.8 neural).")
    top_k: int = Field(default=5, ge=1, description="Neighbours compared per unchecked node.")
    search: Search = Field(
        default="numpy", description="Batched matrix product per tenant, or the Neo4j vector index.")
    max_nodes_per_run: int = Field(default=50_000, ge=1,
                                   description="Unchecked nodes taken per run; the rest wait.")


@dg.asset(
    partitions_def=tenant_partitions,
    deps=["memory_items", "context_graph"],
    kinds={"neo4j", "numpy"},
    group_name="dedup",
    owners=OWNERS,
    code_version="1",
    pool=NEO4J_WRITE_POOL,
)
def dedup_candidates(context: dg.AssetExecutionContext, config: DedupConfig, neo4j: Neo4jResource,
                     embedder: EmbedderResource) -> pd.DataFrame:
    """Pairs of an unchecked node and an activated node of the same tenant and memory type that
    are close in embedding space, or identical by payload hash."""
    started = model_passes.snapshot()
    threshold = config.threshold if config.threshold is not None else default_threshold(embedder)
    found = search_candidates(neo4j, tenant_of(context), embedder, threshold, config.top_k, config.search,
                              config.max_nodes_per_run, utc_now())
    pairs = found.pairs
    pairs.attrs["unchecked_nodes"] = found.unchecked
    context.add_output_metadata({
        **change_marker(context, found.unchecked > 0),
        "unchecked_nodes": found.unchecked,
        "embedded_missing_vectors": found.embedded,
        **model_passes.metadata(started),
        "active_nodes_searched": found.active,
        "pairs": len(pairs),
        "exact_duplicates": int(pairs["exact"].sum()) if len(pairs) else 0,
        "nodes_without_candidates": found.without_candidates,
        "threshold": threshold,
        "search": config.search,
        "score_histogram": histogram(pairs["score"], label="cosine"),
        "preview": preview_table(pairs, ["left_text", "right_text", "score", "exact"]),
    })
    return pairs


JUDGE_FAILURES_CHECK = "judge_failures"
#: One log line names this many unresolved contradictions: a line per item (each an event-log
#: write) cost more than the whole merge at 2k new items.
UNRESOLVED_LOGGED = 5


def _per_new_node(calls: int, new_nodes: int) -> float:
    return round(calls / new_nodes, 3) if new_nodes else 0.0


def _llm_metadata(judge: JudgeResource, report: JudgingReport, usage: ChatUsage) -> dict[str, object]:
    """What the LLM decided and spent this run: decisions by stage, pairs routed to it, answers
    that changed the offline label or were overruled by it, work left for the next run by the
    budget, and the budget left (calls, tokens; "no limit" when unlimited)."""
    out: dict[str, object] = {f"decided_{stage}": count for stage, count in report.decided.items()}
    budget = judge.llm_budget
    if budget is None:
        return out
    calls, tokens = budget
    spent = usage.prompt_tokens + usage.completion_tokens
    return {**out, "llm_calls": usage.calls, "pairs_routed_to_llm": report.pairs_routed,
            "llm_changed": report.llm_changed, "llm_overruled": report.llm_overruled,
            "llm_restated": report.llm_restated, "pairs_routed_carried": report.pairs_carried,
            "over_budget_pairs": report.over_budget_pairs, "over_budget_nodes": report.over_budget_nodes,
            **budget_left("llm", calls, tokens, usage.calls, spent)}


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "python"},
    group_name="dedup",
    owners=OWNERS,
    code_version="1",
    pool=LLM_POOL,
    retry_policy=LLM_RETRY,
    check_specs=[dg.AssetCheckSpec(
        JUDGE_FAILURES_CHECK, asset="relation_judgments", partitions_def=tenant_partitions,
        description="Warns when judge calls failed or ran out of time: those nodes stay "
                    "unchecked and are judged again by the next run.")],
)
def relation_judgments(context: dg.AssetExecutionContext, dedup_candidates: pd.DataFrame,
                       neo4j: Neo4jResource, judge: JudgeResource) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Each candidate pair labelled redundant, contradictory or independent, with a reason;
    one judge request per new node with all its candidates, judged once per content pair
    (cached in the graph), so reruns cost no judge calls."""
    started = model_passes.snapshot()
    judged = judge_tenant(neo4j, tenant_of(context), dedup_candidates, judge, utc_now(), sink=context.log.info)
    report, judgments, answered, usage = judged.report, judged.judgments, judged.answered, judged.report.usage
    failed = judgments[judgments["failed"].astype(bool)] if len(judgments) else judgments
    over_budget = judgments["over_budget"].astype(bool) if len(judgments) else pd.Series(dtype=bool)
    deferred = judgments[judgments["deferred"].astype(bool) & ~over_budget] if len(judgments) else judgments
    for row in failed.itertuples():
        context.log.warning(f"Judge failed on pair {row.left_id} / {row.right_id} ({row.reason}); "
                            "counted as independent, nothing merged, both nodes stay unchecked.")
    if len(deferred):
        context.log.warning(f"The judging deadline passed: {usage.deferred} new nodes "
                            f"({len(deferred)} pairs) were not judged and stay unchecked.")
    if report.over_budget_nodes:
        context.log.info(f"The run's LLM budget is spent: {report.over_budget_nodes} new nodes "
                         f"({report.over_budget_pairs} pairs) wait, unmerged and unchecked, for the next run.")
    labels = judgments["label"].value_counts().to_dict() if len(judgments) else {}
    frame = judgments.merge(dedup_candidates[["left_id", "right_id", "left_text", "right_text", "score"]],
                            on=["left_id", "right_id"], how="left") if len(judgments) else judgments
    new_nodes = int(dedup_candidates.attrs.get("unchecked_nodes", 0))
    frame.attrs.update({"unchecked_nodes": new_nodes, "judge_calls": usage.calls})
    counts = {
        "failed": len(failed),
        "failed_nodes": usage.failures,
        "deferred_nodes": usage.deferred,
        "unparsable_answers": usage.unparsable,
        "retries": usage.retries,
    }
    yield dg.Output(frame, metadata={
        **change_marker(context, len(frame) > 0),
        "pairs": len(judgments),
        "redundant": int(labels.get("redundant", 0)),
        "contradictory": int(labels.get("contradictory", 0)),
        "independent": int(labels.get("independent", 0)),
        "unsure": int(judgments["near"].notna().sum()) if len(judgments) else 0,
        **counts,
        "failure_kinds": dg.MetadataValue.json(dict(usage.failure_kinds)),
        "cache_hits": report.cache_hits,
        "reviewed_pairs": len(answered),
        "judge": judge.fingerprint,
        "nodes_judged": report.requests,
        "judge_calls": usage.calls,
        "judge_calls_per_new_node": _per_new_node(usage.calls, new_nodes),
        "text_vectors_reused": report.vectors_reused,
        "text_vectors_made": report.vectors_made,
        "text_vectors_skipped": report.vectors_skipped,
        "pairs_gated": report.pairs_gated,
        "pairs_guarded": report.pairs_guarded,
        **{f"pairs_{stage}_stage": report.cascade.get(stage, 0) for stage in get_args(CascadeStage)},
        "middle_stage_changed": report.middle_changed,
        "accurate_stage_changed": report.accurate_changed,
        "cross_encoder_pair_orders": report.cross_encoded,
        **model_passes.metadata(started),
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        **_llm_metadata(judge, report, usage),
        "preview": preview_table(frame, ["label", "left_text", "right_text", "reason", "stage"]),
    })
    yield dg.AssetCheckResult(
        check_name=JUDGE_FAILURES_CHECK, passed=not (len(failed) or len(deferred)),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={**counts, "failure_kinds": dg.MetadataValue.json(dict(usage.failure_kinds))},
        description=None if not (len(failed) or len(deferred)) else
        f"{usage.failures} judge requests failed and {usage.deferred} were not made in time; "
        "their nodes stay unchecked for the next run.")


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j"},
    group_name="dedup",
    owners=OWNERS,
    code_version="1",
    pool=LLM_POOL,
    retry_policy=LLM_RETRY,
)
def merged_nodes(context: dg.AssetExecutionContext, dedup_candidates: pd.DataFrame,
                 relation_judgments: pd.DataFrame, neo4j: Neo4jResource,
                 embedder: EmbedderResource, judge: JudgeResource) -> pd.DataFrame:
    """Resolutions applied to the graph: redundant groups merged (originals archived with
    MERGED_TO, their edges moved), contradictions fused or resolved newer-wins (SUPERSEDED_BY),
    contradictions of one moment left unresolved with a reason."""
    now = utc_now()
    seen_at = pd.Timestamp(dedup_candidates["seen_at"].iloc[0]).to_pydatetime() if len(dedup_candidates) else now
    tenant = tenant_of(context)
    fuse, budget = budgeted_fuse(judge)
    outcome = resolve_judgments(neo4j, tenant, relation_judgments, embedder, fuse,
                                judge.run_deadline_s(), seen_at, now, run_id=context.run.run_id)
    plan, rows, checked = outcome.plan, outcome.rows, outcome.checked
    deferred = [row for row in rows if row["status"] not in DONE]
    if deferred:
        context.log.info(f"{len(deferred)} resolutions deferred (a node changed or was archived "
                         "earlier in this run); their nodes stay unchecked for the next run")
    for group in plan.failed:
        context.log.warning(f"Resolver failed for {list(group)}: left as they are, unchecked.")
    if plan.unresolved:
        shown = "; ".join(f"{list(item.ids)}: {item.reason}" for item in plan.unresolved[:UNRESOLVED_LOGGED])
        context.log.info(f"{len(plan.unresolved)} unresolved contradictions left as they are; "
                         f"first {min(len(plan.unresolved), UNRESOLVED_LOGGED)}: {shown}")
    result = pd.DataFrame(rows, columns=["action", "sources", "result", "text", "status",
                                         "edges_moved", "archived", "twins_archived", "resolution_id"])
    applied = result[result["status"] == "applied"]
    texts = outcome.texts
    unresolved = pd.DataFrame([{"first": texts[a], "second": texts[b], "reason": item.reason}
                               for item in plan.unresolved for a, b in [item.ids]],
                              columns=["first", "second", "reason"])
    scores = ({frozenset((a, b)): float(score) for a, b, score in zip(
        relation_judgments["left_id"], relation_judgments["right_id"], relation_judgments["score"], strict=True)}
        if len(relation_judgments) and "score" in relation_judgments else {})
    unsure = unsure_pairs(relation_judgments, context.run.run_id)
    with neo4j.session() as session:
        if plan.unresolved or unsure:
            session.execute_write(queries.queue_reviews, tenant,
                                  queued(plan.unresolved, texts, scores, context.run.run_id) + unsure)
        pending = pd.DataFrame(session.execute_read(queries.reviews, tenant, "pending"),
                               columns=["id", "first_text", "second_text", "score", "reason"])
    new_nodes = int(relation_judgments.attrs.get("unchecked_nodes", 0))
    llm_calls = int(relation_judgments.attrs.get("judge_calls", 0)) + plan.usage.calls
    context.add_output_metadata({
        **change_marker(context, len(applied) + len(checked) > 0),
        "merges": int(applied["action"].str.startswith("merge").sum()),
        "supersedes": int((applied["action"] == "supersede").sum()),
        "archived": int(applied["archived"].fillna(0).sum()),
        "working_twins_archived": int(applied["twins_archived"].fillna(0).sum()),
        "edges_moved": int(applied["edges_moved"].fillna(0).sum()),
        "skipped": int(len(result) - len(applied)),
        "unresolved": len(plan.unresolved),
        "unresolved_pairs": preview_table(unresolved, ["first", "second", "reason"]),
        "resolver_failed": len(plan.failed),
        "unsupported_fusions": plan.unsupported_fusions,
        "redundant_kept_apart": plan.kept_apart,
        "left_out_of_merges": len(plan.left_out),
        "nodes_marked_checked": len(checked),
        "resolver_calls": plan.usage.calls,
        "resolver_tokens": plan.usage.prompt_tokens + plan.usage.completion_tokens,
        "resolver_over_budget": plan.usage.deferred,
        **(budget.left("resolver") if budget is not None else {}),
        "judge_and_resolver_calls_per_new_node": _per_new_node(llm_calls, new_nodes),
        "queued_unsure": len(unsure),
        "review_queue": len(pending),
        "review_queue_pairs": preview_table(pending, ["id", "first_text", "second_text", "score", "reason"]),
        "changes": preview_table(applied.assign(sources=applied["sources"].map(" | ".join)),
                                 ["resolution_id", "action", "text", "sources"]),
        "undo": f"memtend undo {tenant} --run {context.run.run_id}",
        "preview": preview_table(result, ["action", "status", "result", "text"]),
    })
    return result
