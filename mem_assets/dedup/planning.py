"""Turn judged pairs into resolutions, and compute merged metadata (seed 000 §4.2, §5.2).

Redundant pairs are grouped (union-find) so a node repeated three times becomes one merged node
in one step. Contradictions are then resolved between the groups' results: the judge's resolver
either fuses them (a merge with update_type "conflict") or the newer one wins (supersede).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd

from mem_assets.dedup.judges import Fusion, Label
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import (
    ArchivedVersion,
    MemoryItem,
    MemoryStatus,
    MemoryType,
    SourceMessage,
    UpdateType,
    memory_id,
    normalize_text,
    payload_hash,
)


@dataclass(frozen=True)
class MergePlan:
    merged_id: str
    sources: tuple[str, ...]
    text: str
    update_type: UpdateType
    reason: str


@dataclass(frozen=True)
class SupersedePlan:
    older: str
    newer: str
    reason: str


@dataclass
class Plan:
    merges: list[MergePlan] = field(default_factory=list)
    supersedes: list[SupersedePlan] = field(default_factory=list)
    unresolved: list[tuple[str, ...]] = field(default_factory=list)
    usage: ChatUsage = field(default_factory=ChatUsage)


def merged_id(tenant: str, sources: Sequence[str]) -> str:
    """Deterministic from the tenant and the set of sources: a rerun finds the same node."""
    digest = hashlib.md5("\x1f".join(("merge", tenant, *sorted(sources))).encode()).hexdigest()
    return memory_id(digest)


def _components(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, ...]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return sorted(tuple(sorted(group)) for group in groups.values())


def plan_resolutions(tenant: str, judgments: pd.DataFrame, nodes: dict[str, MemoryItem],
                     fuse: Callable[[Sequence[str], Label], tuple[Fusion, ChatUsage]]) -> Plan:
    """Plan merges and supersedes from judged pairs (columns left_id, right_id, label, failed).

    Pairs whose nodes are missing or no longer activated are skipped: their nodes stay unchecked
    and the next run compares them with whatever is active then (e.g. the merged node).
    """
    plan = Plan()
    usable = judgments[~judgments["failed"]] if not judgments.empty else judgments

    def active(node_id: str) -> bool:
        node = nodes.get(node_id)
        return node is not None and node.metadata.status == MemoryStatus.ACTIVATED

    def pairs_of(label: str) -> list[tuple[str, str]]:
        rows = usable[usable["label"] == label] if not usable.empty else usable
        return [(a, b) for a, b in zip(rows.get("left_id", []), rows.get("right_id", []), strict=True)
                if active(a) and active(b)]

    representative: dict[str, tuple[str, str, datetime]] = {}
    for group in _components(pairs_of("redundant")):
        fusion, usage = fuse([nodes[n].memory for n in group], "redundant")
        plan.usage.add(usage)
        if fusion.failed or fusion.text is None:
            plan.unresolved.append(group)
            continue
        merge = MergePlan(merged_id(tenant, group), group, fusion.text, UpdateType.DUPLICATE, fusion.reason)
        plan.merges.append(merge)
        newest = max(nodes[n].metadata.updated_at for n in group)
        for node in group:
            representative[node] = (merge.merged_id, merge.text, newest)

    def current(node_id: str) -> tuple[str, str, datetime]:
        node = nodes[node_id]
        return representative.get(node_id, (node_id, node.memory, node.metadata.updated_at))

    seen: set[frozenset[str]] = set()
    for a, b in pairs_of("contradictory"):
        (id_a, text_a, at_a), (id_b, text_b, at_b) = current(a), current(b)
        if id_a == id_b or frozenset((id_a, id_b)) in seen:
            continue
        seen.add(frozenset((id_a, id_b)))
        (old_id, old_text, _), (new_id, new_text, _) = sorted(
            [(id_a, text_a, at_a), (id_b, text_b, at_b)], key=lambda side: (side[2], side[0]))
        fusion, usage = fuse([old_text, new_text], "contradictory")
        plan.usage.add(usage)
        if fusion.failed:
            plan.unresolved.append((old_id, new_id))
        elif fusion.text is not None:
            sources = tuple(sorted((old_id, new_id)))
            plan.merges.append(MergePlan(merged_id(tenant, sources), sources, fusion.text,
                                         UpdateType.CONFLICT, fusion.reason))
        else:
            plan.supersedes.append(SupersedePlan(old_id, new_id, fusion.reason))
    return plan


def _union_sources(items: Sequence[MemoryItem]) -> list[SourceMessage]:
    seen: dict[str, SourceMessage] = {}
    for item in items:
        for source in item.metadata.sources:
            dumped = source.model_dump(mode="json", exclude_none=True)
            seen.setdefault(json.dumps(dumped, sort_keys=True, ensure_ascii=False), source)
    return list(seen.values())


def archived_versions(items: Sequence[MemoryItem], update_type: UpdateType) -> list[ArchivedVersion]:
    """The sources' own histories, then one entry per source for the version being archived."""
    entries: dict[tuple[str | None, int, str], ArchivedVersion] = {}
    for item in items:
        for entry in item.metadata.history:
            entries.setdefault((entry.archived_memory_id, entry.version, entry.memory), entry)
    for item in items:
        entry = ArchivedVersion(version=item.metadata.version, update_type=update_type,
                                archived_memory_id=item.id, memory=item.memory,
                                created_at=item.metadata.updated_at)
        entries.setdefault((entry.archived_memory_id, entry.version, entry.memory), entry)
    return sorted(entries.values(), key=lambda e: (e.created_at, e.version, e.archived_memory_id or ""))


def merged_item(tenant: str, plan: MergePlan, sources: Sequence[MemoryItem],
                embedding: list[float]) -> MemoryItem:
    """Seed §4.2 merged metadata: sources unioned, embedding recomputed, latest updated_at,
    version max + 1, history with an archived version per source; other fields from the source
    whose text is kept (else the newest), filled from the others where empty."""
    by_recency = sorted(sources, key=lambda s: (s.metadata.updated_at, s.id), reverse=True)
    kept = next((s for s in by_recency if normalize_text(s.memory) == normalize_text(plan.text)),
                by_recency[0])
    ordered = [kept, *(s for s in by_recency if s is not kept)]
    metas = [s.metadata for s in ordered]
    confidences = [m.confidence for m in metas if m.confidence is not None]
    meta = kept.metadata.model_copy(update={
        "status": MemoryStatus.ACTIVATED,
        "key": next((m.key for m in metas if m.key), None),
        "background": next((m.background for m in metas if m.background), None),
        "tags": list(dict.fromkeys(tag for m in metas for tag in m.tags)),
        "sources": _union_sources(ordered),
        "embedding": embedding,
        "confidence": max(confidences) if confidences else None,
        "created_at": min(m.created_at for m in metas),
        "updated_at": max(m.updated_at for m in metas),
        "version": max(m.version for m in metas) + 1,
        "history": archived_versions(ordered, plan.update_type),
        "evolve_to": [],
        "working_binding": None,
        "payload_hash": payload_hash(tenant, kept.metadata.memory_type.value, plan.text),
    })
    return MemoryItem.model_validate({"id": plan.merged_id, "memory": plan.text,
                                      "metadata": meta.model_dump()})


def superseded_survivor(older: MemoryItem, newer: MemoryItem) -> dict:
    """Properties the surviving newer node gets: a history entry for the older, version bump."""
    history = [*newer.metadata.history, ArchivedVersion(version=older.metadata.version, update_type=UpdateType.CONFLICT,
                                   archived_memory_id=older.id, memory=older.memory,
                                   created_at=older.metadata.updated_at)]
    updated = newer.model_copy(update={"metadata": newer.metadata.model_copy(update={
        "history": history,
        "version": max(older.metadata.version, newer.metadata.version) + 1,
    })})
    props = updated.to_properties()
    return {"history": props["history"], "version": props["version"]}


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


def keeps_source_text(plan: MergePlan, sources: Sequence[MemoryItem]) -> bool:
    """A merged node whose text is one of its sources' needs no new comparison."""
    return any(normalize_text(s.memory) == normalize_text(plan.text) for s in sources)
