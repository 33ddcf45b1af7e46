"""Apply planned resolutions, each whole or not at all: before state or after state, no half."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import pandas as pd
from neo4j import ManagedTransaction
from neo4j.exceptions import ConstraintError

from mem_assets.dedup import queries
from mem_assets.dedup.merging import MergePlan, keeps_source_text, merged_item
from mem_assets.dedup.pair_judge import Fusion
from mem_assets.dedup.resolution_plan import Plan, held_back, plan_resolutions
from mem_assets.dedup.superseding import SupersedePlan, superseded_survivor
from mem_assets.dedup.undo import resolution_record
from mem_resources.embedder import EmbedderResource
from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import MemoryItem, MemoryStatus, MemoryType, payload_hash, utc_now
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Sink, tracked

DONE = ("applied", "already merged")
SKIPPED = {"status": "skipped: a node was archived earlier in this run"}
CONFLICT_ATTEMPTS = 3


def item_from_properties(tenant: str, props: dict, now: datetime) -> MemoryItem:
    """Read a node, filling what other writers may leave out (status, type, text, times, hash)."""
    props = dict(props)
    props["memory"] = props.get("memory") or props.get("data") or ""
    props.setdefault("status", MemoryStatus.ACTIVATED.value)
    props.setdefault("memory_type", MemoryType.LONG_TERM.value)
    props.setdefault("created_at", props.get("updated_at") or now)
    props.setdefault("updated_at", props["created_at"])
    props.setdefault("payload_hash", payload_hash(tenant, props["memory_type"], props["memory"]))
    props["user_name"] = tenant
    return MemoryItem.from_properties(props)


def apply_resolutions(tx: ManagedTransaction, tenant: str, resolutions: Sequence[MergePlan | SupersedePlan],
                      vectors: dict[str, list[float]], now: datetime, run_id: str | None = None,
                      dialect: GraphDialect = SEED_DIALECT) -> list[dict]:
    """Apply node-disjoint resolutions in at most three round trips: lock and read all their nodes, then
    write the merges and the supersedes that pass their checks. A merge is skipped unless every
    source is activated, a supersede unless both nodes are. The nodes are locked before their
    status is read: a concurrent resolution of the same nodes waits, then finds them archived.
    ``vectors``: the embedding of each merged node, by merged id; ``dialect``: the schema the
    written properties take. One outcome per resolution. Each applied one is recorded
    (``undo.resolution_record``, with ``run_id``) in the same transaction, with what an undo
    needs to give back."""
    found = queries.lock_and_read(tx, tenant, [n for r in resolutions for n in _nodes_of(r)])
    outcomes: list[dict] = []
    merges, supersedes = [], []
    for resolution in resolutions:
        if isinstance(resolution, MergePlan):
            outcome, row = _merge(tenant, resolution, found, vectors[resolution.merged_id], now, dialect)
            merges += [row] if row else []
        else:
            outcome, row = _supersede(tenant, resolution, found, now, dialect)
            supersedes += [row] if row else []
        outcomes.append(outcome)
    merged = queries.create_merged(tx, tenant, merges, now, run_id) if merges else {}
    superseded = queries.supersede(tx, tenant, supersedes, now, run_id) if supersedes else {}
    records = []
    for resolution, outcome in zip(resolutions, outcomes, strict=True):
        if outcome["status"] == "applied":
            written = dict(merged[resolution.merged_id] if isinstance(resolution, MergePlan)
                           else superseded[resolution.older])
            records.append(resolution_record(resolution, found, written.pop("edges"),
                                             written.pop("twin_states"), run_id, now))
            outcome.update(written, resolution_id=records[-1]["id"])
    if records:
        queries.record_resolutions(tx, tenant, records)
    return outcomes


def _merge(tenant: str, plan: MergePlan, found: dict[str, dict], embedding: list[float],
           now: datetime, dialect: GraphDialect) -> tuple[dict, dict | None]:
    """The merge's outcome and, when it applies, its ``queries.merge_row``."""
    if plan.merged_id in found:
        return {"status": "already merged"}, None
    sources = [item_from_properties(tenant, found[s], now) for s in plan.sources if s in found]
    if len(sources) != len(plan.sources) or any(
            s.metadata.status != MemoryStatus.ACTIVATED for s in sources):
        return {"status": "skipped: a source is gone or no longer activated"}, None
    item = merged_item(tenant, plan, sources, embedding)
    props = item.to_properties(dialect)
    if keeps_source_text(plan, sources):
        props["dedup_checked_at"] = now
    template = next((s.id for s in sources if s.metadata.payload_hash == item.metadata.payload_hash),
                    sources[0].id)
    return {"status": "applied"}, queries.merge_row(plan.merged_id, plan.sources, template, props,
                                                    plan.update_type.value, plan.reason)


def _supersede(tenant: str, plan: SupersedePlan, found: dict[str, dict],
               now: datetime, dialect: GraphDialect) -> tuple[dict, dict | None]:
    """The supersede's outcome and, when it applies, its ``queries.supersede_row``."""
    if plan.older not in found or plan.newer not in found:
        return {"status": "skipped: a node is gone"}, None
    older = item_from_properties(tenant, found[plan.older], now)
    newer = item_from_properties(tenant, found[plan.newer], now)
    if MemoryStatus.ACTIVATED != older.metadata.status or MemoryStatus.ACTIVATED != newer.metadata.status:
        return {"status": "skipped: a node is no longer activated"}, None
    return {"status": "applied", "archived": 1}, queries.supersede_row(
        plan.older, plan.newer, superseded_survivor(older, newer, dialect), plan.reason)


def rounds(resolutions: Sequence[MergePlan | SupersedePlan]) -> list[list[int]]:
    """Group resolutions (by position) into rounds of node-disjoint ones, keeping the order of
    any two that share a node: a round can run in parallel, rounds run one after another."""
    last_round: dict[str, int] = {}
    grouped: list[list[int]] = []
    for position, resolution in enumerate(resolutions):
        nodes = _nodes_of(resolution)
        number = max((last_round[n] + 1 for n in nodes if n in last_round), default=0)
        if number == len(grouped):
            grouped.append([])
        grouped[number].append(position)
        for node in nodes:
            last_round[node] = number
    return grouped


def _nodes_of(resolution: MergePlan | SupersedePlan) -> tuple[str, ...]:
    if isinstance(resolution, MergePlan):
        return (*resolution.sources, resolution.merged_id)
    return resolution.older, resolution.newer


def _sources_of(resolution: MergePlan | SupersedePlan) -> tuple[str, ...]:
    """The existing nodes a resolution needs activated."""
    return resolution.sources if isinstance(resolution, MergePlan) else (resolution.older, resolution.newer)


def _retires(resolution: MergePlan | SupersedePlan) -> tuple[str, ...]:
    """The nodes an applied resolution archives."""
    return resolution.sources if isinstance(resolution, MergePlan) else (resolution.older,)


def apply_plan(neo4j: Neo4jResource, tenant: str, plan: Plan, embeddings: list[list[float]],
               texts: dict[str, str], now: datetime, workers: int = 4,
               per_transaction: int = 25, sink: Sink | None = None, run_id: str | None = None) -> list[dict]:
    """Node-disjoint resolutions run on parallel sessions, up to ``per_transaction`` of them in one
    write transaction: a resolution is always applied whole or not at all, and one commit per
    resolution cost more than the resolutions themselves. One row per resolution, in plan order
    (merges, then supersedes). Progress goes to ``sink``."""
    resolutions: list[MergePlan | SupersedePlan] = [*plan.merges, *plan.supersedes]
    vectors = {merge.merged_id: vector for merge, vector in zip(plan.merges, embeddings, strict=True)}
    outcomes: dict[int, dict] = {}
    retired: set[str] = set()

    def apply_chunk(tx: ManagedTransaction, positions: list[int]) -> list[dict]:
        live = [p for p in positions if not retired.intersection(_sources_of(resolutions[p]))]
        applied = dict(zip(live, apply_resolutions(tx, tenant, [resolutions[p] for p in live], vectors, now, run_id,
                                                   neo4j.dialect),
                           strict=True))
        return [applied.get(p, SKIPPED) for p in positions]

    def run(positions: list[int]) -> list[dict]:
        """Transient errors (deadlocks) are retried by the driver; a uniqueness clash with a node
        another writer created meanwhile is retried here: the rerun reads it and skips."""
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            try:
                with neo4j.session() as session:
                    return session.execute_write(apply_chunk, positions)
            except ConstraintError:
                if attempt == CONFLICT_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    with (ThreadPoolExecutor(max_workers=workers) as pool,
          tracked(f"resolve {tenant}", sink, total=len(resolutions), unit="resolutions") as progress):
        for group in rounds(resolutions):
            chunks = [group[i:i + per_transaction] for i in range(0, len(group), per_transaction)]
            for chunk, results in zip(chunks, pool.map(run, chunks), strict=True):
                outcomes.update(zip(chunk, results, strict=True))
            for position in group:
                if outcomes[position]["status"] == "applied":
                    retired.update(_retires(resolutions[position]))
            progress.advance(len(group))
    rows = []
    for position, resolution in enumerate(resolutions):
        if isinstance(resolution, MergePlan):
            rows.append({"action": f"merge ({resolution.update_type.value})",
                         "sources": list(resolution.sources), "result": resolution.merged_id,
                         "text": resolution.text, **outcomes[position]})
        else:
            rows.append({"action": "supersede", "sources": [resolution.older, resolution.newer],
                         "result": resolution.newer, "text": texts.get(resolution.newer, ""),
                         **outcomes[position]})
    return rows


@dataclass(frozen=True)
class Resolution:
    """What ``resolve_judgments`` did: the plan, one row per resolution, every node text it read
    (merged texts included) and the nodes it marked checked."""

    plan: Plan
    rows: list[dict]
    texts: dict[str, str]
    checked: list[str]


def plan_judgments(neo4j: Neo4jResource, tenant: str, judgments: pd.DataFrame,
                   fuse: Callable[..., tuple[Fusion, ChatUsage]], deadline_s: float | None,
                   now: datetime) -> tuple[Plan, dict[str, MemoryItem]]:
    """The resolutions one run's judgments call for (``plan_resolutions``), and the nodes read
    to plan them. Reads only: the run applies the plan, ``memtend plan`` shows it."""
    related = judgments[judgments["label"] != "independent"] if len(judgments) else judgments
    with neo4j.session() as session:
        found = session.execute_read(queries.read_nodes, tenant,
                                     sorted(set(related.get("left_id", [])) | set(related.get("right_id", []))))
    nodes = {i: item_from_properties(tenant, props, now) for i, props in found.items()}
    plan = plan_resolutions(tenant, judgments, nodes, fuse,
                            deadline=time.monotonic() + deadline_s if deadline_s else None,
                            dialect=neo4j.dialect)
    return plan, nodes


def resolve_judgments(neo4j: Neo4jResource, tenant: str, judgments: pd.DataFrame, embedder: EmbedderResource,
                      fuse: Callable[..., tuple[Fusion, ChatUsage]], deadline_s: float | None,
                      seen_at: datetime, now: datetime, run_id: str | None = None) -> Resolution:
    """Plan (``plan_judgments``) and apply the resolutions of one run's judgments, then mark the
    judged nodes checked as of ``seen_at``, except those that must wait (``resolution_plan.held_back``)."""
    ids = sorted(set(judgments.get("left_id", [])) | set(judgments.get("right_id", [])))
    plan, nodes = plan_judgments(neo4j, tenant, judgments, fuse, deadline_s, now)
    vectors = embedder.embed([m.text for m in plan.merges])
    rows = apply_plan(neo4j, tenant, plan, [v.tolist() for v in vectors],
                      {i: n.memory for i, n in nodes.items()}, now, run_id=run_id)
    waiting = set(held_back(ids, judgments, plan, rows, DONE))
    checked = [i for i in ids if i not in waiting]
    with neo4j.session() as session:
        session.execute_write(queries.mark_checked, tenant, checked, seen_at, utc_now())
    texts = {**{i: n.memory for i, n in nodes.items()}, **{m.merged_id: m.text for m in plan.merges}}
    return Resolution(plan, rows, texts, checked)
