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

ID_PREFIX = "mem:"
#: Joins the parts of a memory's ``arrival`` (ingest stamp, file, line): sortable as a string.
ARRIVAL_SEPARATOR = "|"


class MemoryType(StrEnum):
    WORKING = "WorkingMemory"
    LONG_TERM = "LongTermMemory"
    USER = "UserMemory"
    OUTER = "OuterMemory"
    RAW_FILE = "RawFileMemory"


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

    def to_properties(self) -> dict[str, Any]:
        """Flat Neo4j properties; ``memory`` doubles as seed 002's ``data``/``display``/``name``."""
        meta = self.metadata
        props = meta.model_dump(mode="python", exclude={"sources", "history", "memory_type", "status"})
        props.update(
            id=self.id,
            memory=self.memory,
            data=self.memory,
            display=display_name(self.memory, meta.payload_hash),
            name=display_name(self.memory, meta.payload_hash),
            memory_type=meta.memory_type.value,
            status=meta.status.value,
            sources=json.dumps([s.model_dump(mode="json", exclude_none=True) for s in meta.sources],
                               ensure_ascii=False),
            history=json.dumps([h.model_dump(mode="json") for h in meta.history], ensure_ascii=False),
        )
        return props

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> MemoryItem:
        meta = {k: v for k, v in props.items() if k in MemoryMetadata.model_fields}
        for key in ("created_at", "updated_at"):
            value = meta.get(key)
            if hasattr(value, "to_native"):
                meta[key] = value.to_native()
        meta["sources"] = json.loads(props.get("sources") or "[]")
        meta["history"] = json.loads(props.get("history") or "[]")
        return cls(id=props["id"], memory=props.get("memory") or props.get("data") or "", metadata=meta)


def normalize_text(text: str) -> str:
    """NFKC, collapsed whitespace: what counts as 'the same text' for ids and exact duplicates."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def payload_hash(tenant: str, memory_type: str, text: str) -> str:
    """md5 of the tenant-scoped payload: identical text in two tenants hashes differently."""
    payload = "\x1f".join((tenant, memory_type, normalize_text(text)))
    return hashlib.md5(payload.encode("utf-8")).hexdigest()


def memory_id(hash_hex: str) -> str:
    return f"{ID_PREFIX}{hash_hex}"


def display_name(text: str, hash_hex: str) -> str:
    return f"{text} #{hash_hex[:8]}"


def utc_now() -> datetime:
    return datetime.now(UTC)
