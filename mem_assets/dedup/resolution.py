"""Apply one planned resolution as one write transaction: before state or after state, no half."""

from __future__ import annotations

from datetime import datetime

from neo4j import ManagedTransaction, Session

from mem_assets.dedup.merging import (
    MergePlan,
    Plan,
    SupersedePlan,
    item_from_properties,
    keeps_source_text,
    merged_item,
    superseded_survivor,
)
from mem_resources.graph import dedup as graph
from mem_resources.memory_model import MemoryStatus

DONE = ("applied", "already merged")
SKIPPED = {"status": "skipped: a node was archived earlier in this run"}


def apply_merge(tx: ManagedTransaction, tenant: str, plan: MergePlan, embedding: list[float],
                now: datetime) -> dict:
    """Create the merged node, move edges, archive sources; skip unless every source is active."""
    found = graph.read_nodes(tx, tenant, [*plan.sources, plan.merged_id])
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
    counts = graph.create_merged(tx, tenant, plan.merged_id, plan.sources, template, props,
                                 plan.update_type.value, plan.reason, now)
    return {"status": "applied", **counts}


def apply_supersede(tx: ManagedTransaction, tenant: str, plan: SupersedePlan, now: datetime) -> dict:
    """Archive the older node behind a SUPERSEDED_BY edge; the newer gains a history entry."""
    found = graph.read_nodes(tx, tenant, [plan.older, plan.newer])
    if len(found) != 2:
        return {"status": "skipped: a node is gone"}
    older = item_from_properties(tenant, found[plan.older], now)
    newer = item_from_properties(tenant, found[plan.newer], now)
    if MemoryStatus.ACTIVATED != older.metadata.status or MemoryStatus.ACTIVATED != newer.metadata.status:
        return {"status": "skipped: a node is no longer activated"}
    graph.supersede(tx, tenant, plan.older, plan.newer, superseded_survivor(older, newer),
                    plan.reason, now)
    return {"status": "applied", "archived": 1}


def apply_plan(session: Session, tenant: str, plan: Plan, embeddings: list[list[float]],
               texts: dict[str, str], now: datetime) -> list[dict]:
    """Merges first, then supersedes, each in its own transaction; one row per resolution."""
    rows = []
    retired: set[str] = set()
    for merge, embedding in zip(plan.merges, embeddings, strict=True):
        outcome = SKIPPED if retired.intersection(merge.sources) else \
            session.execute_write(apply_merge, tenant, merge, embedding, now)
        if outcome["status"] == "applied":
            retired.update(merge.sources)
        rows.append({"action": f"merge ({merge.update_type.value})", "sources": list(merge.sources),
                     "result": merge.merged_id, "text": merge.text, **outcome})
    for supersede in plan.supersedes:
        outcome = SKIPPED if retired.intersection((supersede.older, supersede.newer)) else \
            session.execute_write(apply_supersede, tenant, supersede, now)
        if outcome["status"] == "applied":
            retired.add(supersede.older)
        rows.append({"action": "supersede", "sources": [supersede.older, supersede.newer],
                     "result": supersede.newer, "text": texts.get(supersede.newer, ""), **outcome})
    return rows
