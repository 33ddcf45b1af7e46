"""The review queue: pairs a run left apart because it was unsure, answered by a person.

Two kinds are queued per tenant with both texts, the candidate score and the reason: a
contradiction the run could not settle (same moment, or judgments that contradict each other),
and a pair the offline judge left independent although its P(redundant) or P(contradictory) lay
within the review band below the threshold (``MEMTEND_REVIEW_BAND``; ``suggested`` is the label
it nearly got). Accepting one applies it through the same code that applies a run's resolutions:
a suggested redundant pair is merged (the more informative text kept), a contradiction
superseded, newer wins (``--keep`` names the survivor when nothing orders the two); rejecting
dismisses it. Every answer,
and every undo, is kept as a labelled pair (``DedupReview``, keyed by the two texts, whatever
judge runs): later runs take its label over the judge's, and ``export`` writes the pairs as
``memtend eval-judge`` reads them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from mem_assets.dedup import queries
from mem_assets.dedup.apply_resolutions import apply_plan, item_from_properties
from mem_assets.dedup.merging import MergePlan, informativeness, merged_id
from mem_assets.dedup.resolution_plan import Plan, Unresolved
from mem_assets.dedup.superseding import SupersedePlan, compare, recency
from mem_assets.dedup.undo import UndoError, review_key, review_row
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import MemoryItem, MemoryStatus, UpdateType, utc_now
from mem_resources.neo4j_resource import Neo4jResource

REVIEWED = "reviewed by the user"


class ReviewError(UndoError):
    """The review cannot be answered so; nothing was changed."""


def queued(unresolved: Sequence[Unresolved], texts: dict[str, str], scores: dict[frozenset[str], float],
           run_id: str | None) -> list[dict[str, Any]]:
    """Pending review rows for the pairs a run left apart."""
    rows = []
    for item in unresolved:
        first, second = item.ids
        rows.append({"id": review_key(texts[first], texts[second]), "status": "pending", "origin": "run",
                     "first_id": first, "second_id": second, "first_text": texts[first],
                     "second_text": texts[second], "reason": item.reason, "run_id": run_id,
                     "score": scores.get(frozenset(item.ids))})
    return rows


def unsure_pairs(judgments: pd.DataFrame, run_id: str | None) -> list[dict[str, Any]]:
    """Pending review rows for the pairs judged independent within the review band (columns of
    ``relation_judgments``: ids, texts, score, label, near, near_probability): those no LLM
    settled — none configured, its answer not supported by the offline evidence, or not given
    (failure, budget; such a pair is also judged again by the next run). Pairs the user already
    answered carry the answer's reason and are not queued again."""
    if judgments.empty or "near" not in judgments:
        return []
    rows = judgments[judgments["near"].notna() & (judgments["label"] == "independent")
                     & (judgments["reason"] != REVIEWED)]
    return [{"id": review_key(row.left_text, row.right_text), "status": "pending", "origin": "unsure",
             "first_id": row.left_id, "second_id": row.right_id, "first_text": row.left_text,
             "second_text": row.right_text, "suggested": row.near, "run_id": run_id,
             "score": None if pd.isna(row.score) else float(row.score),
             "reason": f"judge unsure: P({row.near}) = {row.near_probability:.2f}, within the review band "
                       "below its threshold, so left apart"}
            for row in rows.itertuples()]


def apply_answers(judgments: pd.DataFrame, pairs: pd.DataFrame, answered: dict[str, str]) -> pd.DataFrame:
    """The judgments with the user's answers in place of the judge's labels."""
    if judgments.empty or not answered:
        return judgments
    texts = pairs.set_index(["left_id", "right_id"])[["left_text", "right_text"]].to_dict("index")
    out = judgments.copy()
    for position, (left, right) in enumerate(zip(out["left_id"], out["right_id"], strict=True)):
        side = texts.get((left, right))
        label = answered.get(review_key(side["left_text"], side["right_text"])) if side else None
        if label is not None:
            out.iloc[position, out.columns.get_loc("label")] = label
            out.iloc[position, out.columns.get_loc("reason")] = REVIEWED
    return out


def candidate_keys(pairs: pd.DataFrame) -> list[str]:
    if pairs.empty:
        return []
    return sorted({review_key(a, b) for a, b in zip(pairs["left_text"], pairs["right_text"], strict=True)})


def answer(neo4j: Neo4jResource, tenant: str, review_id: str, accept: bool,
           keep: str | None = None, embedder: EmbedderResource | None = None) -> dict[str, Any]:
    """Accept (merge a suggested redundant pair, else supersede) or reject a pending review,
    holding the tenant's lease. A merge needs ``embedder`` for the merged memory's vector."""
    now = utc_now()
    with neo4j.lease(tenant, info="a review answer"), neo4j.session() as session:
        item = session.execute_read(queries.review, tenant, review_id)
        if item is None:
            raise ReviewError(f"no review {review_id!r} in tenant {tenant!r}")
        if item["status"] != "pending":
            raise ReviewError(f"review {review_id} was already answered ({item['label']}, {item['answered_at']})")
        resolution_id = None
        if accept:
            ids = [item["first_id"], item["second_id"]]
            found = session.execute_read(queries.read_nodes, tenant, ids)
            nodes = {i: item_from_properties(tenant, props, now) for i, props in found.items()}
            if len(nodes) < 2 or any(n.metadata.status != MemoryStatus.ACTIVATED for n in nodes.values()):
                raise ReviewError(f"review {review_id}: a memory of the pair is gone or no longer activated")
            resolution_id = (_merge(neo4j, tenant, review_id, nodes, embedder, now)
                             if item.get("suggested") == "redundant"
                             else _supersede(neo4j, tenant, review_id, nodes, ids, keep, now))
        label = (item.get("suggested") or "contradictory") if accept else "independent"
        session.execute_write(queries.store_reviews, tenant, [
            review_row(item["first_text"], item["second_text"], label, item["origin"] or "run",
                       "accepted" if accept else "rejected", now, resolution_id=resolution_id)])
    return {**item, "label": label, "resolution_id": resolution_id}


def _applied(review_id: str, rows: list[dict[str, Any]]) -> str:
    [row] = rows
    if row["status"] != "applied":
        raise ReviewError(f"review {review_id}: {row['status']}")
    return row["resolution_id"]


def _supersede(neo4j: Neo4jResource, tenant: str, review_id: str, nodes: dict[str, MemoryItem],
               ids: list[str], keep: str | None, now: datetime) -> str:
    """Newer wins; ``keep`` names the survivor when nothing orders the two."""
    if keep is not None:
        if keep not in ids:
            raise ReviewError(f"--keep must be {ids[0]} or {ids[1]}")
        newer, older = keep, next(i for i in ids if i != keep)
    else:
        order = compare(recency(nodes[ids[0]]), recency(nodes[ids[1]]))
        if order is None:
            raise ReviewError(f"review {review_id}: nothing says which is newer; pass --keep "
                              f"{ids[0]} or --keep {ids[1]}")
        older, newer = ids if order < 0 else ids[::-1]
    return _applied(review_id, apply_plan(neo4j, tenant, Plan(supersedes=[SupersedePlan(older, newer, REVIEWED)]),
                                          [], {i: n.memory for i, n in nodes.items()}, now, run_id=review_id))


def _merge(neo4j: Neo4jResource, tenant: str, review_id: str, nodes: dict[str, MemoryItem],
           embedder: EmbedderResource | None, now: datetime) -> str:
    """The pair merged as a run merges a redundant group the offline judge fuses: the more
    informative text kept."""
    if embedder is None:
        raise ReviewError(f"review {review_id}: merging needs the embedder")
    sources = tuple(sorted(nodes))
    text = max((nodes[i].memory for i in sources), key=informativeness)
    merge = MergePlan(merged_id(tenant, sources), sources, text, UpdateType.DUPLICATE, REVIEWED)
    [vector] = embedder.embed([text])
    return _applied(review_id, apply_plan(neo4j, tenant, Plan(merges=[merge]), [vector.tolist()],
                                          {i: n.memory for i, n in nodes.items()}, now, run_id=review_id))


def labeled_pairs(neo4j: Neo4jResource, tenant: str) -> list[dict[str, Any]]:
    """The tenant's answered pairs (reviews and undos) as ``memtend eval-judge`` scores them:
    the user's own evaluation set. ``a`` is the older memory when both are still in the graph
    and something orders them (a contradiction is judged as "b replaces a")."""
    now = utc_now()
    with neo4j.session() as session:
        answered = session.execute_read(queries.reviews, tenant, "answered")
        ids = sorted({i for item in answered for i in (item["first_id"], item["second_id"]) if i})
        found = session.execute_read(queries.read_nodes, tenant, ids) if ids else {}
    stated = {i: recency(item_from_properties(tenant, props, now)) for i, props in found.items()}
    rows = []
    for item in answered:
        a, b = item["first_text"], item["second_text"]
        first, second = stated.get(item["first_id"]), stated.get(item["second_id"])
        if first is not None and second is not None and compare(first, second) == 1:
            a, b = b, a
        rows.append({"a": a, "b": b, "label": item["label"], "source": f"review {item['id']} ({item['note']})"})
    return rows


def export(neo4j: Neo4jResource, tenant: str, path: Path) -> int:
    """Answered pairs as ``memtend eval-judge`` reads them (one JSON object a line)."""
    rows = labeled_pairs(neo4j, tenant)
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)
