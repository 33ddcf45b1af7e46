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
                       limit: int, write: bool, replace: bool = True) -> tuple[NodeVectors, dict[str, str], list[dict]]:
    """The unchecked nodes with their vectors and texts; nodes that arrived without a vector (or
    with one of another dimension) are embedded now and the vector stored (``write``; only where
    the node has none unless ``replace``), else kept in memory only. Also the nodes embedded now."""
    unchecked = session.execute_read(queries.unchecked_nodes, tenant, limit)
    missing = [n for n in unchecked if n["embedding"] is None or len(n["embedding"]) != embedder.dimension]
    if missing:
        for node, vector in zip(missing, embedder.embed([n["memory"] for n in missing]), strict=True):
            node["embedding"] = vector
        if write:
            session.execute_write(queries.set_embeddings, tenant,
                                  [{"id": n["id"], "embedding": n["embedding"].tolist()} for n in missing],
                                  replace)
    new = NodeVectors(
        ids=[n["id"] for n in unchecked], memory_types=[n["memory_type"] for n in unchecked],
        hashes=[n["payload_hash"] for n in unchecked],
        vectors=np.stack([n["embedding"] for n in unchecked]) if unchecked
        else np.zeros((0, embedder.dimension), dtype=np.float32),
    )
    return new, {n["id"]: n["memory"] for n in unchecked}, missing


def _with_unstored(active: NodeVectors, unstored: list[dict]) -> NodeVectors:
    """The activated nodes as a run that stored the vectors it made would read them."""
    known = set(active.ids)
    extra = [n for n in unstored if n["id"] not in known]
    if not extra:
        return active
    return NodeVectors(active.ids + [n["id"] for n in extra], active.memory_types + [n["memory_type"] for n in extra],
                       active.hashes + [n["payload_hash"] for n in extra],
                       np.vstack([active.vectors.reshape(-1, extra[0]["embedding"].shape[0]),
                                  *[n["embedding"][None, :] for n in extra]]).astype(np.float32))


def search_candidates(neo4j: Neo4jResource, tenant: str, embedder: EmbedderResource, threshold: float,
                      top_k: int, search: Search, limit: int, seen_at: datetime,
                      write: bool = True) -> CandidateSearch:
    """Nodes without any candidate are marked checked as of ``seen_at`` here; the others wait for
    their judgments and resolution. ``write=False`` (``memtend plan``): the same search, writing
    nothing: vectors made now stay in memory (the numpy search sees them as the run would; the
    vector index cannot), nothing is marked checked."""
    with neo4j.session() as session:
        dialect = neo4j.dialect
        new, texts, missing = _unchecked_vectors(session, tenant, embedder, limit, write,
                                                 replace=not (dialect.memos and dialect.shared_embedding))
        types = sorted(set(new.memory_types))
        dimension = embedder.dimension if search == "numpy" else None
        active = NodeVectors(*session.execute_read(queries.active_nodes, tenant, types, dimension))
        if not write and search == "numpy":
            active = _with_unstored(active, missing)
        if search == "numpy":
            pairs = find_candidates(new, active, threshold, top_k)
        else:
            pairs = index_candidates(
                new, active.ids, active.hashes,
                lambda rows, k: session.execute_read(queries.vector_neighbours, tenant, rows, k,
                                                     dialect.vector_index),
                threshold, top_k, max_k=session.execute_read(queries.indexed_node_count))
        paired = set(pairs["left_id"]) | set(pairs["right_id"])
        sides = session.execute_read(queries.pair_sides, tenant, sorted(paired))
        alone = [node_id for node_id in new.ids if node_id not in paired]
        if write:
            session.execute_write(queries.mark_checked, tenant, alone, seen_at, utc_now())
    pairs = pairs[pairs["left_id"].isin(set(sides)) & pairs["right_id"].isin(set(sides))].reset_index(drop=True)
    texts.update({i: side["text"] for i, side in sides.items() if i not in texts})
    pairs = orient_pairs(pairs, set(new.ids), {
        i: recency_of(side["created_at"], side["updated_at"], side["arrival"], seen_at)
        for i, side in sides.items()})
    pairs["left_text"] = pairs["left_id"].map(texts)
    pairs["right_text"] = pairs["right_id"].map(texts)
    pairs["seen_at"] = seen_at
    return CandidateSearch(pairs, len(new), len(missing), len(active), len(alone))
