"""Incremental placement: new memories join the tenant's topics; only the rest makes new topics.

One reorganization cycle over a tenant's forest of topics (level 1 over memories, level 2 over
level-1 sub-topics) and its pool of unplaced memories:

1. **Offer** each pooled memory to the existing level-1 topics of its language: it joins the
   nearest one when the cosine to that topic's centroid (in the ``TopicSpace``) is at least
   ``place_similarity`` and beats the best topic of any *other* theme (root) by ``place_margin``.
   A topic that would pass ``max_members`` is cut into sub-topics (KMeans), never overfilled.
2. **Group** what is left (average-linkage, ``group_similarity``); groups of at least
   ``min_cluster_size`` become topics. Groups under one coarser cut of the same tree
   (``theme_similarity``) and new groups whose centroids are ``merge_similarity`` alike become one
   theme, unless it holds fewer than ``min_theme_size`` memories (then they stay in the pool). A
   new theme is then offered to the existing topics by its centroid (a mean is steadier than one
   memory, so ``attach_similarity`` is lower, with a wider ``attach_margin``) and joins the theme
   it fits as a sub-topic instead of starting a near-duplicate tree.
3. **Offer again** what is still left, now also to the new topics.
4. What fits nowhere stays unplaced with a recorded reason (precision first: an unsure memory is
   not filed), and waits for the next cycle's pool.

Across languages (``plan_languages`` with ``CrossParams``): each language is planned in its own
space, but a memory that fits no topic of its own language may join the other language's nearest
level-1 topic in a space both share (multilingual-e5), each side centred on its own language's mean.

A pre-existing topic whose memories changed by at least ``refresh_fraction`` (or that became a
level-2 topic) is due for a new summary. Pure: no Dagster, no Neo4j; the vectors of members of a
topic that must be split are fetched through a callback, so callers read only those (all the
topics one offer will split are asked for in one call first, so a caching callback reads once).
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from mem_assets.reorg.clustering import leaves_of, merge_groups, themed_groups
from mem_assets.reorg.topic_space import TopicSpace
from mem_resources.embedder import normalize_rows

ANY_LANGUAGE = "all"
NO_SIMILAR_TOPIC = "no_similar_topic"
AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class PlacementParams:
    """Thresholds are cosines in the topic space (see ``topic_space``). The defaults are the
    shipped ones of the offline WordLlama embedder's space; each space's shipped values are in
    ``models/placement-thresholds.json`` (``placement_thresholds``). ``theme_similarity`` below
    ``group_similarity`` gathers groups into themes (off at 1)."""

    place_similarity: float = 0.30
    place_margin: float = 0.03
    group_similarity: float = 0.15
    merge_similarity: float = 0.40
    attach_similarity: float = 0.15
    attach_margin: float = 0.05
    max_members: int = 20
    min_cluster_size: int = 3
    theme_similarity: float = 1.0
    min_theme_size: int = 1
    refresh_fraction: float = 0.25
    block_rows: int = 1000
    split_languages: bool = True
    seed: int = 0


@dataclass(frozen=True)
class CrossParams:
    """A memory that fits no topic of its own language (after the first offer, and again what is
    left at the end, small groups included) joins the other language's nearest level-1 topic when
    their cosine in the shared space is at least ``place_similarity`` and beats that language's
    other themes by ``place_margin``; it is then a member of that topic, in that topic's space."""

    place_similarity: float = 0.35
    place_margin: float = 0.05


@dataclass(frozen=True)
class Abroad:
    """The other language's level-1 topics in the shared space (centred on that language's mean,
    normalised), ordered by top-level topic; ``starts``: where each top-level topic's run begins
    (for the margin over other themes)."""

    leaves: list[str]
    starts: np.ndarray
    centroids: np.ndarray


@dataclass(frozen=True)
class Guests:
    """Memories of the other language offered to this cycle's topics at its end: their vectors in
    this cycle's space (what they are stored with if they join) and in the shared space (centred on
    their own language's mean, normalised)."""

    ids: list[str]
    vectors: np.ndarray
    shared: np.ndarray


@dataclass
class Topic:
    """A topic node: level 1 over memories, level 2 over level-1 topics."""

    id: str
    level: int
    language: str
    children: list[str]
    vector_sum: np.ndarray
    member_count: int
    parent: str | None = None


@dataclass(frozen=True)
class SetAside:
    """Why a memory stayed unplaced: its reason, nearest topic and the cosine to it."""

    reason: str
    nearest_topic: str | None
    similarity: float
    group_size: int


@dataclass
class CyclePlan:
    topics: dict[str, Topic]
    placed: dict[str, str] = field(default_factory=dict)
    moved: dict[str, str] = field(default_factory=dict)
    set_aside: dict[str, SetAside] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)
    grown: set[str] = field(default_factory=set)
    promoted: set[str] = field(default_factory=set)
    reparented: set[str] = field(default_factory=set)
    retired: dict[str, str] = field(default_factory=dict)
    refresh: set[str] = field(default_factory=set)
    #: Own memories sent to the other language's topic (with that leaf and the cosine); not set aside here.
    exported: dict[str, SetAside] = field(default_factory=dict)
    #: Guests (the other language's memories) that joined a topic here, and those that did not.
    guests_joined: set[str] = field(default_factory=set)
    guests_left: dict[str, SetAside] = field(default_factory=dict)
    #: Shared-space vectors of the own memories exported or set aside (offered to the other side).
    shared: dict[str, np.ndarray] = field(default_factory=dict)
    means: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def touched(self) -> set[str]:
        """Topics whose child list changed: their PARENT edges must be rewritten."""
        return self.created | self.grown | self.promoted


def default_topic_id(members: Sequence[str]) -> str:
    return "topic:" + hashlib.md5("\x1f".join(sorted(members)).encode("utf-8")).hexdigest()


class _Cycle:
    def __init__(self, topics: Mapping[str, Topic], ids: Sequence[str], vectors: np.ndarray,
                 langs: Sequence[str], params: PlacementParams,
                 member_vectors: Callable[[Sequence[str]], np.ndarray],
                 new_id: Callable[[Sequence[str]], str], cross: CrossParams | None = None,
                 to_shared: Callable[[np.ndarray], np.ndarray] | None = None,
                 abroad: Abroad | None = None, guests: Guests | None = None) -> None:
        self.params = params
        self.cross = cross if to_shared is not None else None
        self.to_shared = to_shared
        self.abroad = abroad
        self.guests = guests
        self.topics = copy.deepcopy(dict(topics))
        self.ids = list(ids)
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.langs = np.array([lang if params.split_languages else ANY_LANGUAGE for lang in langs],
                              dtype=object)
        self.member_vectors = member_vectors
        self.new_id = new_id
        self.plan = CyclePlan(topics=self.topics)
        self.before = {tid: (topic.level, self._memories_below(tid)) for tid, topic in self.topics.items()}
        roots = [topic for topic in self.topics.values() if topic.parent is None]
        self.space = TopicSpace.fit([root.language for root in roots], _means(roots, self.vectors.shape[1]),
                                    self.langs, self.vectors)
        self.projected = self.space.project(self.vectors, self.langs) if len(self.ids) else self.vectors
        self.unplaced = np.ones(len(self.ids), dtype=bool)
        self.nearest: dict[int, tuple[str | None, float, str]] = {}
        self.group_size = np.ones(len(self.ids), dtype=np.int64)
        self.own_rows = len(self.ids)
        self.plan.means = dict(self.space.means)

    # -- forest helpers -------------------------------------------------------------------------
    def _memories_below(self, tid: str) -> frozenset[str]:
        topic = self.topics[tid]
        if topic.level == 1:
            return frozenset(topic.children)
        return frozenset(m for child in topic.children for m in self.topics[child].children)

    def _root(self, tid: str) -> str:
        while (parent := self.topics[tid].parent) is not None:
            tid = parent
        return tid

    def _add_to_ancestors(self, tid: str, vector_sum: np.ndarray, count: int) -> None:
        """Members added under ``tid`` count for its ancestors too: they are grown (their count
        and centroid are written even though their own child list did not change)."""
        parent = self.topics[tid].parent
        while parent is not None:
            self.topics[parent].vector_sum = self.topics[parent].vector_sum + vector_sum
            self.topics[parent].member_count += count
            if parent not in self.plan.created:
                self.plan.grown.add(parent)
            parent = self.topics[parent].parent

    def _centroids(self, tids: Sequence[str]) -> np.ndarray:
        topics = [self.topics[tid] for tid in tids]
        return self.space.project(_means(topics, self.vectors.shape[1]), [t.language for t in topics])

    # -- offering memories to topics ------------------------------------------------------------
    def _nearest(self, vectors: np.ndarray, lang: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """For topic-space ``vectors`` of one language: the level-1 topics, the nearest one per
        vector, its cosine, and the best cosine to a level-1 topic of any *other* theme (root)."""
        leaves = sorted(tid for tid, t in self.topics.items() if t.level == 1 and t.language == lang)
        if not leaves:
            return [], np.zeros(0, dtype=np.int64), np.full(len(vectors), -1.0), np.full(len(vectors), -1.0)
        leaves, starts = _by_root(leaves, [self._root(tid) for tid in leaves])
        best_leaf, best, second = _best_two(vectors, self._centroids(leaves), starts)
        return leaves, best_leaf, best, second

    def offer(self) -> None:
        """Rows still unplaced join the nearest level-1 topic when close and unambiguous enough."""
        choices: dict[str, list[int]] = {}
        for lang in np.unique(self.langs[self.unplaced]):
            rows = np.flatnonzero(self.unplaced & (self.langs == lang))
            leaves, best_leaf, best, second = self._nearest(self.projected[rows], str(lang))
            if not leaves:
                continue
            for row, leaf, score, other in zip(rows, best_leaf, best, second, strict=True):
                tid = leaves[int(leaf)]
                if score < self.params.place_similarity:
                    self.nearest[int(row)] = (tid, float(score), NO_SIMILAR_TOPIC)
                elif score - other < self.params.place_margin:
                    self.nearest[int(row)] = (tid, float(score), AMBIGUOUS)
                else:
                    choices.setdefault(tid, []).append(int(row))
        self.grow_leaves(choices)

    def grow_leaves(self, choices: Mapping[str, Sequence[int]]) -> None:
        """Add each topic's chosen rows; the members of topics about to be cut need their vectors."""
        full = [m for tid, rows in choices.items()
                if self.topics[tid].member_count + len(rows) > self.params.max_members
                for m in self.topics[tid].children]
        if full:
            self.member_vectors(full)
        for tid in sorted(choices):
            self.grow_leaf(tid, choices[tid])

    def grow_leaf(self, tid: str, rows: Sequence[int]) -> None:
        """Add pooled rows to a level-1 topic; past ``max_members`` it is cut into sub-topics."""
        leaf = self.topics[tid]
        new_ids = [self.ids[row] for row in rows]
        added = self.vectors[list(rows)].sum(axis=0, dtype=np.float64)
        self.unplaced[list(rows)] = False
        for row in rows:
            self.plan.placed[self.ids[row]] = tid
        if leaf.member_count + len(rows) <= self.params.max_members:
            leaf.children = leaf.children + new_ids
            leaf.vector_sum = leaf.vector_sum + added
            leaf.member_count += len(rows)
            self._add_to_ancestors(tid, added, len(rows))
            self.plan.grown.add(tid)
            return
        old_ids = list(leaf.children)
        raw = np.vstack([self.member_vectors(old_ids), self.vectors[list(rows)]]).astype(np.float32)
        self._add_to_ancestors(tid, added, len(rows))
        self._split(tid, old_ids + new_ids, raw, keep_id=set(old_ids))

    def _split(self, tid: str, member_ids: list[str], raw: np.ndarray, keep_id: set[str]) -> None:
        """Cut a level-1 topic's (grown) member set into sub-topics of at most ``max_members``.

        Under a level-2 topic, the part holding most of the old members keeps the id and the others
        become sibling sub-topics; a top-level topic becomes level 2 over all the parts.
        """
        leaf = self.topics[tid]
        projected = self.space.project(raw, [leaf.language] * len(raw))
        parts = leaves_of(projected, np.arange(len(member_ids)), self.params.max_members,
                          self.params.min_cluster_size, self.params.seed)
        parts = sorted(parts, key=lambda part: (-sum(member_ids[i] in keep_id for i in part), int(part[0])))
        if leaf.parent is None:
            leaf.level = 2
            leaf.children = []
            leaf.vector_sum = raw.sum(axis=0, dtype=np.float64)
            leaf.member_count = len(member_ids)
            self.plan.promoted.add(tid)
            for part in parts:
                self._new_leaf([member_ids[i] for i in part], raw[part], tid)
            return
        first, *others = parts
        leaf.children = [member_ids[i] for i in first]
        leaf.vector_sum = raw[first].sum(axis=0, dtype=np.float64)
        leaf.member_count = len(first)
        self.plan.grown.add(tid)
        for part in others:
            self._new_leaf([member_ids[i] for i in part], raw[part], leaf.parent)

    def _moved(self, member: str, tid: str) -> None:
        if member in self.plan.placed:
            self.plan.placed[member] = tid
        else:
            self.plan.moved[member] = tid

    def _new_leaf(self, member_ids: list[str], raw: np.ndarray, parent: str | None,
                  language: str | None = None) -> str:
        lang = language or (self.topics[parent].language if parent else ANY_LANGUAGE)
        tid = self.new_id([f"under:{parent}", *member_ids] if parent else member_ids)
        if tid in self.topics:
            raise ValueError(f"topic id {tid} is taken")
        self.topics[tid] = Topic(id=tid, level=1, language=lang, children=list(member_ids),
                                 vector_sum=raw.sum(axis=0, dtype=np.float64),
                                 member_count=len(member_ids), parent=parent)
        self.plan.created.add(tid)
        if parent is not None:
            self.topics[parent].children.append(tid)
            if parent not in self.plan.created:
                self.plan.grown.add(parent)
        for member in member_ids:
            self._moved(member, tid)
        return tid

    # -- across languages -----------------------------------------------------------------------
    def _shared(self, raw: np.ndarray) -> np.ndarray:
        """Own-space vectors (or means) in the shared space, centred on this language's mean."""
        assert self.to_shared is not None
        return normalize_rows(self.to_shared(np.asarray(raw, dtype=np.float64) - self._mean()))

    def _mean(self) -> np.ndarray:
        """The one language's mean (a cross-language cycle plans one language)."""
        return next(iter(self.space.means.values()), np.zeros(self.vectors.shape[1]))

    def export(self) -> None:
        """Own rows still unplaced go to the other language's topic they fit (``CrossParams``)."""
        if self.cross is None or self.abroad is None or not len(self.abroad.leaves):
            return
        rows = np.flatnonzero(self.unplaced[:self.own_rows])
        if not len(rows):
            return
        leaves = self.abroad.leaves
        best_leaf, best, second = _best_two(self._shared(self.vectors[rows]), self.abroad.centroids,
                                            self.abroad.starts)
        for row, leaf, score, other in zip(rows, best_leaf, best, second, strict=True):
            if score >= self.cross.place_similarity and score - other >= self.cross.place_margin:
                self.unplaced[row] = False
                self.plan.exported[self.ids[row]] = SetAside(NO_SIMILAR_TOPIC, leaves[int(leaf)], float(score), 1)

    def host_guests(self) -> None:
        """The other language's memories join this language's level-1 topics they fit."""
        guests = self.guests
        if self.cross is None or guests is None or not guests.ids:
            return
        leaves = sorted(tid for tid, t in self.topics.items() if t.level == 1)
        if not leaves:
            self.plan.guests_left.update((gid, SetAside(NO_SIMILAR_TOPIC, None, float("nan"), 1))
                                         for gid in guests.ids)
            return
        leaves, starts = _by_root(leaves, [self._root(tid) for tid in leaves])
        centroids = self._shared(_means([self.topics[tid] for tid in leaves], self.vectors.shape[1]))
        best_leaf, best, second = _best_two(guests.shared, centroids, starts)
        choices: dict[str, list[int]] = {}
        first_row = len(self.ids)
        self.ids.extend(guests.ids)
        self.vectors = np.vstack([self.vectors, np.asarray(guests.vectors, dtype=np.float32)])
        self.unplaced = np.r_[self.unplaced, np.zeros(len(guests.ids), dtype=bool)]
        for k, (gid, leaf, score, other) in enumerate(zip(guests.ids, best_leaf, best, second, strict=True)):
            tid = leaves[int(leaf)]
            if score < self.cross.place_similarity:
                self.plan.guests_left[gid] = SetAside(NO_SIMILAR_TOPIC, tid, float(score), 1)
            elif score - other < self.cross.place_margin:
                self.plan.guests_left[gid] = SetAside(AMBIGUOUS, tid, float(score), 1)
            else:
                choices.setdefault(tid, []).append(first_row + k)
                self.plan.guests_joined.add(gid)
        self.grow_leaves(choices)

    # -- new topics from what is left -----------------------------------------------------------
    def group(self) -> None:
        """Group the still-unplaced rows into new topics, joined to a like existing theme if any."""
        for lang in np.unique(self.langs[self.unplaced]):
            rows = np.flatnonzero(self.unplaced & (self.langs == lang))
            nested = [[rows[g] for g in theme]
                      for theme in themed_groups(self.projected[rows], self.params.group_similarity,
                                                 self.params.theme_similarity, self.params.block_rows,
                                                 self.params.seed)]
            for g in (g for theme in nested for g in theme):
                self.group_size[g] = len(g)
            units = [kept for theme in nested
                     if (kept := [g for g in theme if len(g) >= self.params.min_cluster_size])]
            if not units:
                continue
            mean = self.space.means.get(lang, np.zeros(self.vectors.shape[1]))
            centred = np.array([sum(self.vectors[g].sum(axis=0, dtype=np.float64) - len(g) * mean for g in unit)
                                for unit in units])
            joined = [[g for i in members for g in units[i]]
                      for members in merge_groups(centred, self.params.merge_similarity)]
            themes = [theme for theme in joined if sum(map(len, theme)) >= self.params.min_theme_size]
            if not themes:
                continue
            centroids = self.space.project(
                np.array([self.vectors[np.concatenate(theme)].mean(axis=0) for theme in themes]), [lang] * len(themes))
            leaves, best_leaf, best, second = self._nearest(centroids, str(lang))
            for number, theme in enumerate(themes):
                target = None
                if leaves and best[number] >= self.params.attach_similarity \
                        and best[number] - second[number] >= self.params.attach_margin:
                    target = self._root(leaves[int(best_leaf[number])])
                self._add_theme(theme, target, str(lang))

    def _add_theme(self, theme: list[np.ndarray], target: str | None, lang: str) -> None:
        all_rows = np.concatenate(theme)
        self.unplaced[all_rows] = False
        leaves = [leaf_rows for g in theme
                  for leaf_rows in (g[leaf] for leaf in leaves_of(self.projected[g], np.arange(len(g)),
                                                                  self.params.max_members,
                                                                  self.params.min_cluster_size,
                                                                  self.params.seed))]
        if target is not None and self.topics[target].level == 1:
            self._promote(target)
        elif target is None:
            if len(leaves) == 1:
                self._place_new_leaf(leaves[0], None, lang)
                return
            members = [self.ids[r] for r in all_rows]
            target = self.new_id(["root", *members])
            self.topics[target] = Topic(id=target, level=2, language=lang, children=[],
                                        vector_sum=np.zeros(self.vectors.shape[1]), member_count=0)
            self.plan.created.add(target)
        for leaf_rows in leaves:
            self._place_new_leaf(leaf_rows, target, lang)

    def _place_new_leaf(self, rows: np.ndarray, parent: str | None, lang: str) -> None:
        member_ids = [self.ids[r] for r in rows]
        raw = self.vectors[rows]
        self.unplaced[rows] = False
        self.plan.placed.update(dict.fromkeys(member_ids, ""))
        self._new_leaf(member_ids, raw, parent, lang)
        if parent is not None:
            self.topics[parent].vector_sum = self.topics[parent].vector_sum + raw.sum(axis=0, dtype=np.float64)
            self.topics[parent].member_count += len(rows)

    # -- near-duplicate themes -------------------------------------------------------------------
    def merge_roots(self) -> None:
        """Join top-level topics of one language whose centroids are ``merge_similarity`` alike
        (the asset check's definition: topic space fitted on the top-level topics alone).

        The smaller joins the larger as sub-topic(s); a level-2 topic left without children is
        retired, pointing at the topic that took them.
        """
        while True:
            roots = sorted((t for t in self.topics.values() if t.parent is None), key=lambda t: t.id)
            pairs = near_duplicate_roots(roots, self.params.merge_similarity)
            if not pairs:
                return
            _, first, second = pairs[0]
            keep, gone = sorted((first, second), key=lambda t: (-t.member_count, t.id))
            self._absorb(keep.id, gone.id)

    def _promote(self, key: str) -> None:
        """A leaf topic becomes a theme (level 2) over a new leaf holding its members, so that
        other groups can join it as sibling sub-topics."""
        topic = self.topics[key]
        members = list(topic.children)
        raw = self.member_vectors(members).astype(np.float32)
        topic.level = 2
        topic.children = []
        self.plan.promoted.add(key)
        self._new_leaf(members, raw, key)

    def _absorb(self, keep: str, gone: str) -> None:
        target, other = self.topics[keep], self.topics[gone]
        if target.level == 1:
            self._promote(keep)
        children = [gone] if other.level == 1 else list(other.children)
        for child in children:
            self.topics[child].parent = keep
            target.children.append(child)
        target.vector_sum = target.vector_sum + other.vector_sum
        target.member_count += other.member_count
        self.plan.grown.add(keep)
        if other.level == 2:
            other.children = []
            del self.topics[gone]
            if gone in self.plan.created:
                self.plan.created.discard(gone)
            else:
                self.plan.retired[gone] = keep
            self.plan.grown.discard(gone)
            self.plan.promoted.discard(gone)
        else:
            self.plan.reparented.add(gone)

    # -- bookkeeping ----------------------------------------------------------------------------
    def finish(self) -> CyclePlan:
        if self.cross is not None:
            offered = [row for row in range(self.own_rows)
                       if self.unplaced[row] or self.ids[row] in self.plan.exported]
            if offered:
                shared = self._shared(self.vectors[offered])
                self.plan.shared = {self.ids[row]: shared[k] for k, row in enumerate(offered)}
        for row in np.flatnonzero(self.unplaced):
            tid, score, reason = self.nearest.get(int(row), (None, float("nan"), NO_SIMILAR_TOPIC))
            self.plan.set_aside[self.ids[row]] = SetAside(reason, tid, score, int(self.group_size[row]))
        self.plan.grown -= self.plan.created
        for tid, (level, below) in self.before.items():
            if tid in self.plan.retired:
                continue
            after = self._memories_below(tid)
            changed = len(after ^ below) / max(len(below), 1)
            if self.topics[tid].level != level or changed >= self.params.refresh_fraction:
                self.plan.refresh.add(tid)
        self.plan.refresh |= self.plan.created
        return self.plan


@cache
def _thread_pools() -> ThreadpoolController:
    """The native thread pools a cycle's fits use (numpy's BLAS, scikit-learn's OpenMP, loaded
    here first), found once: looking for them took ~10 ms a cycle."""
    import sklearn.cluster  # noqa: F401

    return ThreadpoolController()


def plan_cycle(topics: Mapping[str, Topic], ids: Sequence[str], vectors: np.ndarray,
               langs: Sequence[str], params: PlacementParams,
               member_vectors: Callable[[Sequence[str]], np.ndarray],
               new_id: Callable[[Sequence[str]], str] = default_topic_id, cross: CrossParams | None = None,
               to_shared: Callable[[np.ndarray], np.ndarray] | None = None, abroad: Abroad | None = None,
               guests: Guests | None = None) -> CyclePlan:
    """One cycle: offer the pool (``ids``/``vectors``/``langs``) to ``topics``, group the rest,
    offer again. ``topics`` is not changed; the plan holds the new forest. With ``cross`` (and
    ``to_shared``, this space's vectors to the shared space), what fits no own topic goes to
    ``abroad``'s topics it fits, and ``guests`` join this cycle's topics at the end.

    Fits run on one thread: most are small, where waking a thread pool costs more than the fit.
    """
    cycle = _Cycle(topics, ids, vectors, langs, params, member_vectors, new_id, cross, to_shared, abroad, guests)
    with _thread_pools().limit(limits=1):
        if len(cycle.ids):
            cycle.offer()
            cycle.export()
            cycle.group()
            cycle.offer()
            cycle.export()
        cycle.host_guests()
        if len(cycle.ids):
            cycle.merge_roots()
    return cycle.finish()


@dataclass(frozen=True)
class LanguagePool:
    """One language's part of a cycle: its forest (empty on a rebuild), its pool, its space's
    thresholds, its members' vectors in its space (any memory id of the tenant) and, for cross-
    language placement, the map from its space to the shared one (None: it cannot take part)."""

    topics: Mapping[str, Topic]
    ids: list[str]
    vectors: np.ndarray
    params: PlacementParams
    member_vectors: Callable[[Sequence[str]], np.ndarray]
    to_shared: Callable[[np.ndarray], np.ndarray] | None = None


def abroad_of(topics: Mapping[str, Topic], to_shared: Callable[[np.ndarray], np.ndarray],
              means: Mapping[str, np.ndarray] | None = None) -> Abroad:
    """A forest's level-1 topics in the shared space, centred on its language's mean (``means``
    from its cycle; else fitted on its top-level topics, as the near-duplicate check does)."""
    leaves = sorted(tid for tid, t in topics.items() if t.level == 1)
    if not leaves:
        return Abroad([], np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32))

    def root(tid: str) -> str:
        while (parent := topics[tid].parent) is not None:
            tid = parent
        return tid

    dimension = len(topics[leaves[0]].vector_sum)
    tops = [t for t in topics.values() if t.parent is None]
    if means:
        mean = next(iter(means.values()))
    else:
        mean = _means(tops, dimension).astype(np.float64).mean(axis=0)
    leaves, starts = _by_root(leaves, [root(t) for t in leaves])
    centroids = normalize_rows(to_shared(_means([topics[t] for t in leaves], dimension) - mean))
    return Abroad(leaves, starts, centroids)


def plan_languages(pools: Mapping[str, LanguagePool], cross: CrossParams | None = None,
                   new_id: Callable[[Sequence[str]], str] = default_topic_id) -> dict[str, CyclePlan]:
    """One cycle per language. With ``cross`` and two languages that both map to the shared space,
    the larger language (pool plus topics) is planned first, offering what fits none of its own
    topics to the other's topics as they stood; the other is planned next, offering its misfits to
    the first one's new forest and hosting the first one's leftovers; the first is planned again
    (its own part comes out the same) to host the other's. Every plan's ``set_aside`` then lists
    exactly its own memories that no topic of either language took."""
    def alone(lang: str, **extra: object) -> CyclePlan:
        pool = pools[lang]
        return plan_cycle(pool.topics, pool.ids, pool.vectors, [lang] * len(pool.ids), pool.params,
                          pool.member_vectors, new_id, **extra)  # type: ignore[arg-type]

    shared = [lang for lang, pool in pools.items() if pool.to_shared is not None]
    if cross is None or len(pools) != 2 or len(shared) != 2:
        return {lang: alone(lang) for lang in sorted(pools)}
    first, second = sorted(pools, key=lambda lang: (-(len(pools[lang].ids) + len(pools[lang].topics)), lang))
    one, two = pools[first], pools[second]
    abroad_first = abroad_of(two.topics, two.to_shared)  # type: ignore[arg-type]
    plan_first = alone(first, cross=cross, to_shared=one.to_shared, abroad=abroad_first)
    plan_second = alone(second, cross=cross, to_shared=two.to_shared,
                        abroad=abroad_of(plan_first.topics, one.to_shared, plan_first.means),  # type: ignore[arg-type]
                        guests=_guests(plan_first, two))
    plan_first = alone(first, cross=cross, to_shared=one.to_shared, abroad=abroad_first,
                       guests=_guests(plan_second, one))
    for own, host in ((plan_first, plan_second), (plan_second, plan_first)):
        for mid in host.guests_left.keys() & own.exported.keys():
            own.set_aside[mid] = own.exported.pop(mid)
        for mid in host.guests_joined:
            own.set_aside.pop(mid, None)
    return {first: plan_first, second: plan_second}


def _guests(plan: CyclePlan, host: LanguagePool) -> Guests | None:
    """What ``plan`` exported or set aside, offered to ``host``'s topics."""
    ids = sorted(plan.shared)
    if not ids:
        return None
    return Guests(ids, host.member_vectors(ids), np.array([plan.shared[i] for i in ids]))


def _by_root(leaves: Sequence[str], roots: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Leaves ordered by their top-level topic, and where each top-level topic's run starts."""
    ordered = np.array(roots, dtype=object)
    order = np.argsort(ordered, kind="stable")
    ordered = ordered[order]
    return [leaves[i] for i in order], np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])


def _best_two(vectors: np.ndarray, centroids: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per vector: its nearest centroid, the cosine to it, and the best cosine to a centroid of any
    other top-level topic (``starts``: where each top-level topic's run of centroids begins)."""
    best_leaf, best, second = [], [], []
    for chunk in np.array_split(np.arange(len(vectors)), max(1, len(vectors) // 1024)):
        sims = vectors[chunk] @ centroids.T
        best_leaf.append(sims.argmax(axis=1))
        best.append(sims.max(axis=1))
        per_root = np.maximum.reduceat(sims, starts, axis=1)
        second.append(np.partition(per_root, -2, axis=1)[:, -2] if per_root.shape[1] > 1
                      else np.full(len(chunk), -1.0))
    return np.concatenate(best_leaf), np.concatenate(best), np.concatenate(second)


def _means(topics: Sequence[Topic], dimension: int) -> np.ndarray:
    return np.array([t.vector_sum / max(t.member_count, 1) for t in topics]).reshape(len(topics), dimension)


def near_duplicate_roots(roots: Sequence[Topic], merge_similarity: float) -> list[tuple[float, Topic, Topic]]:
    """Pairs of top-level topics of one language whose centroids are ``merge_similarity`` alike in
    the topic space fitted on those topics alone, most alike first."""
    if len(roots) < 2:
        return []
    langs = [t.language for t in roots]
    means = _means(roots, len(roots[0].vector_sum))
    centroids = TopicSpace.fit(langs, means, [], means[:0]).project(means, langs)
    pairs: list[tuple[float, Topic, Topic]] = []
    for start in range(0, len(roots), 2048):
        sims = centroids[start:start + 2048] @ centroids.T
        for i, j in zip(*np.nonzero(sims >= merge_similarity), strict=True):
            first, second = start + int(i), int(j)
            if first < second and langs[first] == langs[second]:
                pairs.append((float(sims[i, j]), roots[first], roots[second]))
    return sorted(pairs, key=lambda pair: (-pair[0], pair[1].id, pair[2].id))


def memories_below(topics: Mapping[str, Topic], tid: str) -> set[str]:
    topic = topics[tid]
    if topic.level == 1:
        return set(topic.children)
    return {m for child in topic.children if child in topics for m in topics[child].children}


def rebuild_lineage(old: Mapping[str, Topic], new: Mapping[str, Topic]) -> dict[str, str]:
    """For each old topic, the new topic of its level (or the nearest level) holding most of its
    memories; a topic whose memories all stayed unplaced points at the largest new top-level topic.
    Empty when the rebuild made no topic at all (then nothing is retired)."""
    if not new:
        return {}
    home: dict[int, dict[str, str]] = {1: {}, 2: {}}
    for tid, topic in new.items():
        if topic.level == 1:
            root = topic.parent or tid
            for member in topic.children:
                home[1][member] = tid
                home[2][member] = root
    largest = max((t for t in new.values() if t.parent is None), key=lambda t: (t.member_count, t.id)).id
    lineage = {}
    for tid, topic in sorted(old.items()):
        counts = Counter(home[topic.level][m] for m in memories_below(old, tid) if m in home[topic.level])
        lineage[tid] = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else largest
    return lineage
