"""The memory item as stored in Neo4j (seed 000 §2–§5), and its property codec.

Neo4j properties hold only scalars and homogeneous lists, so the nested fields (``sources``,
``history``) are stored as one JSON string each — encoded exactly once — and decoded on read,
which makes a node read back equal to the item that was written.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mem_resources.graph_schema_adapter import (
    OWN_HISTORY_PROPERTY,
    OWN_VECTOR_PROPERTY,
    SEED_DIALECT,
    SEED_ID_PREFIX,
    GraphDialect,
)

ID_PREFIX = SEED_ID_PREFIX
#: Joins the parts of a memory's ``arrival`` (ingest stamp, file, line): sortable as a string.
ARRIVAL_SEPARATOR = "|"


class MemoryType(StrEnum):
    WORKING = "WorkingMemory"
    LONG_TERM = "LongTermMemory"
    USER = "UserMemory"
    OUTER = "OuterMemory"
    RAW_FILE = "RawFileMemory"
    # MemOS 2.x's other memory types: tended in MemOS mode like any other type, never mixed.
    TOOL_SCHEMA = "ToolSchemaMemory"
    TOOL_TRAJECTORY = "ToolTrajectoryMemory"
    SKILL = "SkillMemory"
    PREFERENCE = "PreferenceMemory"
    CONTEXT = "Context"


class MemoryStatus(StrEnum):
    ACTIVATED = "activated"
    RESOLVING = "resolving"
    ARCHIVED = "archived"
    DELETED = "deleted"


class UpdateType(StrEnum):
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"
    EXTRACT = "extract"
    UNRELATED = "unrelated"
    FEEDBACK = "feedback"
    REFRESH = "refresh"


DUAL_WRITE_TYPES = frozenset({MemoryType.LONG_TERM, MemoryType.USER, MemoryType.OUTER})


class SourceMessage(BaseModel):
    """Where a memory came from: a chat turn or a document."""

    model_config = ConfigDict(extra="allow")

    type: str = "chat"
    role: str | None = None
    content: str | None = None
    chat_time: str | None = None
    doc_path: str | None = None


class ArchivedVersion(BaseModel):
    """A superseded version of a memory, kept in the survivor's ``history``."""

    version: int
    update_type: UpdateType
    archived_memory_id: str | None = None
    memory: str
    created_at: datetime


class MemoryMetadata(BaseModel):
    user_name: str
    memory_type: MemoryType = MemoryType.LONG_TERM
    status: MemoryStatus = MemoryStatus.ACTIVATED
    key: str | None = None
    tags: list[str] = Field(default_factory=list)
    background: str | None = None
    sources: list[SourceMessage] = Field(default_factory=list)
    embedding: list[float] | None = None
    confidence: float | None = None
    type: str = "fact"
    created_at: datetime
    updated_at: datetime
    version: int = 1
    history: list[ArchivedVersion] = Field(default_factory=list)
    evolve_to: list[str] = Field(default_factory=list)
    working_binding: str | None = None
    payload_hash: str
    #: Where and when an inbox line arrived (ingest run, file, line): orders same-time memories.
    arrival: str | None = None


class MemoryItem(BaseModel):
    id: str
    memory: str
    metadata: MemoryMetadata

    def to_properties(self, dialect: GraphDialect = SEED_DIALECT) -> dict[str, Any]:
        """Flat Neo4j properties. Seed 002: ``memory`` doubles as ``data``/``display``/``name``,
        ``sources`` and ``history`` are one JSON string each. MemOS: ``sources`` is a list of JSON
        strings as MemOS's graph store writes it, lineage history goes to memtend's own property
        (MemOS parses its ``history`` as a list of objects, which Neo4j cannot hold), and the
        vector to memtend's own property unless MemOS's embedding is shared."""
        meta = self.metadata
        props = meta.model_dump(mode="python", exclude={"sources", "history", "memory_type", "status"})
        sources = [s.model_dump(mode="json", exclude_none=True) for s in meta.sources]
        history = json.dumps([h.model_dump(mode="json") for h in meta.history], ensure_ascii=False)
        props.update(id=self.id, memory=self.memory, memory_type=meta.memory_type.value,
                     status=meta.status.value)
        if not dialect.memos:
            name = display_name(self.memory, meta.payload_hash)
            props.update(data=self.memory, display=name, name=name, history=history,
                         sources=json.dumps(sources, ensure_ascii=False))
            return props
        props.update({"sources": [json.dumps(s, ensure_ascii=False) for s in sources],
                      OWN_HISTORY_PROPERTY: history})
        if dialect.vector_property == OWN_VECTOR_PROPERTY:
            props[OWN_VECTOR_PROPERTY] = props.pop("embedding")
        return props

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> MemoryItem:
        """Either schema's node: sources as one JSON string or as MemOS's list of JSON strings,
        history from memtend's own property when it has one."""
        meta = {k: v for k, v in props.items() if k in MemoryMetadata.model_fields}
        for key in ("created_at", "updated_at"):
            value = meta.get(key)
            if hasattr(value, "to_native"):
                meta[key] = value.to_native()
        meta["sources"] = [s for s in _json_list(props.get("sources")) if isinstance(s, dict)]
        meta["history"] = _json_list(props.get(OWN_HISTORY_PROPERTY) or props.get("history"))
        for key in ("tags", "evolve_to"):
            if meta.get(key) is None:
                meta.pop(key, None)
        if meta.get("type") is None:
            meta.pop("type", None)
        return cls(id=props["id"], memory=props.get("memory") or props.get("data") or "", metadata=meta)


def _json_list(value: Any) -> list[Any]:
    """A JSON-encoded list, or a list of JSON-encoded items (MemOS's batch write encodes each
    source twice), decoded; None and empty as []."""
    if not value:
        return []
    if isinstance(value, str):
        value = json.loads(value)
    items = []
    for item in value:
        while isinstance(item, str) and item[:1] in ('{', '"'):
            item = json.loads(item)
        items.append(item)
    return items


def normalize_text(text: str) -> str:
    """NFKC, collapsed whitespace: what counts as 'the same text' for ids and exact duplicates."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def payload_hash(tenant: str, memory_type: str, text: str) -> str:
    """md5 of the tenant-scoped payload: identical text in two tenants hashes differently."""
    payload = "\x1f".join((tenant, memory_type, normalize_text(text)))
    return hashlib.md5(payload.encode("utf-8")).hexdigest()


def memory_id(hash_hex: str, dialect: GraphDialect = SEED_DIALECT) -> str:
    """``mem:<hex>`` in seed 002; the UUID of the same digest on a MemOS graph (MemOS's
    ``TextualMemoryItem`` refuses any other id)."""
    return dialect.node_id(hash_hex)


def display_name(text: str, hash_hex: str) -> str:
    return f"{text} #{hash_hex[:8]}"


def utc_now() -> datetime:
    return datetime.now(UTC)
