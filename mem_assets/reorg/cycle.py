"""From the graph to a placement plan: read a tenant's topics, offer it the candidates, tabulate.

One table row per topic the plan touches (created, grown, promoted to level 2, re-parented:
its children, and which of them are added or removed), per topic it retires (with its
successor) and per candidate it leaves unplaced (with the reason). ``summary_parents`` writes
exactly that table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mem_assets.reorg import queries
from mem_assets.reorg.placement import (
    PlacementParams,
    Topic,
    memories_below,
    plan_cycle,
    rebuild_lineage,
)
from mem_assets.reorg.topic_space import language
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import memory_id
from mem_resources.neo4j_resource import Neo4jResource

PLAN_COLUMNS = ["kind", "memory_type", "id", "level", "language", "parent", "children", "added", "removed",
                "member_count", "members_before", "centroid", "action", "refresh", "successor", "reason",
                "nearest", "similarity", "group_size"]
TOPIC, RETIRE, SET_ASIDE = "topic", "retire", "set_aside"
MERGED_INTO = "merged_into_topic"
REBUILT = "rebuilt"


def topic_id(tenant: str, memory_type: str, members: Sequence[str], salt: str = "") -> str:
    """Deterministic from what the topic was made of (tenant, type, members, and a rebuild's salt)."""
    import hashlib
    payload = "\x1f".join(("topic", tenant, memory_type, salt, *sorted(members)))
    return memory_id(hashlib.md5(payload.encode("utf-8")).hexdigest())


class MemberStore:
    """Member texts and vectors read from the graph on demand (splits, summaries), cached; a
    member without a usable embedding is embedded from its text."""

    def __init__(self, neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str) -> None:
        self.neo4j = neo4j
        self.embedder = embedder
        self.tenant = tenant
        self.texts: dict[str, str] = {}
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray) -> None:
        self.texts.update(zip(ids, texts, strict=True))
        self.vectors.update(zip(ids, vectors, strict=True))

    def load(self, ids: Sequence[str]) -> None:
        missing = [i for i in ids if i not in self.vectors]
        if not missing:
            return
        with self.neo4j.session() as session:
            found = session.execute_read(queries.read_members, self.tenant, missing, self.embedder.dimension)
        unembedded = [i for i, (_, vector) in found.items() if vector is None]
        fresh = dict(zip(unembedded, self.embedder.embed([found[i][0] for i in unembedded]), strict=True))
        for i, (text, vector) in found.items():
            self.texts[i] = text
            self.vectors[i] = vector if vector is not None else fresh[i]

    def load_texts(self, ids: Sequence[str]) -> None:
        """Texts only (summaries need no vectors)."""
        missing = [i for i in ids if i not in self.texts]
        if missing:
            with self.neo4j.session() as session:
                self.texts.update(session.execute_read(queries.read_texts, self.tenant, missing))

    def matrix(self, ids: Sequence[str]) -> np.ndarray:
        self.load(ids)
        return np.array([self.vectors[i] for i in ids], dtype=np.float32).reshape(len(ids), self.embedder.dimension)


def load_forest(neo4j: Neo4jResource, store: MemberStore, tenant: str, memory_type: str) -> dict[str, Topic]:
    """The activated topics of one memory type as placement sees them. Topics written before
    centroids were stored get theirs from their members' embeddings."""
    with neo4j.session() as session:
        stored = session.execute_read(queries.read_forest, tenant, [memory_type], store.embedder.dimension)
    by_id = {t.id: t for t in stored}
    topics: dict[str, Topic] = {}
    for level in (1, 2):
        for record in (t for t in stored if t.level == level):
            children = [c for c in record.children if level == 1 or c in by_id]
            if level == 1:
                count = len(children)
                vector_sum = (record.centroid * count if record.centroid is not None and record.member_count == count
                              else store.matrix(children).sum(axis=0, dtype=np.float64))
            else:
                count = sum(topics[c].member_count for c in children if c in topics)
                vector_sum = sum((topics[c].vector_sum for c in children if c in topics),
                                 np.zeros(store.embedder.dimension))
            topics[record.id] = Topic(
                id=record.id, level=level, language=record.language or language(record.memory),
                children=children, vector_sum=np.asarray(vector_sum, dtype=np.float64), member_count=count,
                parent=record.parent if record.parent in by_id else None)
    return {tid: t for tid, t in topics.items() if t.member_count > 0}


def plan_memory_type(neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str, memory_type: str,
                     candidates: pd.DataFrame, params: PlacementParams, rebuild: bool,
                     salt: str = "") -> list[dict[str, Any]]:
    """Plan one memory type: offer its candidates to its topics (or, on rebuild, start over)."""
    store = MemberStore(neo4j, embedder, tenant)
    ids = candidates["id"].tolist()
    vectors = np.vstack(candidates["embedding"].to_numpy()).astype(np.float32) if ids else np.zeros((0, embedder.dimension))
    texts = candidates["memory"].tolist()
    store.add(ids, texts, vectors)
    before = load_forest(neo4j, store, tenant, memory_type)
    plan = plan_cycle({} if rebuild else before, ids, vectors, [language(t) for t in texts], params,
                      store.matrix, lambda members: topic_id(tenant, memory_type, members, salt))
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
            "action": action, "refresh": tid in plan.refresh})
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


def plan_table(neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str, candidates: pd.DataFrame,
               params: PlacementParams, rebuild: bool, salt: str = "") -> pd.DataFrame:
    rows = [row for memory_type, of_type in candidates.groupby("memory_type", sort=True)
            for row in plan_memory_type(neo4j, embedder, tenant, str(memory_type),
                                        of_type.reset_index(drop=True), params, rebuild, salt)]
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)
