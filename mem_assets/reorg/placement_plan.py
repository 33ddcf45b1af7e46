"""From the graph to a placement plan: read a tenant's topics, offer it the candidates, tabulate.

One table row per topic the plan touches (created, grown, promoted to level 2, re-parented:
its children, and which of them are added or removed), per topic it retires (with its
successor) and per candidate it leaves unplaced (with the reason). ``summary_parents`` writes
exactly that table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from mem_assets.reorg import queries
from mem_assets.reorg.cascade import CLEAR, Anchors, CascadeParams, Routing, impute, route
from mem_assets.reorg.llm_placement import PlacementAdvisor, TopicOption
from mem_assets.reorg.placement import (
    CrossParams,
    CyclePlan,
    LanguagePool,
    PlacementParams,
    Topic,
    memories_below,
    near_duplicate_roots,
    plan_languages,
    rebuild_lineage,
)
from mem_assets.reorg.placement_thresholds import CASCADE_PARAMS, CROSS_PARAMS
from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_vectors import (
    E5_SPACE,
    KEPT_DIMENSION,
    MAIN_SPACE,
    NEEDS_KEPT,
    SHIPPED_PARAMS,
    TopicVectorsResource,
    centroid_in_space,
    completed,
    in_spaces,
    lacks,
    moved_to,
    parts_of,
    space_dimension,
    to_shared,
)
from mem_resources.embedder import EmbedderResource
from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.memory_model import memory_id
from mem_resources.neo4j_resource import Neo4jResource

PLAN_COLUMNS = ["kind", "memory_type", "id", "level", "language", "parent", "children", "added", "removed",
                "member_count", "members_before", "centroid", "space", "action", "refresh", "successor", "reason",
                "nearest", "similarity", "group_size", "margin"]
TOPIC, RETIRE, SET_ASIDE = "topic", "retire", "set_aside"
#: One row per memory the cascade routed (``cascade``): ``reason`` its stage (``clear``: placed
#: from the embedder's space, no model pass; ``representative``, ``no_topic_fits`` or
#: ``best_two_close``: given its kept vector), ``nearest`` / ``similarity`` / ``margin`` in the
#: embedder's space, ``action`` ``changed`` when the kept vector placed it elsewhere than its
#: cheap-space nearest topic.
ROUTE = "route"
CHANGED = "changed"
MERGED_INTO = "merged_into_topic"
REBUILT = "rebuilt"


def topic_id(tenant: str, memory_type: str, members: Sequence[str], salt: str = "",
             dialect: GraphDialect = SEED_DIALECT) -> str:
    """Deterministic from what the topic was made of (tenant, type, members, and a rebuild's salt)."""
    import hashlib
    payload = "\x1f".join(("topic", tenant, memory_type, salt, *sorted(members)))
    return memory_id(hashlib.md5(payload.encode("utf-8")).hexdigest(), dialect)


def store_vectors(neo4j: Neo4jResource, tenant: str, ids: Sequence[str], vectors: Sequence[np.ndarray],
                  texts: Sequence[str], chunk: int = 2000) -> int:
    """Store kept vectors on their memories' nodes, a write transaction per ``chunk``."""
    stored = 0
    with neo4j.session() as session:
        for start in range(0, len(ids), chunk):
            stored += session.execute_write(
                queries.store_reorg_vectors, tenant, ids[start:start + chunk],
                np.asarray(vectors[start:start + chunk]), texts[start:start + chunk])
    return stored


@dataclass
class KeptCounts:
    """Kept vectors made by a run, and kept vectors made earlier for one language that it
    completed (a tenant's first cycle of two languages)."""

    made: int = 0
    completed: int = 0


def make_kept(neo4j: Neo4jResource, tenant: str, ids: Sequence[str], texts: Sequence[str], space: str,
              counts: KeptCounts | None = None, partial: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """Kept vectors with the parts ``space`` reads (``parts_of``) for memories that lack one,
    stored on their nodes. ``partial``: a memory's stored kept vector, which gets only the parts
    it lacks: each model runs once per memory."""
    given = list(partial) if partial is not None else [None] * len(ids)
    kept = np.stack([np.zeros(KEPT_DIMENSION, dtype=np.float32) if vector is None else vector
                     for vector in given]) if ids else np.zeros((0, KEPT_DIMENSION), dtype=np.float32)
    kept = completed(kept, texts, parts_of(space))
    if ids:
        store_vectors(neo4j, tenant, ids, kept, texts)
    if counts is not None:
        counts.made += sum(1 for vector in given if vector is None)
        counts.completed += sum(1 for vector in given if vector is not None)
    return kept


class MemberStore:
    """Member texts and vectors of one topic space read from the graph on demand (splits,
    summaries), cached. A member without a usable vector stands at its topic's centroid when the
    cascade placed it there (``stand_in``), else is embedded from its text; a kept vector (e5 and
    encoder spaces) is stored on its node (``make_kept``), so it is made once."""

    def __init__(self, neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str,
                 space: str = MAIN_SPACE, vectors: TopicVectorsResource | None = None,
                 counts: KeptCounts | None = None) -> None:
        self.neo4j = neo4j
        self.embedder = embedder
        self.tenant = tenant
        self.space = space
        self.topic_vectors = vectors or TopicVectorsResource(e5_languages=[])
        self.dimension = space_dimension(space, embedder.dimension)
        self.texts: dict[str, str] = {}
        self.vectors: dict[str, np.ndarray] = {}
        #: Topic-space vectors of members with no kept vector: their level-1 topic's centroid.
        self.stand_in: dict[str, np.ndarray] = {}
        self.counts = counts if counts is not None else KeptCounts()

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray) -> None:
        self.texts.update(zip(ids, texts, strict=True))
        self.vectors.update(zip(ids, vectors, strict=True))

    def load(self, ids: Sequence[str], texts: Mapping[str, str] | None = None) -> None:
        """Vectors of ``ids`` in this space (``texts``: of memories the graph may not hold yet, a
        plan's merged memories)."""
        missing = [i for i in ids if i not in self.vectors]
        if not missing:
            return
        main, kept = self.space == MAIN_SPACE, self.space in NEEDS_KEPT
        with self.neo4j.session() as session:
            found = session.execute_read(queries.read_members, self.tenant, missing, self.embedder.dimension,
                                         main, kept)
        found.update((i, queries.Member(texts[i], None, None)) for i in missing if i not in found and texts)
        partial = {i: member.reorg_vector for i, member in found.items()
                   if kept and member.reorg_vector is not None and lacks(member.reorg_vector, self.space)}
        parts = {space: {i: member.embedding if space == MAIN_SPACE
                         else None if i in partial else member.reorg_vector
                         for i, member in found.items()}
                 for space, wanted in ((MAIN_SPACE, main), (E5_SPACE, kept)) if wanted}
        stood = {i for i, vector in parts.get(E5_SPACE, {}).items() if vector is None and i in self.stand_in}
        for space, vectors in parts.items():
            unembedded = [i for i, vector in vectors.items() if vector is None and i not in stood]
            texts = [found[i].memory for i in unembedded]
            made = (make_kept(self.neo4j, self.tenant, unembedded, texts, self.space, self.counts,
                              [partial.get(i) for i in unembedded]) if space == E5_SPACE
                    else self.embedder.embed(texts))
            vectors.update(zip(unembedded, made, strict=True))
        ids = [i for i in found if i not in stood]
        self.texts.update((i, found[i].memory) for i in found)
        self.vectors.update((i, self.stand_in[i]) for i in stood)
        self.vectors.update(zip(ids, in_spaces(
            [self.space] * len(ids), [parts.get(MAIN_SPACE, {}).get(i) for i in ids],
            [parts.get(E5_SPACE, {}).get(i) for i in ids]), strict=True))

    def load_texts(self, ids: Sequence[str]) -> None:
        """Texts only (summaries need no vectors)."""
        missing = [i for i in ids if i not in self.texts]
        if missing:
            with self.neo4j.session() as session:
                self.texts.update(session.execute_read(queries.read_texts, self.tenant, missing))

    def matrix(self, ids: Sequence[str], texts: Mapping[str, str] | None = None) -> np.ndarray:
        self.load(ids, texts)
        return np.array([self.vectors[i] for i in ids], dtype=np.float32).reshape(len(ids), self.dimension)


def topic_language(record: queries.StoredTopic) -> str:
    return record.language or language(record.memory)


def near_duplicate_topics(stored: Sequence[queries.StoredTopic], dimension: int,
                          default: PlacementParams) -> list[dict[str, Any]]:
    """Pairs of top-level topics of one memory type and language whose centroids are at least
    their space's merge threshold alike (``default``'s for a space without shipped thresholds)."""
    offenders: list[dict[str, Any]] = []
    for memory_type, lang, space in sorted({(t.memory_type, topic_language(t), t.centroid_space or MAIN_SPACE)
                                            for t in stored}):
        roots = []
        for t in stored:
            centroid = centroid_in_space(t.centroid, t.centroid_space, space, dimension)
            if (t.memory_type, topic_language(t)) == (memory_type, lang) \
                    and t.parent is None and centroid is not None:
                roots.append(Topic(id=t.id, level=t.level, language=lang, children=t.children,
                                   vector_sum=centroid * (t.member_count or 1), member_count=t.member_count or 1))
        threshold = SHIPPED_PARAMS.get(space, default).merge_similarity
        offenders.extend({"first": a.id, "second": b.id, "similarity": round(sim, 3)}
                         for sim, a, b in near_duplicate_roots(roots, threshold))
    return offenders


def load_forest(stored: Sequence[queries.StoredTopic], store: MemberStore) -> dict[str, Topic]:
    """Stored topics (of one memory type and language) as placement sees them, in the store's
    space. Topics whose centroid is missing or of another space get theirs from their members."""
    by_id = {t.id: t for t in stored}
    topics: dict[str, Topic] = {}
    for level in (1, 2):
        for record in (t for t in stored if t.level == level):
            children = [c for c in record.children if level == 1 or c in by_id]
            if level == 1:
                count = len(children)
                centroid = centroid_in_space(record.centroid, record.centroid_space, store.space,
                                             store.embedder.dimension)
                if centroid is not None:
                    store.stand_in.update(dict.fromkeys(children, centroid))
                vector_sum = (centroid * count if centroid is not None and record.member_count == count
                              else store.matrix(children).sum(axis=0, dtype=np.float64))
            else:
                count = sum(topics[c].member_count for c in children if c in topics)
                vector_sum = sum((topics[c].vector_sum for c in children if c in topics),
                                 np.zeros(store.dimension))
            topics[record.id] = Topic(
                id=record.id, level=level, language=topic_language(record),
                children=children, vector_sum=np.asarray(vector_sum, dtype=np.float64), member_count=count,
                parent=record.parent if record.parent in by_id else None)
    return {tid: t for tid, t in topics.items() if t.member_count > 0}


def tidied(stored: Sequence[queries.StoredTopic],
           successors: Mapping[str, str]) -> tuple[list[queries.StoredTopic], dict[str, str]]:
    """The topics as topic hygiene (``topic_writer.tidy_topics``) will leave them once the
    memories in ``successors`` are archived: each one's place in a level-1 topic taken by its
    successor, unless the successor already has a level-1 topic (then the place is dropped); and
    which successors got a topic so. Thin topics hygiene would then dissolve are not: a plan
    made before a dedup run counts them (``thinned``) instead."""
    if not successors:
        return list(stored), {}
    placed = {c for t in stored if t.level == 1 for c in t.children if c not in successors}
    given: dict[str, str] = {}
    out = []
    for topic in sorted(stored, key=lambda t: t.id):
        if topic.level != 1 or not successors.keys() & set(topic.children):
            out.append(topic)
            continue
        children = [c for c in topic.children if c not in successors]
        for child in sorted(set(topic.children) & successors.keys()):
            heir = successors[child]
            if heir not in placed:
                placed.add(heir)
                given[heir] = topic.id
                children.append(heir)
        out.append(replace(topic, children=sorted(children)))
    return out, given


def thinned(stored: Sequence[queries.StoredTopic]) -> list[str]:
    """Level-1 topics with fewer than two members: hygiene dissolves them."""
    return sorted(t.id for t in stored if t.level == 1 and len(t.children) < 2)


def successor_topics(neo4j: Neo4jResource, tenant: str, memory_types: Sequence[str],
                     successors: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Which successors of memories a planned dedup archives get their topic place (``tidied``),
    and the level-1 topics left thin by it."""
    if not successors:
        return {}, []
    with neo4j.session() as session:
        before = session.execute_read(queries.read_forest, tenant, list(memory_types))
    after, given = tidied(before, successors)
    return given, sorted(set(thinned(after)) - set(thinned(before)))


def plan_memory_type(neo4j: Neo4jResource, embedder: EmbedderResource, vectors: TopicVectorsResource,
                     tenant: str, memory_type: str, candidates: pd.DataFrame,
                     params: Mapping[str, PlacementParams], rebuild: bool, salt: str = "",
                     cross: CrossParams | None = CROSS_PARAMS,
                     successors: Mapping[str, str] | None = None,
                     advisor: PlacementAdvisor | None = None, cascade: CascadeParams = CASCADE_PARAMS,
                     counts: KeptCounts | None = None) -> list[dict[str, Any]]:
    """Plan one memory type, each language in its own space with its own thresholds (``params``
    by space): offer its candidates to its topics (or, on rebuild, start over). With ``cross`` and
    ``vectors.cross_language`` a memory that fits no topic of its language may join the other's
    (``placement.plan_languages``): then a language with topics but no candidates is planned too.
    A cycle of one language (or without offers) places in the one-language spaces, where no e5
    pass is needed (``topic_vectors.ONE_LANGUAGE_SPACES``).
    Candidates without their topic-space vector (``embedding`` None) get it (routed by ``cascade``
    first when it is on). ``successors``: memories a planned dedup will archive, and what replaces
    each (``tidied``). ``advisor``: an LLM then places the memories the offline plan is unsure of
    (``llm_placement``)."""
    with neo4j.session() as session:
        stored, _ = tidied(session.execute_read(queries.read_forest, tenant, [memory_type]), successors or {})
    langs = [language(text) for text in candidates["memory"]]
    across = cross is not None and vectors.cross_language
    planned = sorted(set(langs) | ({topic_language(t) for t in stored} if across and langs else set()))
    two_languages = across and len(planned) > 1
    sides: dict[str, _Side] = {}
    counts = counts if counts is not None else KeptCounts()
    for lang in planned:
        of_lang = candidates[[code == lang for code in langs]].reset_index(drop=True)
        sides[lang] = _Side(neo4j, embedder, vectors, tenant, lang, of_lang,
                            [t for t in stored if topic_language(t) == lang], rebuild, cascade, counts,
                            two_languages)
    plans = plan_languages(
        {lang: LanguagePool({} if rebuild else side.before, side.ids, side.matrix, params[side.store.space],
                            side.store.matrix, to_shared(side.store.space))
         for lang, side in sides.items()},
        cross if across else None, lambda members: topic_id(tenant, memory_type, members, salt, neo4j.dialect))
    if advisor is not None and not rebuild:
        for lang, side in sides.items():
            limits = params[side.store.space]
            advisor.revise(side.before, plans[lang], side.ids, side.matrix, side.texts, limits.max_members,
                           limits.refresh_fraction, lambda ids, side=side: side.describe(ids, advisor.examples),
                           limits.merge_similarity)
    return [row for lang, side in sides.items()
            for row in (_plan_rows(memory_type, side.store.space, side.before, plans[lang], rebuild)
                        + side.route_rows(memory_type, plans))]


class _Side:
    """One language's part of a memory type's cycle: its store (its space), candidates, forest.
    Candidates without a topic-space vector are routed (``cascade.route``): the clear ones stand
    at their topic's (or group's) vector, the others get their kept vector made and stored."""

    def __init__(self, neo4j: Neo4jResource, embedder: EmbedderResource, vectors: TopicVectorsResource,
                 tenant: str, lang: str, candidates: pd.DataFrame, stored: Sequence[queries.StoredTopic],
                 rebuild: bool = False, cascade: CascadeParams = CASCADE_PARAMS,
                 counts: KeptCounts | None = None, two_languages: bool = True) -> None:
        self.store = MemberStore(neo4j, embedder, tenant, vectors.space(lang, two_languages), vectors, counts)
        self.ids = candidates["id"].tolist()
        self.texts = candidates["memory"].tolist()
        # A stored and reloaded frame turns an all-None column into NaN: any scalar is "no vector yet".
        given = [None if np.ndim(vector) == 0 else vector for vector in candidates["embedding"]] if self.ids else []
        spaces = candidates["space"].tolist() if "space" in candidates else [self.store.space] * len(given)
        rows = [None if vector is None else moved_to(vector, space, self.store.space)
                for vector, space in zip(given, spaces, strict=True)]
        missing = [row for row, vector in enumerate(rows) if vector is None]
        self.routed: list[int] = missing if cascade.enabled else []
        self.routing: Routing | None = None
        # On a rebuild every member is a candidate: its vector (routed or kept) serves the old forest too.
        self.before = {} if rebuild else load_forest(stored, self.store)
        if self.routed:
            made = self._route(neo4j, embedder, tenant, lang, candidates, self.before, cascade)
        else:
            made = dict(zip(missing, self.store.matrix([self.ids[row] for row in missing],
                                                       {self.ids[row]: self.texts[row] for row in missing}),
                            strict=True))
        for row, vector in made.items():
            rows[row] = vector
        self.matrix = (np.vstack(rows).astype(np.float32) if self.ids
                       else np.zeros((0, self.store.dimension), dtype=np.float32))
        self.store.add(self.ids, candidates["memory"].tolist(), self.matrix)
        if rebuild:
            self.before = load_forest(stored, self.store)

    def _route(self, neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str, lang: str,
               candidates: pd.DataFrame, forest: Mapping[str, Topic], cascade: CascadeParams) -> dict[int, np.ndarray]:
        leaves = sorted(tid for tid, t in forest.items() if t.level == 1)
        cheap_store = MemberStore(neo4j, embedder, tenant)
        members = [m for tid in leaves for m in forest[tid].children]
        cheap_store.load(members)

        def root(tid: str) -> str:
            while (parent := forest[tid].parent) is not None:
                tid = parent
            return tid

        anchors = Anchors(leaves, np.array([cheap_store.matrix(forest[t].children).mean(axis=0) for t in leaves]
                                           ).reshape(len(leaves), embedder.dimension), [root(t) for t in leaves])
        cheap = np.vstack([candidates["cheap"].iloc[row] for row in self.routed]).astype(np.float32)
        self.routing = route(anchors, cheap, lang, cascade)
        paid = self.routing.paid
        ids = [self.ids[self.routed[k]] for k in paid]
        texts = [candidates["memory"].iloc[self.routed[k]] for k in paid]
        real = dict(zip(paid, in_spaces([self.store.space] * len(paid), [None] * len(paid),
                                        list(make_kept(neo4j, tenant, ids, texts, self.store.space,
                                                       self.store.counts))),
                        strict=True))
        means = {t: forest[t].vector_sum / max(forest[t].member_count, 1) for t in leaves}
        return {self.routed[k]: vector for k, vector in {**real, **impute(self.routing, means, real)}.items()}

    def describe(self, ids: Sequence[str], examples: int) -> dict[str, TopicOption]:
        """Stored topics as an LLM is shown them: key, summary and their first member texts."""
        shown = {tid: sorted(self.before[tid].children)[:examples] for tid in ids}
        self.store.load_texts([m for members in shown.values() for m in members])
        with self.store.neo4j.session() as session:
            stored = session.execute_read(queries.topic_summaries, self.store.tenant, list(ids))
        return {tid: TopicOption(id=tid, name=stored.get(tid, {}).get("key") or "",
                                 summary=stored.get(tid, {}).get("memory") or "",
                                 examples=[self.store.texts[m] for m in members if m in self.store.texts])
                for tid, members in shown.items()}

    def route_rows(self, memory_type: str, plans: Mapping[str, CyclePlan]) -> list[dict[str, Any]]:
        """The plan's ``ROUTE`` rows: each routed candidate's stage, cheap nearest topic and
        whether its kept vector placed it elsewhere."""
        if self.routing is None:
            return []
        final = {m: tid for plan in plans.values() for tid, t in plan.topics.items() if t.level == 1
                 for m in t.children}
        existing = set(self.before)
        rows = []
        for k, row in enumerate(self.routed):
            mid, stage, nearest = self.ids[row], self.routing.stage[k], self.routing.anchor[k]
            known = nearest if nearest in existing else None
            rows.append({"kind": ROUTE, "memory_type": memory_type, "id": mid, "reason": stage,
                         "nearest": known, "similarity": _rounded(self.routing.similarity[k]),
                         "margin": _rounded(self.routing.margin[k]),
                         "action": CHANGED if stage != CLEAR and known is not None and final.get(mid) != known
                         else None})
        return rows


def _rounded(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)

def _plan_rows(memory_type: str, space: str, before: Mapping[str, Topic], plan: CyclePlan,
               rebuild: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for tid in sorted(plan.touched | plan.reparented):
        topic = plan.topics[tid]
        action = ("created" if tid in plan.created else "promoted" if tid in plan.promoted
                  else "grown" if tid in plan.grown else "reparented")
        had = set() if rebuild or tid not in before else set(before[tid].children)
        rows.append({
            "kind": TOPIC, "memory_type": memory_type, "id": tid, "level": topic.level,
            "language": topic.language, "parent": topic.parent, "children": list(topic.children),
            "added": sorted(set(topic.children) - had), "removed": sorted(had - set(topic.children)),
            "member_count": topic.member_count,
            "members_before": 0 if rebuild or tid not in before else len(memories_below(before, tid)),
            "centroid": (topic.vector_sum / max(topic.member_count, 1)).astype(float).tolist(),
            "space": space, "action": action, "refresh": tid in plan.refresh})
    retired = rebuild_lineage(before, plan.topics) if rebuild else plan.retired
    reason = REBUILT if rebuild else MERGED_INTO
    rows.extend({"kind": RETIRE, "memory_type": memory_type, "id": old, "successor": new, "reason": reason,
                 "level": before[old].level if old in before else 2,
                 "members_before": len(memories_below(before, old)) if old in before else 0}
                for old, new in sorted(retired.items()))
    rows.extend({"kind": SET_ASIDE, "memory_type": memory_type, "id": mid, "reason": aside.reason,
                 "nearest": aside.nearest_topic,
                 "similarity": None if np.isnan(aside.similarity) else round(aside.similarity, 4),
                 "group_size": aside.group_size}
                for mid, aside in sorted(plan.set_aside.items()))
    return rows


def plan_table(neo4j: Neo4jResource, embedder: EmbedderResource, vectors: TopicVectorsResource, tenant: str,
               candidates: pd.DataFrame, params: Mapping[str, PlacementParams],
               rebuild: bool, salt: str = "", cross: CrossParams | None = CROSS_PARAMS,
               successors: Mapping[str, str] | None = None,
               advisor: PlacementAdvisor | None = None, cascade: CascadeParams = CASCADE_PARAMS,
               counts: KeptCounts | None = None) -> pd.DataFrame:
    """The placement plan of ``candidates`` (``memory_clusters``; ``memtend plan`` with the
    ``successors`` of a dedup not run yet), revised by ``advisor``'s LLM where it is unsure;
    ``counts`` receives the kept vectors made."""
    rows = [row for memory_type, of_type in candidates.groupby("memory_type", sort=True)
            for row in plan_memory_type(neo4j, embedder, vectors, tenant, str(memory_type),
                                        of_type.reset_index(drop=True), params, rebuild, salt, cross,
                                        successors, advisor, cascade, counts)]
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)
