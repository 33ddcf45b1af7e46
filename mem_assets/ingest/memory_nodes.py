"""Turn validated inbox items into graph nodes: the long-term node and its working-memory twin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from mem_assets.ingest.parsing import MemoryItemIn
from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.memory_model import (
    ARRIVAL_SEPARATOR,
    DUAL_WRITE_TYPES,
    MemoryItem,
    MemoryMetadata,
    MemoryType,
    memory_id,
    payload_hash,
)


def arrival(ingest_stamp: datetime, file_name: str, line: int) -> str:
    """Sortable arrival of an inbox line: the ingest run's UTC time, the file, the line (padded).
    Dedup orders memories stated at the same time by it (mem_assets/dedup/superseding.py)."""
    stamp = ingest_stamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return ARRIVAL_SEPARATOR.join((stamp, file_name, f"{line:09d}"))


@dataclass(frozen=True)
class PlannedMemory:
    """An accepted item with its deterministic ids, before embedding."""

    item: MemoryItemIn
    node_id: str
    node_hash: str
    working_id: str | None
    working_hash: str | None
    arrival: str | None = None


def plan(tenant: str, items: Sequence[MemoryItemIn], arrivals: Sequence[str] | None = None,
         dialect: GraphDialect = SEED_DIALECT) -> list[PlannedMemory]:
    """Assign ids (in ``dialect``'s form); repeats within the batch collapse onto their first
    occurrence. ``arrivals`` (one per item: ingest run, file, line) orders memories stated at the
    same time."""
    planned: dict[str, PlannedMemory] = {}
    for position, item in enumerate(items):
        node_type = item.memory_type
        node_hash = payload_hash(tenant, node_type.value, item.memory)
        working_hash = None
        if node_type in DUAL_WRITE_TYPES:
            working_hash = payload_hash(tenant, MemoryType.WORKING.value, item.memory)
        node_id = memory_id(node_hash, dialect)
        planned.setdefault(node_id, PlannedMemory(
            item=item, node_id=node_id, node_hash=node_hash,
            working_id=memory_id(working_hash, dialect) if working_hash else None,
            working_hash=working_hash, arrival=arrivals[position] if arrivals else None,
        ))
    return list(planned.values())


def build_nodes(tenant: str, planned: Sequence[PlannedMemory], vectors: np.ndarray,
                now: datetime) -> list[MemoryItem]:
    """Long-term nodes bound to their WorkingMemory copies (seed §3.2, on every path)."""
    nodes: list[MemoryItem] = []
    for entry, vector in zip(planned, vectors, strict=True):
        item = entry.item
        created = item.created_at or now
        shared = {
            "user_name": tenant, "key": item.key, "tags": item.tags,
            "background": item.background, "sources": item.sources,
            "embedding": vector.tolist(), "confidence": item.confidence, "type": item.type,
            "created_at": created, "updated_at": created, "arrival": entry.arrival,
        }
        nodes.append(MemoryItem(id=entry.node_id, memory=item.memory, metadata=MemoryMetadata(
            memory_type=item.memory_type, payload_hash=entry.node_hash,
            working_binding=entry.working_id, **shared,
        )))
        if entry.working_id is not None and entry.working_hash is not None:
            nodes.append(MemoryItem(id=entry.working_id, memory=item.memory, metadata=MemoryMetadata(
                memory_type=MemoryType.WORKING, payload_hash=entry.working_hash,
                working_binding=entry.node_id, **shared,
            )))
    return nodes
