"""A memory's story: its versions, and every merge, supersede, undo and review that named it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from mem_assets.dedup import queries
from mem_resources.neo4j_resource import Neo4jResource


def memory_history(neo4j: Neo4jResource, tenant: str, memory_id: str) -> list[str]:
    """Lines, oldest first, for one memory of ``tenant``; an empty list when it has no such memory."""
    with neo4j.session() as session:
        found = session.execute_read(queries.memory_lineage, tenant, memory_id)
    return history_lines(found) if found else []


def history_lines(found: dict[str, Any]) -> list[str]:
    """Versions from the node's history, then its resolutions and reviews, each dated."""
    events: list[tuple[str, str]] = []
    for entry in json.loads(found["history"] or "[]"):
        events.append((str(entry.get("created_at") or ""),
                       (f"version {entry.get('version')} ({entry.get('update_type')}, was "
                        f"{entry.get('archived_memory_id')}): {entry.get('memory')}")))
    for r in found["resolutions"]:
        role = "result" if r["result"] == found["id"] else "source"
        events.append((r["applied_at"] or r["created_at"] or "",
                       (f"{r['kind']} ({role}) {r['id']} in run {r['run_id']}: "
                        f"{' | '.join(r['source_texts'])} -> {r['text']} ({r['reason']})")))
        if r["undone_at"]:
            events.append((r["undone_at"], f"undone {r['id']} ({r['undone_by']}) of run {r['run_id']}"))
    for v in found["reviews"]:
        if v["created_at"]:  # queued by a run (an undo's answer never was)
            events.append((v["created_at"], (f"queued for review {v['id']} in run {v['run_id']}: "
                                             f"{v['first_text']} / {v['second_text']} ({v['reason']})")))
        if v["status"] != "pending":
            applied = f", applied as {v['resolution_id']}" if v["resolution_id"] else ""
            events.append((v["answered_at"] or "", (f"reviewed {v['id']}: {v['label']} ({v['note']}{applied}), "
                                                    f"queued in run {v['run_id']}")))
    head = (f"{found['id']} [{found['status'] or 'activated'}] version {found['version']}, created "
            f"{found['created_at']}, updated {found['updated_at']}: {found['memory']}")
    tail = ([f"archived {found['archived_at']} ({found['archived_reason']}) -> {found['evolve_to']}"]
            if found["status"] == "archived" else [])
    return [head, *(f"  {at}  {text}" for at, text in sorted(events, key=lambda e: (_instant(e[0]), e[1]))), *tail]


def _instant(at: str) -> datetime:
    """An event's time for ordering: Neo4j and Python write fractions of a second with 3 to 9
    digits, so the strings do not sort as the times do; no time sorts first."""
    if not at:
        return datetime.min.replace(tzinfo=UTC)
    at = re.sub(r"(\.\d{6})\d+", r"\1", re.sub(r"\[[^]]*\]$", "", at).replace("Z", "+00:00"))
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def search_history(neo4j: Neo4jResource, tenant: str, text: str) -> dict[str, list[str]]:
    """The history of each memory of ``tenant`` whose text contains ``text``."""
    with neo4j.session() as session:
        ids = session.execute_read(queries.search_memories, tenant, text)
    return {memory_id: memory_history(neo4j, tenant, memory_id) for memory_id in ids}
