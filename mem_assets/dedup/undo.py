"""Undo a run's resolutions, or one: what a merge or supersede changed, given back.

Every applied resolution is recorded (a ``DedupResolution`` node, written in the transaction
that applies it) with the run id, the retired nodes' properties before, the edges it took off
them (moved to the survivor or dropped) and the working twins it archived. Undoing it puts the
retired nodes back as they were (activated, their check stamp too), gives the edges and twins
back, archives a fused node (``archived_reason`` "undone", pointing at the record) or gives a
supersede's survivor its history back, and marks the record undone. The pair is remembered as
reviewed "independent" (``review_queue``), so the next run judges it but does not redo it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import Any

from neo4j import ManagedTransaction

from mem_assets.dedup import queries
from mem_assets.dedup.merging import MergePlan
from mem_assets.dedup.superseding import SupersedePlan
from mem_resources.memory_model import normalize_text, utc_now
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.tenant_lock import incomplete_operation

#: The properties of a retired node a resolution changes (the check stamp is set by the same run).
RESTORED = ("status", "archived_reason", "archived_at", "evolve_to", "dedup_checked_at")
#: The survivor's properties a supersede (and the run's check stamp) changes.
SURVIVOR = ("history", "version", "dedup_checked_at")
UNDO_LABEL = "independent"


class UndoError(ValueError):
    """The resolution or run cannot be undone; nothing was changed."""


def resolution_record(resolution: MergePlan | SupersedePlan, found: dict[str, dict[str, Any]],
                      edges: list[dict[str, Any]], twins: list[dict[str, Any]], run_id: str | None,
                      now: datetime) -> dict[str, Any]:
    """The record of one applied resolution (``found``: the nodes' properties before it)."""
    if isinstance(resolution, MergePlan):
        kind, retired, result = "merge", list(resolution.sources), resolution.merged_id
        text, update_type = resolution.text, resolution.update_type.value
        before = {node: {k: found[node].get(k) for k in RESTORED} for node in retired}
    else:
        kind, retired, result = "supersede", [resolution.older], resolution.newer
        text, update_type = _text(found[resolution.newer]), "conflict"
        before = {resolution.older: {k: found[resolution.older].get(k) for k in RESTORED},
                  resolution.newer: {k: found[resolution.newer].get(k) for k in SURVIVOR}}
    kept = next((s for s in retired if _text(found[s]) == text), retired[0])
    digest = hashlib.sha256("\x1f".join((run_id or "", now.isoformat(), kind, result, *retired)).encode())
    return {
        "id": "resolution:" + digest.hexdigest()[:24], "kind": kind, "update_type": update_type,
        "run_id": run_id, "sources": retired, "source_texts": [_text(found[s]) for s in retired],
        "result": result, "text": text, "reason": resolution.reason, "kept": kept,
        "before": json.dumps(before, ensure_ascii=False, default=str),
        "edges": json.dumps(edges, ensure_ascii=False, default=str),
        "twins": json.dumps(twins, ensure_ascii=False, default=str),
    }


def _text(props: dict[str, Any]) -> str:
    return props.get("memory") or props.get("data") or ""


def restored_history(current: str | None, before: str | None, retired: dict[str, Any],
                     last: bool) -> str | None:
    """The survivor's history after undoing a supersede: as it was before when no later
    resolution changed it since (``last``), else without the entries the retired node brought."""
    if last:
        return before
    brought = {(entry.get("archived_memory_id"), entry.get("version"), entry.get("memory"))
               for entry in json.loads(retired.get("history") or "[]")}
    brought.add((retired["id"], retired.get("version"), _text(retired)))
    kept_before = {(e.get("archived_memory_id"), e.get("version"), e.get("memory"))
                   for e in json.loads(before or "[]")}
    entries = [e for e in json.loads(current or "[]")
               if (key := (e.get("archived_memory_id"), e.get("version"), e.get("memory"))) not in brought
               or key in kept_before]
    return json.dumps(entries, ensure_ascii=False)


def undone_pairs(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The text pairs an undo marks reviewed independent: the sources of a merge between
    themselves, a supersede's two sides."""
    if record["kind"] == "merge":
        return [tuple(pair) for pair in combinations(record["source_texts"], 2)]
    return [(record["source_texts"][0], record["survivor_text"])]


@dataclass(frozen=True)
class UndoReport:
    undone: list[dict[str, Any]]
    already_undone: int = 0


def _undo_one(tx: ManagedTransaction, tenant: str, resolution_id: str, undo_id: str,
              now: datetime) -> dict[str, Any]:
    record = queries.resolution(tx, tenant, resolution_id)
    if record is None:
        raise UndoError(f"no resolution {resolution_id!r} in tenant {tenant!r}")
    if record["undone_at"] is not None:
        raise UndoError(f"resolution {resolution_id} was already undone ({record['undone_at']}, "
                        f"by {record['undone_by']})")
    later = queries.later_resolutions(tx, tenant, record["id"], record["result"])
    if record["kind"] == "merge" and later["retired_result"]:
        raise UndoError(f"resolution {resolution_id}: its merged memory was resolved again later, by "
                        f"{', '.join(later['retired_result'])}; undo that first")
    if later["retired_result"] and record["kind"] == "supersede":
        raise UndoError(f"resolution {resolution_id}: the memory that superseded it was resolved again "
                        f"later, by {', '.join(later['retired_result'])}; undo that first")
    before = json.loads(record["before"])
    survivor_before = before.pop(record["result"], {}) if record["kind"] == "supersede" else {}
    current = queries.lock_and_read(tx, tenant, [*record["sources"], record["result"]])
    stale = [s for s in record["sources"] if current.get(s, {}).get("status") != "archived"
             or current[s].get("evolve_to") != [record["result"]]]
    if stale or record["result"] not in current:
        raise UndoError(f"resolution {resolution_id}: {', '.join(stale) or record['result']} changed "
                        "since (not archived into its result any more); nothing undone")
    survivor = {}
    if record["kind"] == "supersede":
        [older] = record["sources"]
        last, now_survivor = not later["same_result"], current[record["result"]]
        values = survivor_before if last else now_survivor
        survivor = {"history": restored_history(now_survivor.get("history"), survivor_before.get("history"),
                                                {**current[older], "id": older}, last),
                    "version": values.get("version"), "dedup_checked_at": values.get("dedup_checked_at")}
    queries.undo_resolution(tx, tenant, record, before, json.loads(record["edges"]),
                            json.loads(record["twins"]), survivor, undo_id, now)
    record["survivor_text"] = _text(current[record["result"]])
    queries.store_reviews(tx, tenant, [review_row(a, b, UNDO_LABEL, "undo", f"undo of {record['id']}", now,
                                                  run_id=record["run_id"]) for a, b in undone_pairs(record)])
    return record


def undo(neo4j: Neo4jResource, tenant: str, *, run_id: str | None = None,
         resolution_id: str | None = None, holder: str | None = None) -> UndoReport:
    """Undo every resolution of ``run_id`` (newest first; those already undone are skipped, so an
    interrupted undo finishes when repeated) or the one ``resolution_id``, each in its own
    transaction, holding the tenant's write lease. While a run undo is under way the tenant is
    marked incomplete: runs and plans refuse it until the same command finishes."""
    if (run_id is None) == (resolution_id is None):
        raise UndoError("name a run (--run) or one resolution (--resolution)")
    undo_id = f"undo:{utc_now().strftime('%Y%m%dT%H%M%S%fZ')}"
    with neo4j.lease(tenant, holder, info="an undo"), neo4j.session() as session:
        if resolution_id is not None:
            ids, already = [resolution_id], 0
        else:
            listed = session.execute_read(queries.resolutions_of_run, tenant, run_id)
            if not listed:
                raise UndoError(f"run {run_id!r} resolved nothing in tenant {tenant!r} "
                                "(unknown run id, or another tenant's)")
            ids = [r["id"] for r in listed if r["undone_at"] is None]
            already = len(listed) - len(ids)
            if not ids:
                raise UndoError(f"run {run_id} was already undone: its {already} resolutions "
                                "are all undone")
        undone = []
        with incomplete_operation(neo4j, tenant, f"memtend undo {tenant} --run {run_id}",
                                  enabled=run_id is not None):
            for resolution in ids:
                now = utc_now()
                undone.append(session.execute_write(_undo_one, tenant, resolution, undo_id, now))
    return UndoReport(undone, already)


def review_row(a: str, b: str, label: str, origin: str, note: str, now: datetime,
               **extra: Any) -> dict[str, Any]:
    """An answered review of the text pair (a, b): its judge-independent key and label."""
    return {"id": review_key(a, b), "first_text": a, "second_text": b, "label": label,
            "status": "answered", "origin": origin, "note": note, "answered_at": now, **extra}


def review_key(a: str, b: str) -> str:
    """Order-free key of a text pair that no judge change invalidates."""
    first, second = sorted((normalize_text(a), normalize_text(b)))
    return "review:" + hashlib.sha256(f"{first}\x1f{second}".encode()).hexdigest()

