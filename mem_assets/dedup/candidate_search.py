"""One tenant's candidate search against the graph: the unchecked nodes (embedded now when they
arrived without a vector), their nearest activated neighbours, each pair oriented older → newer
and carrying both texts. The numpy search itself is ``candidates``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
import pandas as pd
from neo4j import Session

from mem_assets.dedup import queries
from mem_assets.dedup.candidates import NodeVectors, find_candidates, index_candidates, orient_pairs
from mem_assets.dedup.superseding import recency_of
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import utc_now
from mem_resources.neo4j_resource import Neo4jResource

Search = Literal["numpy", "vector_index"]


@dataclass(frozen=True)
class CandidateSearch:
    """Pairs (``PAIR_COLUMNS`` + left_text, right_text, seen_at), with what the search touched."""

    pairs: pd.DataFrame
    unchecked: int
    embedded: int
    active: int
    without_candidates: int


def _unchecked_vectors(session: Session, tenant: str, embedder: EmbedderResource,
                       limit: int) -> tuple[NodeVectors, dict[str, str], int]:
    """The unchecked nodes with their vectors and texts; nodes that arrived without a vector (or
    with one of another dimension) are embedded now and the vector stored."""
    unchecked = session.execute_read(queries.unchecked_nodes, tenant, limit)
    missing = [n for n in unchecked if n["embedding"] is None or len(n["embedding"]) != embedder.dimension]
    if missing:
        for node, vector in zip(missing, embedder.embed([n["memory"] for n in missing]), strict=True):
            node["embedding"] = vector
        session.execute_write(queries.set_embeddings, tenant,
                              [{"id": n["id"], "embedding": n["embedding"].tolist()} for n in missing])
    new = NodeVectors(
        ids=[n["id"] for n in unchecked], memory_types=[n["memory_type"] for n in unchecked],
        hashes=[n["payload_hash"] for n in unchecked],
        vectors=np.stack([n["embedding"] for n in unchecked]) if unchecked
        else np.zeros((0, embedder.dimension), dtype=np.float32),
    )
    return new, {n["id"]: n["memory"] for n in unchecked}, len(missing)


def search_candidates(neo4j: Neo4jResource, tenant: str, embedder: EmbedderResource, threshold: float,
                      top_k: int, search: Search, limit: int, seen_at: datetime) -> CandidateSearch:
    """Nodes without any candidate are marked checked as of ``seen_at`` here; the others wait for
    their judgments and resolution."""
    with neo4j.session() as session:
        new, texts, embedded = _unchecked_vectors(session, tenant, embedder, limit)
        types = sorted(set(new.memory_types))
        dimension = embedder.dimension if search == "numpy" else None
        active = NodeVectors(*session.execute_read(queries.active_nodes, tenant, types, dimension))
        if search == "numpy":
            pairs = find_candidates(new, active, threshold, top_k)
        else:
            pairs = index_candidates(
                new, active.ids, active.hashes,
                lambda rows, k: session.execute_read(queries.vector_neighbours, tenant, rows, k),
                threshold, top_k, max_k=session.execute_read(queries.indexed_node_count))
        paired = set(pairs["left_id"]) | set(pairs["right_id"])
        sides = session.execute_read(queries.pair_sides, tenant, sorted(paired))
        alone = [node_id for node_id in new.ids if node_id not in paired]
        session.execute_write(queries.mark_checked, tenant, alone, seen_at, utc_now())
    pairs = pairs[pairs["left_id"].isin(set(sides)) & pairs["right_id"].isin(set(sides))].reset_index(drop=True)
    texts.update({i: side["text"] for i, side in sides.items() if i not in texts})
    pairs = orient_pairs(pairs, set(new.ids), {
        i: recency_of(side["created_at"], side["updated_at"], side["arrival"], seen_at)
        for i, side in sides.items()})
    pairs["left_text"] = pairs["left_id"].map(texts)
    pairs["right_text"] = pairs["right_id"].map(texts)
    pairs["seen_at"] = seen_at
    return CandidateSearch(pairs, len(new), embedded, len(active), len(alone))
