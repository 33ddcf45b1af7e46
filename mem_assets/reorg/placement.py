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

import numpy as np
from threadpoolctl import threadpool_limits

from mem_assets.reorg.clustering import leaves_of, merge_groups, themed_groups
from mem_assets.reorg.topic_space import TopicSpace

ANY_LANGUAGE = "all"
NO_SIMILAR_TOPIC = "no_similar_topic"
AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class PlacementParams:
    """Thresholds are cosines in the topic space (see ``topic_space``). The defaults are for the
    offline WordLlama embedder's space, chosen on the tuning half of the labeled set for purity
    (docs/reorg.md); ``E5_PARAMS`` for the multilingual-e5 space, the purest setting that places
    >= 95 % of its language on the tuning half. ``theme_similarity`` below ``group_similarity``
    gathers groups into themes (off at 1: docs/reorg.md, "themed groups")."""

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


#: Thresholds in the multilingual-e5-small ``query:`` space (``reorg.vectors``; Chinese by default).
E5_PARAMS = PlacementParams(place_similarity=0.25, place_margin=0.03, group_similarity=0.15,
                            merge_similarity=0.35, attach_similarity=0.10, attach_margin=0.05)
#: Thresholds in the combined (embedder + e5) space, with themed groups: the rule of
#: bench/combined_space_rule.md on the tuning parts (docs/reorg.md, "Combined English space").
COMBINED_PARAMS = PlacementParams(place_similarity=0.25, group_similarity=0.20, min_cluster_size=2,
                                  theme_similarity=0.08, min_theme_size=4)


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
                 new_id: Callable[[Sequence[str]], str]) -> None:
        self.params = params
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
        roots = np.array([self._root(tid) for tid in leaves], dtype=object)
        order = np.argsort(roots, kind="stable")
        leaves = [leaves[i] for i in order]
        roots = roots[order]
        starts = np.flatnonzero(np.r_[True, roots[1:] != roots[:-1]])
        centroids = self._centroids(leaves)
        best_leaf, best, second = [], [], []
        for chunk in np.array_split(np.arange(len(vectors)), max(1, len(vectors) // 1024)):
            sims = vectors[chunk] @ centroids.T
            best_leaf.append(sims.argmax(axis=1))
            best.append(sims.max(axis=1))
            per_root = np.maximum.reduceat(sims, starts, axis=1)
            second.append(np.partition(per_root, -2, axis=1)[:, -2] if per_root.shape[1] > 1
                          else np.full(len(chunk), -1.0))
        return leaves, np.concatenate(best_leaf), np.concatenate(best), np.concatenate(second)

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


def plan_cycle(topics: Mapping[str, Topic], ids: Sequence[str], vectors: np.ndarray,
               langs: Sequence[str], params: PlacementParams,
               member_vectors: Callable[[Sequence[str]], np.ndarray],
               new_id: Callable[[Sequence[str]], str] = default_topic_id) -> CyclePlan:
    """One cycle: offer the pool (``ids``/``vectors``/``langs``) to ``topics``, group the rest,
    offer again. ``topics`` is not changed; the plan holds the new forest.

    Fits run on one thread: most are small, where waking a thread pool costs more than the fit.
    """
    cycle = _Cycle(topics, ids, vectors, langs, params, member_vectors, new_id)
    if len(cycle.ids):
        with threadpool_limits(limits=1):
            cycle.offer()
            cycle.group()
            cycle.offer()
            cycle.merge_roots()
    return cycle.finish()


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
