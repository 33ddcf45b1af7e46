"""Validate inbox lines into memory items; every bad line becomes a rejection with its reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from mem_resources.inbox import Rejection
from mem_resources.memory_model import MemoryType, SourceMessage

RAW_PREVIEW_CHARS = 500
M = TypeVar("M", bound=BaseModel)


class MemoryItemIn(BaseModel):
    """One line of an inbox file. Only ``memory`` is required."""

    model_config = ConfigDict(extra="ignore")

    memory: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    memory_type: MemoryType = MemoryType.LONG_TERM
    key: str | None = None
    tags: list[str] = Field(default_factory=list)
    background: str | None = None
    sources: list[SourceMessage] = Field(default_factory=list)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    type: str = "fact"
    created_at: datetime | None = None


class ParsedLine(BaseModel):
    line: int
    item: MemoryItemIn


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "line"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def parse_jsonl(path: Path, model: type[M]) -> Iterator[tuple[int, M, str] | Rejection]:
    """Stream a JSONL file line by line (never the whole file) into (line number, ``model``
    instance, raw preview); every bad line becomes a rejection with its kind and reason."""
    name = path.name
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            preview = raw[:RAW_PREVIEW_CHARS].decode("utf-8", errors="replace").rstrip("\n")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield Rejection(name, number, "invalid_utf8", f"invalid UTF-8 at byte {exc.start}", preview)
                continue
            try:
                payload = json.loads(text)
            except json.JSONDecodeError as exc:
                yield Rejection(name, number, "not_json", f"not JSON: {exc.msg} (column {exc.colno})", preview)
                continue
            if not isinstance(payload, dict):
                yield Rejection(name, number, "not_object", "not a JSON object", preview)
                continue
            try:
                yield number, model.model_validate(payload), preview
            except ValidationError as exc:
                yield Rejection(name, number, "invalid_fields", _reason(exc), preview)


def parse_lines(path: Path, max_chars: int) -> Iterator[ParsedLine | Rejection]:
    """Inbox memory items; texts longer than ``max_chars`` are rejected too."""
    for entry in parse_jsonl(path, MemoryItemIn):
        if isinstance(entry, Rejection):
            yield entry
            continue
        number, item, preview = entry
        if len(item.memory) > max_chars:
            yield Rejection(path.name, number, "too_long",
                            f"memory: text has {len(item.memory)} characters, limit {max_chars}",
                            preview)
            continue
        yield ParsedLine(line=number, item=item)
