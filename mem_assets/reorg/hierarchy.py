"""From a cluster plan to summary parents in the graph, topic by topic, within a time budget.

A topic is written whole or not at all: its parent(s), their PARENT edges and the children's
markers go in the same transaction (several whole topics share one, a few thousand edges at a
time). Before each topic the deadline is checked; topics left when it passes are marked
deferred, so the next run continues with them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from mem_assets.reorg import queries
from mem_assets.reorg.summarizers import SummarizerResource, TopicSummary
from mem_assets.reorg.summarizing import (
    TermStats,
    extractive_summary,
    terms,
)
from mem_resources.embedder import EmbedderResource
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import (
    MemoryItem,
    MemoryMetadata,
    SourceMessage,
    memory_id,
    utc_now,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.text import language_of

TOPIC_CONFIDENCE = 0.66
SET_ASIDE_SMALL = "small_cluster"
SET_ASIDE_REJECTED = "summary_rejected"


def parent_id(tenant: str, memory_type: str, child_ids: Sequence[str]) -> str:
    """Deterministic from the member set: the same children always get the same parent."""
    payload = "\x1f".join(("topic", tenant, memory_type, *sorted(child_ids)))
    return memory_id(hashlib.md5(payload.encode("utf-8")).hexdigest())


def parent_properties(tenant: str, memory_type: str, pid: str, summary: TopicSummary,
                      child_ids: Sequence[str], level: int, embedding: np.ndarray) -> dict[str, Any]:
    """A topic as a memory item (seed §6.3: type topic, confidence 0.66, its children as sources).

    Its payload hash is the member-set hash, so two topics that happen to share a text are never
    taken for exact duplicates of each other.
    """
    now = utc_now()
    item = MemoryItem(
        id=pid,
        memory=summary.value,
        metadata=MemoryMetadata(
            user_name=tenant, memory_type=memory_type, key=summary.key, tags=summary.tags,
            background=summary.background, confidence=TOPIC_CONFIDENCE, type=queries.TOPIC_TYPE,
            sources=[SourceMessage(type="memory", memory_id=child) for child in sorted(child_ids)],
            embedding=embedding.astype(float).tolist(), created_at=now, updated_at=now,
            payload_hash=pid.removeprefix("mem:"),
        ),
    )
    return {**item.to_properties(), "reorg_level": level, "reorg_member_count": len(child_ids)}


@dataclass
class _Parent:
    id: str
    level: int
    summary: TopicSummary
    child_ids: list[str]
    member_count: int


@dataclass
class ReorgOutcome:
    parents: list[dict[str, Any]] = field(default_factory=list)
    parents_created: int = 0
    edges_created: int = 0
    set_aside_small: int = 0
    set_aside_rejected: int = 0
    rejected_summaries: int = 0
    deferred_nodes: int = 0
    stopped_by_budget: bool = False
    usage: ChatUsage = field(default_factory=ChatUsage)

    def frame(self) -> pd.DataFrame:
        columns = ["id", "memory_type", "level", "key", "value", "children", "members"]
        return pd.DataFrame(self.parents, columns=columns)


CANDIDATE_COLUMNS = ["id", "memory_type", "memory", "set_aside", "embedding"]


class CandidateLoad(NamedTuple):
    frame: pd.DataFrame
    counts: pd.DataFrame
    re_embedded: int


def load_candidates(neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str,
                    min_group_size: int) -> CandidateLoad:
    """Orphans of the memory types due for reorganization, sorted by type and id so that clustering
    repeats, and the orphan counts of every type.

    Orphans without an embedding of the embedder's dimension (written by another pipeline, or
    under another embedder) are embedded here for clustering; the graph is not changed.
    """
    columns: dict[str, list[Any]] = {name: [] for name in CANDIDATE_COLUMNS}
    with neo4j.session() as session:
        counts = session.execute_read(queries.orphan_counts, tenant)
        eligible = [count.memory_type for count in counts if count.eligible(min_group_size)]
        orphans = session.execute_read(queries.read_orphans, tenant, eligible,
                                       embedder.dimension) if eligible else []
    for orphan in orphans:
        columns["id"].append(orphan.id)
        columns["memory_type"].append(orphan.memory_type)
        columns["memory"].append(orphan.memory)
        columns["set_aside"].append(orphan.set_aside)
        columns["embedding"].append(orphan.embedding)
    vectors = columns.pop("embedding")
    missing = [row for row, vector in enumerate(vectors) if vector is None]
    for row, vector in zip(missing, embedder.embed([columns["memory"][row] for row in missing]), strict=True):
        vectors[row] = vector
    frame = pd.DataFrame(columns)
    frame["embedding"] = pd.Series(vectors, index=frame.index, dtype=object)
    frame = frame.sort_values(["memory_type", "id"], kind="stable", ignore_index=True)
    table = pd.DataFrame([vars(count) for count in counts],
                         columns=["memory_type", "fresh", "set_aside", "deferred"])
    table["eligible"] = table["memory_type"].isin(eligible)
    return CandidateLoad(frame, table, len(missing))


class _TypeContext:
    """Texts, vectors and term statistics of one memory type's candidates."""

    def __init__(self, candidates: pd.DataFrame) -> None:
        self.ids: list[str] = candidates["id"].tolist()
        self.texts: list[str] = candidates["memory"].tolist()
        self.vectors = np.vstack(candidates["embedding"].to_numpy()).astype(np.float32)
        self.row_of = {node_id: row for row, node_id in enumerate(self.ids)}
        self.stats = TermStats([terms(text) for text in self.texts])

    def rows(self, node_ids: Sequence[str]) -> list[int]:
        return [self.row_of[node_id] for node_id in node_ids]

    def typical_first(self, rows: Sequence[int]) -> list[str]:
        """Member texts, the most typical (nearest the centroid) first: what a reader sees first."""
        members = self.vectors[list(rows)]
        order = np.argsort(-(members @ members.mean(axis=0)), kind="stable")
        return [self.texts[rows[i]] for i in order]


class Reorganizer:
    """Summarizes and writes one tenant's planned clusters."""

    def __init__(self, tenant: str, neo4j: Neo4jResource, embedder: EmbedderResource,
                 summarizer: SummarizerResource, log: logging.Logger | Any,
                 clock: Callable[[], float] = time.monotonic, batch_edges: int = 5000) -> None:
        self.tenant = tenant
        self.neo4j = neo4j
        self.embedder = embedder
        self.summarizer = summarizer
        self.log = log
        self.clock = clock
        self.batch_edges = batch_edges
        self.outcome = ReorgOutcome()
        self._pending: list[tuple[str, _Parent]] = []

    def run(self, candidates: pd.DataFrame, clusters: pd.DataFrame, time_budget_s: float) -> ReorgOutcome:
        deadline = self.clock() + time_budget_s
        small = [node for ids in clusters.loc[clusters["status"] == "set_aside", "node_ids"] for node in ids]
        with self.neo4j.session() as session:
            self.outcome.set_aside_small = session.execute_write(
                queries.mark_set_aside, self.tenant, small, SET_ASIDE_SMALL)
        kept = clusters[clusters["status"] == "kept"]
        for memory_type, of_type in kept.groupby("memory_type", sort=True):
            context = _TypeContext(candidates[candidates["memory_type"] == memory_type]
                                   .reset_index(drop=True))
            topics = list(of_type.groupby("topic", sort=True))
            for position, (topic, leaves) in enumerate(topics):
                if self.clock() >= deadline:
                    self._flush()
                    self._defer([leaves_ for _, leaves_ in topics[position:]])
                    self.log.warning(f"Time budget of {time_budget_s:.0f}s used up: {len(topics) - position} "
                                     f"{memory_type} topics deferred to the next run")
                    self.outcome.stopped_by_budget = True
                    return self.outcome
                self._topic(str(memory_type), str(topic), list(leaves["node_ids"]), context)
        self._flush()
        return self.outcome

    def _defer(self, remaining: list[pd.DataFrame]) -> None:
        ids = [node for leaves in remaining for node_ids in leaves["node_ids"] for node in node_ids]
        with self.neo4j.session() as session:
            self.outcome.deferred_nodes += session.execute_write(queries.mark_deferred, self.tenant, ids)

    def _summary(self, context: _TypeContext, rows: list[int], label: str) -> TopicSummary | None:
        texts = context.typical_first(rows)
        language = language_of(texts)
        draft = extractive_summary(context.texts, context.vectors, rows, context.stats, language)
        summary, usage = self.summarizer.summarize(texts, draft, language)
        self.outcome.usage.add(usage)
        if summary is None:
            self.outcome.rejected_summaries += 1
            self.log.warning(f"Skipping {label} ({len(rows)} memories): the summarizer's answer was "
                             "unusable; its memories are set aside until new orphans arrive")
        return summary

    def _set_aside_rejected(self, node_ids: Sequence[str]) -> None:
        with self.neo4j.session() as session:
            self.outcome.set_aside_rejected += session.execute_write(
                queries.mark_set_aside, self.tenant, node_ids, SET_ASIDE_REJECTED)

    def _topic(self, memory_type: str, topic: str, leaves: list[list[str]], context: _TypeContext) -> None:
        all_ids = [node for leaf in leaves for node in leaf]
        top: TopicSummary | None = None
        if len(leaves) > 1:
            top = self._summary(context, context.rows(all_ids), f"topic {topic}")
            if top is None:
                self._set_aside_rejected(all_ids)
                return
        parents: list[_Parent] = []
        for number, leaf in enumerate(leaves):
            summary = self._summary(context, context.rows(leaf), f"cluster {topic}/{number}")
            if summary is None:
                self._set_aside_rejected(leaf)
                continue
            parents.append(_Parent(parent_id(self.tenant, memory_type, leaf), 1, summary,
                                   list(leaf), len(leaf)))
        if top is not None and len(parents) > 1:
            children = [parent.id for parent in parents]
            parents.append(_Parent(parent_id(self.tenant, memory_type, children), 2, top, children,
                                   sum(parent.member_count for parent in parents)))
        self._pending.extend((memory_type, parent) for parent in parents)
        if sum(len(parent.child_ids) for _, parent in self._pending) >= self.batch_edges:
            self._flush()

    def _flush(self) -> None:
        """Write the pending whole topics in one transaction (a few thousand edges per round trip)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        vectors = self.embedder.embed([parent.summary.value for _, parent in pending])
        props = [parent_properties(self.tenant, memory_type, parent.id, parent.summary,
                                   parent.child_ids, parent.level, vector)
                 for (memory_type, parent), vector in zip(pending, vectors, strict=True)]
        links = [{"parent": parent.id, "child": child}
                 for _, parent in pending for child in parent.child_ids]
        with self.neo4j.session() as session:
            written = session.execute_write(queries.write_topics, self.tenant, props, links)
        self.outcome.parents_created += written.parents_created
        self.outcome.edges_created += written.edges_created
        self.outcome.parents.extend(
            {"id": parent.id, "memory_type": memory_type, "level": parent.level,
             "key": parent.summary.key, "value": parent.summary.value,
             "children": len(parent.child_ids), "members": parent.member_count}
            for memory_type, parent in pending
        )
