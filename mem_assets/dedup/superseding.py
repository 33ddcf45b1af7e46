"""Superseding a contradiction: the newer memory wins, the older is archived into its history.

Which of two memories is newer: stated later (``created_at``; for a merged node, its newest
source's time), then arrived later (ingest run, file, line). Never an id or a hash: two memories
of the same moment from the same source have no order, and a contradiction between them is left
unresolved rather than decided by chance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from mem_resources.graph_schema_adapter import OWN_HISTORY_PROPERTY, SEED_DIALECT, GraphDialect
from mem_resources.memory_model import ARRIVAL_SEPARATOR, ArchivedVersion, MemoryItem, UpdateType

When = Literal["older", "newer", "same time"]

_CONTINUES = re.compile(r"\b(?:still|continues|continue|continuing|keeps)\b|仍|依然|依旧|照旧|还在|一直|继续",
                        re.IGNORECASE)


def says_it_continues(text: str) -> bool:
    """The memory says a fact goes on ("still plays with his trio", "仍在", "一直"): restated, it
    cannot replace an older statement of the same fact, whatever a pair model reads into it."""
    return _CONTINUES.search(text) is not None


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, order=True)
class Recency:
    stated_at: datetime
    arrival: str = ""

    @property
    def source(self) -> str:
        """The arrival without its line: the ingest run and file a memory came from."""
        return self.arrival.rsplit(ARRIVAL_SEPARATOR, 1)[0]

    def describe(self) -> str:
        where = self.source.split(ARRIVAL_SEPARATOR)[-1] if self.arrival else "an unknown source"
        return f"{self.stated_at.isoformat()} in {where}"


def _stated(created_at: datetime, updated_at: datetime, arrival: str | None) -> Recency:
    """A merged node's ``updated_at`` is its newest source's time, so the later of the two counts."""
    return Recency(max(_aware(created_at), _aware(updated_at)), arrival or "")


def recency(item: MemoryItem) -> Recency:
    meta = item.metadata
    return _stated(meta.created_at, meta.updated_at, meta.arrival)


def recency_of(created_at: str | None, updated_at: str | None, arrival: str | None,
               now: datetime) -> Recency:
    """``recency`` of a node read as ISO strings, with ``item_from_properties``' fallbacks (a
    missing time is the other one, then ``now``), without building the whole item."""
    created = datetime.fromisoformat(created_at) if created_at else None
    updated = datetime.fromisoformat(updated_at) if updated_at else None
    created = created or updated or now
    return _stated(created, updated or created, arrival)


def compare(a: Recency, b: Recency) -> int | None:
    """-1 when ``a`` is older, 1 when newer, None when nothing orders them (the same moment from
    the same source, or an unknown arrival)."""
    if a.stated_at != b.stated_at:
        return -1 if a.stated_at < b.stated_at else 1
    if a.arrival and b.arrival and a.source != b.source:
        return -1 if a.arrival < b.arrival else 1
    return None


def when(candidate: Recency, new: Recency) -> When:
    order = compare(candidate, new)
    return "same time" if order is None else ("older" if order < 0 else "newer")


@dataclass(frozen=True)
class SupersedePlan:
    """``older`` archived, ``newer`` its survivor, and why."""

    older: str
    newer: str
    reason: str


def superseded_survivor(older: MemoryItem, newer: MemoryItem, dialect: GraphDialect = SEED_DIALECT) -> dict:
    """Properties the surviving newer node gets: the older's history and an entry for the older
    itself (so a chain's survivor holds every version; memtend's own history property on a MemOS
    graph), and a version bump."""
    entries = {(e.archived_memory_id, e.version, e.memory): e for e in newer.metadata.history}
    for entry in [*older.metadata.history,
                  ArchivedVersion(version=older.metadata.version, update_type=UpdateType.CONFLICT,
                                  archived_memory_id=older.id, memory=older.memory,
                                  created_at=older.metadata.updated_at)]:
        entries.setdefault((entry.archived_memory_id, entry.version, entry.memory), entry)
    history = sorted(entries.values(), key=lambda e: (e.created_at, e.version, e.archived_memory_id or ""))
    updated = newer.model_copy(update={"metadata": newer.metadata.model_copy(update={
        "history": history,
        "version": max(older.metadata.version, newer.metadata.version) + 1,
    })})
    props = updated.to_properties(dialect)
    history_key = OWN_HISTORY_PROPERTY if dialect.memos else "history"
    return {history_key: props[history_key], "version": props["version"]}
