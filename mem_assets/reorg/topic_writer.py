"""From a placement plan to topics in the graph, unit by unit, within a time budget.

A *unit* is a set of topics the plan links (a topic, its parent and sub-topics, a retired topic
and its successor): it is written whole or not at all, in one transaction with other whole units
(a few thousand edges per round trip). Before each unit the deadline is checked; memories the
plan placed in units left when it passes are marked deferred, so the next run plans them again.

Summaries: a topic the plan created or changed beyond ``refresh_fraction`` gets a new one, from
its members' texts (a level-2 topic: all memories under it and its sub-topics' keys); the
previous summary goes into the topic's ``history``. Other touched topics only get their counts,
centroid and children updated. A summary is written with the digest of the membership it
describes (``reorg_summary_digest``): a topic due for one whose memories are still exactly those
keeps its summary and asks no model (a retried or repeated write, a plan an LLM moved a memory
out of and back into), so names and summaries change only when membership does.

With an LLM summarizer, summaries spend the run's budget (``SummarizerResource.run_budget``). A
topic the budget left without its LLM summary is written with the offline draft, no digest, and
``reorg_summary_owed``: the next run with budget names it again even if its membership did not
change (action ``renamed``; a topic still owed then is left as it is). An unusable answer is not
owed: asking again each run would pay a model that cannot answer; the offline draft stands, with
its digest, until the membership changes. A run with nothing new and nothing owed asks no model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from mem_assets.reorg import queries
from mem_assets.reorg.llm_placement import LLM_UNDECIDED
from mem_assets.reorg.offline_summaries import PhraseIndex, phrase_summary, typical_first
from mem_assets.reorg.placement_plan import RETIRE, SET_ASIDE, TOPIC, MemberStore
from mem_assets.reorg.queries import Orphan
from mem_assets.reorg.summarizers import SummarizerResource, SummaryRequest, TopicSummary
from mem_assets.reorg.topic_space import language as language_code
from mem_assets.reorg.topic_vectors import (
    NEEDS_KEPT,
    TopicVectorsResource,
    in_spaces,
    lacks,
)
from mem_resources.embedder import EmbedderResource
from mem_resources.graph_schema_adapter import OWN_HISTORY_PROPERTY
from mem_resources.llm import CallBudget, ChatUsage
from mem_resources.memory_model import (
    ArchivedVersion,
    MemoryItem,
    MemoryMetadata,
    SourceMessage,
    UpdateType,
    display_name,
    utc_now,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Sink, tracked
from mem_resources.text import language_of

TOPIC_CONFIDENCE = 0.66
AWAITING_BATCH = "awaiting_batch"
DISSOLVED = "too_few_members"
RENAMED = "renamed"
"""Plan action of a topic taken up only to get the LLM summary an earlier run could not afford."""


# -- candidates -----------------------------------------------------------------------------------

CANDIDATE_COLUMNS = ["id", "memory_type", "memory", "set_aside", "embedding", "cheap", "space"]


class CandidateLoad(NamedTuple):
    frame: pd.DataFrame
    counts: pd.DataFrame
    re_embedded: int
    waiting: int
    vectors_deferred: int = 0


@dataclass(frozen=True)
class AfterDedup:
    """The orphans as a dedup run would leave them, for a plan made before that run: those it
    takes away, and the new ones it would make (merged memories) that stay orphans."""

    gone: frozenset[str] = frozenset()
    """Orphans no longer: archived, or given their predecessor's topic by hygiene."""
    added: tuple[Orphan, ...] = ()


def load_candidates(neo4j: Neo4jResource, embedder: EmbedderResource, vectors: TopicVectorsResource,
                    tenant: str, min_group_size: int, rebuild: bool = False,
                    e5_max: int | None = None, write: bool = True, after: AfterDedup | None = None) -> CandidateLoad:
    """Orphans of the memory types due for reorganization (every live memory of every type on a
    rebuild), sorted by type and id so that planning repeats, and the orphan counts per type.

    Orphans of types not due are marked ``awaiting_batch`` (a recorded reason, not a placement).
    Each candidate's ``cheap`` column holds its embedder vector and ``embedding`` its vector in its
    language's topic space (``topic_vectors``), or None for a memory of a kept-vector space without
    its kept vector yet: planning makes those (routing them first when the ``cascade`` is on) —
    at most ``e5_max`` per run (by memory type and id): the others are marked deferred, which the
    next run plans first.
    A memory without an embedding of the embedder's dimension is embedded for planning only (the
    graph keeps its embedding as it is). ``write=False`` (``memtend plan``): the same candidates, nothing marked
    or stored; ``after``: as they will be once a planned dedup ran (fresh counts adjusted).
    """
    with neo4j.session() as session:
        counts = session.execute_read(queries.orphan_counts, tenant)
        if after is not None:
            counts = _counts_after(counts, session.execute_read(
                queries.read_orphans, tenant, [c.memory_type for c in counts], embedder.dimension), after)
        if rebuild:
            eligible = session.execute_read(queries.live_memory_types, tenant)
            rows = session.execute_read(queries.read_live_memories, tenant, eligible, embedder.dimension)
        else:
            eligible = [count.memory_type for count in counts if count.eligible(min_group_size)]
            rows = session.execute_read(queries.read_orphans, tenant, eligible,
                                        embedder.dimension) if eligible else []
        if after is not None:
            rows = [r for r in rows if r.id not in after.gone] + [o for o in after.added if o.memory_type in eligible]
        waiting_types = [count.memory_type for count in counts if count.memory_type not in eligible]
        waiting = (session.execute_write(queries.mark_waiting, tenant, waiting_types, AWAITING_BATCH) if write
                   else sum(c.fresh for c in counts if c.memory_type in waiting_types))
    spaces = [_space(vectors, orphan) for orphan in rows]
    unvectored = sorted((rows[row].memory_type, rows[row].id) for row, space in enumerate(spaces)
                        if space in NEEDS_KEPT and not _usable(rows[row], space))
    later = {mid for _, mid in unvectored[e5_max:]} if e5_max is not None else set()
    if later:
        kept = [row for row, orphan in enumerate(rows) if orphan.id not in later]
        rows, spaces = [rows[row] for row in kept], [spaces[row] for row in kept]
        if write:
            with neo4j.session() as session:
                session.execute_write(queries.mark_deferred, tenant, sorted(later))
    cheap: list[np.ndarray | None] = [orphan.embedding for orphan in rows]
    unembedded = [row for row, vector in enumerate(cheap) if vector is None]
    for row, vector in zip(unembedded, embedder.embed([rows[row].memory for row in unembedded]),
                           strict=True):
        cheap[row] = vector
    ready = [row for row, (orphan, space) in enumerate(zip(rows, spaces, strict=True))
             if space not in NEEDS_KEPT or _usable(orphan, space)]
    chosen: list[np.ndarray | None] = [None] * len(rows)
    for row, vector in zip(ready, in_spaces([spaces[row] for row in ready], [cheap[row] for row in ready],
                                            [rows[row].reorg_vector for row in ready]), strict=True):
        chosen[row] = vector
    frame = pd.DataFrame({"id": [o.id for o in rows], "memory_type": [o.memory_type for o in rows],
                          "memory": [o.memory for o in rows], "set_aside": [o.set_aside for o in rows]},
                         columns=CANDIDATE_COLUMNS[:4])
    frame["embedding"] = pd.Series(chosen, index=frame.index, dtype=object)
    frame["cheap"] = pd.Series(cheap, index=frame.index, dtype=object)
    frame["space"] = pd.Series([space if vector is not None else None for space, vector in zip(spaces, chosen, strict=True)],
                               index=frame.index, dtype=object)
    frame = frame.sort_values(["memory_type", "id"], kind="stable", ignore_index=True)
    table = pd.DataFrame([vars(count) for count in counts],
                         columns=["memory_type", "fresh", "set_aside", "deferred"])
    table["eligible"] = table["memory_type"].isin(eligible)
    return CandidateLoad(frame, table, len(unembedded), waiting, len(later))


def _space(vectors: TopicVectorsResource, orphan: Orphan) -> str:
    """The space a candidate's vector is given in: its language's (``TopicVectorsResource.space``),
    or the one-language space when its kept vector was made for that one (planning moves it to
    the cycle's space, completing it for a cycle of two languages)."""
    lang = language_code(orphan.memory)
    space = vectors.space(lang)
    if orphan.reorg_vector is not None and lacks(orphan.reorg_vector, space):
        alone = vectors.space(lang, two_languages=False)
        return space if lacks(orphan.reorg_vector, alone) else alone
    return space


def _usable(orphan: Orphan, space: str) -> bool:
    return not lacks(orphan.reorg_vector, space)


def _counts_after(counts: Sequence[queries.OrphanCount], orphans: Sequence[Orphan],
                  after: AfterDedup) -> list[queries.OrphanCount]:
    """Fresh orphan counts once the archived orphans are gone and the new ones are in."""
    fresh = {c.memory_type: c.fresh for c in counts}
    for orphan in orphans:
        if orphan.id in after.gone and not orphan.set_aside:
            fresh[orphan.memory_type] -= 1
    for orphan in after.added:
        fresh[orphan.memory_type] = fresh.get(orphan.memory_type, 0) + 1
    known = {c.memory_type: c for c in counts}
    return [queries.OrphanCount(t, n, known[t].set_aside if t in known else 0, known[t].deferred if t in known else 0)
            for t, n in sorted(fresh.items())]


def tidy_topics(neo4j: Neo4jResource, tenant: str) -> dict[str, int]:
    """Topic hygiene before planning: PARENT edges off archived members (to their successors),
    then topics left with fewer than two members archived (their last member freed), repeated
    while a level-2 topic thins out because of it."""
    with neo4j.session() as session:
        edges = session.execute_write(queries.move_edges_off_archived, tenant)
        dissolved: list[dict[str, Any]] = []
        for _ in range(3):
            batch = session.execute_write(queries.dissolve_thin_topics, tenant, DISSOLVED)
            dissolved.extend(batch)
            if not batch:
                break
        successors = sorted({row["successor"] for row in dissolved})
        if successors:
            session.execute_write(queries.recount_topics, tenant, successors)
    return {"edges_moved": edges["moved"], "edges_dropped": edges["dropped"], "topics_dissolved": len(dissolved)}


# -- writing a plan -------------------------------------------------------------------------------

@dataclass
class WriteOutcome:
    changes: list[dict[str, Any]] = field(default_factory=list)
    created: int = 0
    grown: int = 0
    promoted: int = 0
    refreshed: int = 0
    retired: int = 0
    edges_created: int = 0
    edges_removed: int = 0
    set_aside: int = 0
    deferred: int = 0
    llm_fallbacks: int = 0
    theme_names_refused: int = 0
    """Themes whose answered name was one of their sub-topics': the draft was written instead."""
    summaries_over_budget: int = 0
    """Topics written with the offline draft because the run's LLM budget was spent (owed)."""
    summaries_owed_named: int = 0
    """Topics owed an LLM summary by an earlier run that got it in this one."""
    summaries_kept: int = 0
    stopped_by_budget: bool = False
    usage: ChatUsage = field(default_factory=ChatUsage)

    def frame(self) -> pd.DataFrame:
        columns = ["id", "memory_type", "level", "action", "key", "value", "members", "members_before",
                   "refreshed"]
        return pd.DataFrame(self.changes, columns=columns)


def _units(topics: pd.DataFrame, retired: pd.DataFrame) -> list[list[str]]:
    """Topics the plan links (parent, sub-topics, successor), as groups written together."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def join(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    ids = set(topics["id"]) | set(retired["id"])
    for row in topics.itertuples():
        find(row.id)
        if isinstance(row.parent, str):
            join(row.id, row.parent)
        for child in row.children:
            if child in ids:
                join(row.id, child)
    for row in retired.itertuples():
        join(row.id, row.successor)
    groups: dict[str, list[str]] = {}
    for node in sorted(ids):
        groups.setdefault(find(node), []).append(node)
    return [groups[root] for root in sorted(groups)]


class TopicWriter:
    """Summarizes and writes one tenant's placement plan."""

    def __init__(self, tenant: str, neo4j: Neo4jResource, embedder: EmbedderResource,
                 summarizer: SummarizerResource, log: logging.Logger | Any,
                 clock: Callable[[], float] = time.monotonic, batch_edges: int = 5000,
                 sink: Sink | None = None, budget: CallBudget | None = None) -> None:
        self.tenant = tenant
        self.neo4j = neo4j
        self.embedder = embedder
        self.summarizer = summarizer
        self.log = log
        self.clock = clock
        self.batch_edges = batch_edges
        self.sink = sink
        self.budget = budget
        self.outcome = WriteOutcome()
        self._pending: list[dict[str, Any]] = []

    def run(self, plan: pd.DataFrame, candidates: pd.DataFrame, time_budget_s: float) -> WriteOutcome:
        deadline = self.clock() + time_budget_s
        aside = plan[plan["kind"] == SET_ASIDE]
        undecided = (aside["reason"] == LLM_UNDECIDED if "reason" in aside.columns
                     else pd.Series(False, index=aside.index))
        rows = [{"id": r.id, "reason": r.reason, "nearest": None if pd.isna(r.nearest) else r.nearest,
                 "similarity": None if pd.isna(r.similarity) else float(r.similarity),
                 "group_size": None if pd.isna(r.group_size) else int(r.group_size)}
                for r in aside[~undecided].itertuples()]
        with self.neo4j.session() as session:
            self.outcome.set_aside = session.execute_write(queries.mark_set_aside_with_reasons, self.tenant, rows)
            self.outcome.deferred += session.execute_write(queries.mark_deferred, self.tenant,
                                                           sorted(aside.loc[undecided, "id"]))
        candidate_ids = set(candidates["id"])
        plan = self._with_owed(plan)
        writing = plan[plan["kind"] == TOPIC]
        with tracked(f"reorganize {self.tenant}", self.sink, total=len(writing), unit="topics") as progress:
            for memory_type, of_type in plan[plan["kind"] != SET_ASIDE].groupby("memory_type", sort=True):
                topics = of_type[of_type["kind"] == TOPIC]
                retired = of_type[of_type["kind"] == RETIRE]
                context = _TypeContext(self, str(memory_type), topics, candidates[candidates["memory_type"] == memory_type])
                units = _units(topics, retired)
                for position, unit in enumerate(units):
                    if self.clock() >= deadline:
                        self._flush()
                        self._defer(topics, units[position:], candidate_ids)
                        self.log.warning(f"Time budget of {time_budget_s:.0f}s used up: {len(units) - position} "
                                         f"{memory_type} topic groups deferred to the next run")
                        self.outcome.stopped_by_budget = True
                        return self.outcome
                    context.prepare(units[position:])
                    self._pending.append(context.unit(unit, retired))
                    progress.advance(len(unit))
                    if sum(len(row["added"]) + len(row["removed"]) for p in self._pending
                           for row in p["children"]) >= self.batch_edges:
                        self._flush()
                self._flush()
        return self.outcome

    def _with_owed(self, plan: pd.DataFrame) -> pd.DataFrame:
        """``plan`` with, given a budget (an LLM summarizer), the topics an earlier run left owed
        an LLM summary: due for one if the plan touches them, else added as ``renamed`` rows
        (membership unchanged)."""
        if self.budget is None:
            return plan
        with self.neo4j.session() as session:
            owed = session.execute_read(queries.owed_summaries, self.tenant)
        planned = set(plan.loc[plan["kind"] == TOPIC, "id"]) if len(plan) else set()
        owed_ids = {row["id"] for row in owed}
        if planned & owed_ids:
            plan = plan.copy()
            plan.loc[(plan["kind"] == TOPIC) & plan["id"].isin(owed_ids), "refresh"] = True
        owed = [row for row in owed if row["id"] not in planned]
        if not owed:
            return plan
        rows = pd.DataFrame([{"kind": TOPIC, "memory_type": row["memory_type"], "id": row["id"],
                              "level": int(row["level"]), "language": row["language"], "parent": row["parent"],
                              "children": list(row["children"]), "added": [], "removed": [],
                              "member_count": int(row["member_count"]), "members_before": int(row["member_count"]),
                              "centroid": row["centroid"], "space": row["space"], "action": RENAMED,
                              "refresh": True} for row in owed])
        return pd.concat([plan, rows], ignore_index=True) if len(plan) else rows

    def _defer(self, topics: pd.DataFrame, units: list[list[str]], candidate_ids: set[str]) -> None:
        children = dict(zip(topics["id"], topics["children"], strict=True))
        ids = sorted({child for unit in units for tid in unit for child in children.get(tid, ())
                      if child in candidate_ids})
        with self.neo4j.session() as session:
            self.outcome.deferred += session.execute_write(queries.mark_deferred, self.tenant, ids)

    def _flush(self) -> None:
        """Write the pending whole units in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        fresh = [props for unit in pending for props in unit["embed"]]
        for props, vector in zip(fresh, self.embedder.embed([p["memory"] for p in fresh]), strict=True):
            props["embedding"] = vector.astype(float).tolist()
        merged = {key: [item for unit in pending for item in unit[key]]
                  for key in ("created", "updated", "children", "retired")}
        with self.neo4j.session() as session:
            written = session.execute_write(queries.write_unit, self.tenant, merged["created"],
                                            merged["updated"], merged["children"], merged["retired"])
        self.outcome.edges_created += written.edges_created
        self.outcome.edges_removed += written.edges_removed
        for unit in pending:
            self.outcome.changes.extend(unit["changes"])


#: Calls' worth of topics gathered before naming them: calls fill up although a window mixes levels
#: and languages, and a run stopped by its time budget loses at most one window's calls.
WINDOW_BATCHES = 4


class _TypeContext:
    """One memory type's plan rows, member texts and phrase statistics, and how to write a unit."""

    def __init__(self, writer: TopicWriter, memory_type: str, topics: pd.DataFrame,
                 candidates: pd.DataFrame) -> None:
        self.writer = writer
        self.memory_type = memory_type
        self.topics: dict[str, dict[str, Any]] = {row["id"]: row for row in topics.to_dict("records")}
        self.store = MemberStore(writer.neo4j, writer.embedder, writer.tenant)
        self.store.texts.update(zip(candidates["id"], candidates["memory"], strict=True))
        refresh = [row for row in self.topics.values() if row["refresh"]]
        with writer.neo4j.session() as session:
            subtopics = sorted({c for row in refresh if row["level"] == 2 for c in row["children"]})
            self.outside = session.execute_read(queries.topic_children, writer.tenant, subtopics) if subtopics else {}
            due = [row["id"] for row in refresh]
            self.previous = session.execute_read(queries.topic_summaries, writer.tenant, due) if due else {}
        self.store.load_texts(sorted({m for row in refresh for m in self._members(row["id"])}))
        self.texts = list(self.store.texts.values())
        self.index = PhraseIndex(self.texts)
        self.index_rows = {mid: row for row, mid in enumerate(self.store.texts)}
        self.keys: dict[str, str] = {tid: info["key"] or "" for tid, info in self.outside.items()}
        self.owed: set[str] = set()
        self.prepared: set[str] = set()
        self.ready: dict[str, TopicSummary | None] = {}
        self.digests: dict[str, str] = {}

    def _members(self, tid: str) -> list[str]:
        row = self.topics[tid]
        if row["level"] == 1:
            return list(row["children"])
        below: list[str] = []
        for child in row["children"]:
            if child in self.topics:
                below.extend(self.topics[child]["children"])
            else:
                below.extend(self.outside.get(child, {}).get("children", []))
        return below

    def unit(self, unit: list[str], retired: pd.DataFrame) -> dict[str, Any]:
        out: dict[str, Any] = {"created": [], "updated": [], "children": [], "retired": [], "embed": [],
                               "changes": []}
        now = utc_now()
        for row in sorted((self.topics[tid] for tid in unit if tid in self.topics),
                          key=lambda r: (r["level"], r["id"])):
            tid = row["id"]
            digest = self.digests.get(tid, "")
            summary = self.ready.pop(tid, None)
            if row["action"] == RENAMED and (summary is None or tid in self.owed):
                continue  # still owed (or named meanwhile): left exactly as it is
            props = self._props(row, summary, now)
            if summary is not None:
                owed = tid in self.owed
                props["reorg_summary_digest"] = None if owed else digest
                props["reorg_summary_owed"] = True if owed else None
                self.writer.outcome.summaries_owed_named += row["action"] == RENAMED
            if row["action"] == "created":
                out["created"].append(props)
                out["embed"].append(props)
            else:
                out["updated"].append({"id": tid, "props": props})
                if summary is not None:
                    out["embed"].append(props)
            out["children"].append({"id": tid, "added": list(row["added"]), "removed": list(row["removed"])})
            self._count(row, summary is not None)
            out["changes"].append({
                "id": tid, "memory_type": self.memory_type, "level": int(row["level"]), "action": row["action"],
                "key": summary.key if summary else self.keys.get(tid, ""), "value": props.get("memory", ""),
                "members": int(row["member_count"]), "members_before": int(row["members_before"]),
                "refreshed": summary is not None})
        for row in retired[retired["id"].isin(unit)].itertuples():
            out["retired"].append({"id": row.id, "successor": row.successor, "reason": row.reason})
            self.writer.outcome.retired += 1
            out["changes"].append({"id": row.id, "memory_type": self.memory_type, "level": int(row.level),
                                   "action": "retired", "key": "", "value": "", "members": 0,
                                   "members_before": int(row.members_before), "refreshed": False})
        return out

    def _count(self, row: dict[str, Any], refreshed: bool) -> None:
        outcome = self.writer.outcome
        action = row["action"]
        outcome.created += action == "created"
        outcome.grown += action in ("grown", "reparented")
        outcome.promoted += action == "promoted"
        outcome.refreshed += refreshed and action != "created"

    def prepare(self, units: Sequence[list[str]]) -> None:
        """Summaries for the topics due one, from ``units[0]`` on (whole units) until
        ``WINDOW_BATCHES`` of the summarizer's batches are gathered, unless already prepared:
        level-1 topics asked together, then level-2 ones (their sub-topics' keys known by then); the
        summarizer fills each call with topics of one language. A topic whose stored summary was
        written for exactly its membership asks nothing: it keeps its summary (None when updated),
        or gets the stored one back (created again: a write repeated after a failure)."""
        if all(tid in self.prepared for tid in units[0] if tid in self.topics):
            return
        due: list[str] = []
        for unit in units:
            rows = [self.topics[tid] for tid in unit if tid in self.topics and tid not in self.prepared]
            for row in rows:
                self.prepared.add(row["id"])
                if row["refresh"]:
                    self._due(row, due)
            if len(due) >= WINDOW_BATCHES * self.writer.summarizer.batch_size():
                break
        for level in (1, 2):
            self._ask([tid for tid in due if self.topics[tid]["level"] == level])

    def _due(self, row: dict[str, Any], due: list[str]) -> None:
        tid = row["id"]
        previous = self.previous.get(tid, {})
        digest = self.digests[tid] = membership_digest(int(row["level"]), self._members(tid))
        if previous.get("summary_digest") != digest or not previous.get("key") or not previous.get("memory"):
            due.append(tid)
            return
        self.writer.outcome.summaries_kept += 1
        if row["action"] == "created":
            self.keys[tid] = previous["key"]
            self.ready[tid] = TopicSummary(key=previous["key"], value=previous["memory"],
                                           tags=list(previous.get("tags") or []),
                                           background=previous.get("background") or "")

    def _ask(self, tids: Sequence[str]) -> None:
        """Offline phrase summaries, or the summarizer's (an unusable answer falls back, counted)."""
        if not tids:
            return
        requests = [self._request(tid) for tid in tids]
        named = self.writer.summarizer.summarize(requests, self.writer.budget)
        outcome = self.writer.outcome
        outcome.usage.add(named.usage)
        for tid, request, summary, deferred in zip(tids, requests, named.summaries, named.deferred, strict=True):
            if summary is None:
                if deferred:
                    self.owed.add(tid)
                    outcome.summaries_over_budget += 1
                else:
                    outcome.llm_fallbacks += 1
                    self.writer.log.warning(f"Topic {tid}: the summarizer gave no usable summary; the offline "
                                            "summary is written instead and kept until the topic's membership "
                                            "changes")
                summary = request.draft
            if request.child_keys and summary.key in request.child_keys:
                outcome.theme_names_refused += summary is not request.draft
                summary = request.draft
            self.keys[tid] = summary.key
            self.ready[tid] = summary

    def _request(self, tid: str) -> SummaryRequest:
        row = self.topics[tid]
        rows = [self.index_rows[m] for m in self._members(tid) if m in self.index_rows]
        member_texts = [self.texts[r] for r in typical_first(rows, self.index)]
        language = language_of(member_texts)
        child_keys = [self.keys.get(child, "") for child in row["children"]] if row["level"] == 2 else []
        draft = phrase_summary(self.texts, rows, self.index, language, [k for k in child_keys if k])
        return SummaryRequest(member_texts, draft, language, child_keys)

    def _props(self, row: dict[str, Any], summary: TopicSummary | None, now: datetime) -> dict[str, Any]:
        tid = row["id"]
        dynamic = {
            "reorg_level": int(row["level"]), "reorg_member_count": len(row["children"]),
            "member_count": int(row["member_count"]), "reorg_centroid": list(row["centroid"]),
            "reorg_centroid_space": row["space"],
            "reorg_language": row["language"], "updated_at": now,
        }
        dialect = self.writer.neo4j.dialect
        members = [{"type": "memory", "memory_id": c} for c in sorted(row["children"])]
        dynamic["sources"] = ([json.dumps(m) for m in members] if dialect.memos else json.dumps(members))
        if row["action"] == "created":
            if summary is None:
                raise ValueError(f"new topic {tid} has no summary")
            item = MemoryItem(id=tid, memory=summary.value, metadata=MemoryMetadata(
                user_name=self.writer.tenant, memory_type=self.memory_type, key=summary.key,
                tags=summary.tags, background=summary.background, confidence=TOPIC_CONFIDENCE,
                type=queries.TOPIC_TYPE,
                sources=[SourceMessage(type="memory", memory_id=c) for c in sorted(row["children"])],
                created_at=now, updated_at=now, payload_hash=tid.removeprefix("mem:")))
            return {**item.to_properties(dialect), **dynamic}
        if summary is None:
            return dynamic
        previous = self.previous.get(tid, {})
        history_key = OWN_HISTORY_PROPERTY if dialect.memos else "history"
        history = json.loads(previous.get("history") or "[]")
        version = int(previous.get("version") or 1)
        if previous.get("memory"):
            updated = previous.get("updated_at")
            history.append(ArchivedVersion(
                version=version, update_type=UpdateType.REFRESH, memory=previous["memory"],
                created_at=updated.to_native() if hasattr(updated, "to_native") else now,
            ).model_dump(mode="json"))
        seed_names = {} if dialect.memos else {
            "data": summary.value, "display": display_name(summary.value, tid.removeprefix("mem:")),
            "name": display_name(summary.value, tid.removeprefix("mem:"))}
        return {**dynamic, **seed_names, "memory": summary.value,
                "key": summary.key, "tags": summary.tags, "background": summary.background,
                "version": version + 1, history_key: json.dumps(history, ensure_ascii=False),
                "reorg_refreshed_at": now}


def membership_digest(level: int, members: Sequence[str]) -> str:
    """What a summary was written for: the topic's level and the memories under it."""
    return hashlib.md5("\x1f".join((str(level), *sorted(set(members)))).encode("utf-8")).hexdigest()


def histogram_rows(sizes: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Topics per level and member-count band: L1 1–5, 6–10, 11–15, 16–20; L2 bands of 20."""
    counts: dict[str, int] = {}
    for size in sizes:
        members = int(size["members"])
        width = 5 if size["level"] == 1 else 20
        low = max((members - 1) // width * width + 1, 1)
        label = f"L{size['level']} {low:>3}–{low + width - 1}"
        counts[label] = counts.get(label, 0) + 1
    return counts
