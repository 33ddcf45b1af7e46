"""Apply planned resolutions, each whole or not at all: before state or after state, no half."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from neo4j import ManagedTransaction
from neo4j.exceptions import ConstraintError

from mem_assets.dedup import queries
from mem_assets.dedup.planning import (
    MergePlan,
    Plan,
    SupersedePlan,
    item_from_properties,
    keeps_source_text,
    merged_item,
    superseded_survivor,
)
from mem_resources.memory_model import MemoryStatus
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Sink, tracked

DONE = ("applied", "already merged")
SKIPPED = {"status": "skipped: a node was archived earlier in this run"}
CONFLICT_ATTEMPTS = 3


def apply_merge(tx: ManagedTransaction, tenant: str, plan: MergePlan, embedding: list[float],
                now: datetime) -> dict:
    """Create the merged node, move edges, archive sources; skip unless every source is active.
    The sources are locked before their status is read: a concurrent resolution of the same
    nodes waits, then finds them archived."""
    found = queries.lock_and_read(tx, tenant, [*plan.sources, plan.merged_id])
    if plan.merged_id in found:
        return {"status": "already merged"}
    sources = [item_from_properties(tenant, found[s], now) for s in plan.sources if s in found]
    if len(sources) != len(plan.sources) or any(
            s.metadata.status != MemoryStatus.ACTIVATED for s in sources):
        return {"status": "skipped: a source is gone or no longer activated"}
    item = merged_item(tenant, plan, sources, embedding)
    props = item.to_properties()
    if keeps_source_text(plan, sources):
        props["dedup_checked_at"] = now
    template = next((s.id for s in sources if s.metadata.payload_hash == item.metadata.payload_hash),
                    sources[0].id)
    counts = queries.create_merged(tx, tenant, plan.merged_id, plan.sources, template, props,
                                 plan.update_type.value, plan.reason, now)
    return {"status": "applied", **counts}


def apply_supersede(tx: ManagedTransaction, tenant: str, plan: SupersedePlan, now: datetime) -> dict:
    """Archive the older node (and its working twin) behind a SUPERSEDED_BY edge; the newer gains
    its history and takes its topic edges. Both are locked before their status is read."""
    found = queries.lock_and_read(tx, tenant, [plan.older, plan.newer])
    if len(found) != 2:
        return {"status": "skipped: a node is gone"}
    older = item_from_properties(tenant, found[plan.older], now)
    newer = item_from_properties(tenant, found[plan.newer], now)
    if MemoryStatus.ACTIVATED != older.metadata.status or MemoryStatus.ACTIVATED != newer.metadata.status:
        return {"status": "skipped: a node is no longer activated"}
    counts = queries.supersede(tx, tenant, plan.older, plan.newer, superseded_survivor(older, newer),
                               plan.reason, now)
    return {"status": "applied", "archived": 1, **counts}


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


def apply_plan(neo4j: Neo4jResource, tenant: str, plan: Plan, embeddings: list[list[float]],
               texts: dict[str, str], now: datetime, workers: int = 4,
               per_transaction: int = 25, sink: Sink | None = None) -> list[dict]:
    """Node-disjoint resolutions run on parallel sessions, up to ``per_transaction`` of them in one
    write transaction: a resolution is always applied whole or not at all, and one commit per
    resolution cost more than the resolutions themselves. One row per resolution, in plan order
    (merges, then supersedes). Progress goes to ``sink``."""
    resolutions: list[MergePlan | SupersedePlan] = [*plan.merges, *plan.supersedes]
    vectors = dict(zip(range(len(plan.merges)), embeddings, strict=True))
    outcomes: dict[int, dict] = {}
    retired: set[str] = set()

    def apply_chunk(tx: ManagedTransaction, positions: list[int]) -> list[dict]:
        results = []
        for position in positions:
            resolution = resolutions[position]
            touched = resolution.sources if isinstance(resolution, MergePlan) else \
                (resolution.older, resolution.newer)
            if retired.intersection(touched):
                results.append(SKIPPED)
            elif isinstance(resolution, MergePlan):
                results.append(apply_merge(tx, tenant, resolution, vectors[position], now))
            else:
                results.append(apply_supersede(tx, tenant, resolution, now))
        return results

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
                    resolution = resolutions[position]
                    retired.update(resolution.sources if isinstance(resolution, MergePlan)
                                   else (resolution.older,))
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
