"""Validate inbox lines into memory items; every bad line becomes a rejection with its reason."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from mem_assets.ingest.inbox import Rejection, open_regular
from mem_assets.ingest.text_input import BOM, Cleaned, Visible, has_lone_surrogate
from mem_resources.memory_model import MemoryType, SourceMessage

RAW_PREVIEW_CHARS = 500
#: Deepest ``[``/``{`` nesting a line may have; deeper lines are refused before ``json.loads``
#: (which recurses once per level). A memory item needs 4: line, sources, source, extra field.
MAX_NESTING_DEPTH = 32
#: Longest line read; a longer one is quarantined and skipped without being held in memory.
MAX_LINE_BYTES = 4 << 20
M = TypeVar("M", bound=BaseModel)
_BOM_BYTES = BOM.encode("utf-8")
_JSON_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class MemoryItemIn(BaseModel):
    """One line of an inbox file. Only ``memory`` is required."""

    model_config = ConfigDict(extra="ignore")

    memory: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), Cleaned, Visible]
    memory_type: MemoryType = MemoryType.LONG_TERM
    key: Annotated[str, Cleaned] | None = None
    tags: list[Annotated[str, Cleaned]] = Field(default_factory=list)
    background: Annotated[str, Cleaned] | None = None
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


def nesting_depth(raw: bytes, limit: int) -> int:
    """Deepest bracket nesting outside JSON strings, counting stops past ``limit``. Linear: an
    unterminated string simply runs to the end of the line."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return raw.count(b"[") + raw.count(b"{")
    depth = deepest = 0
    for token in _JSON_TOKENS.finditer(raw):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char in (b"]", b"}"):
            depth -= 1
    return deepest


def _read_lines(handle: IO[bytes], max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """(line, complete) pairs; a line over ``max_bytes`` is yielded as its head, then skipped."""
    while raw := handle.readline(max_bytes + 1):
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw, True
            continue
        while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass
        yield raw, False


def _decode(name: str, number: int, raw: bytes, preview: str, model: type[M]) -> M | Rejection:
    """One line: every way it can fail becomes a rejection of that line, never an exception."""
    def reject(kind: str, reason: str) -> Rejection:
        return Rejection(name, number, kind, reason, preview)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return reject("invalid_utf8", f"invalid UTF-8 at byte {exc.start}")
    if nesting_depth(raw, MAX_NESTING_DEPTH) > MAX_NESTING_DEPTH:
        return reject("too_deep", f"nested deeper than {MAX_NESTING_DEPTH} levels")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        return reject("not_json", f"not JSON: {exc.msg} (column {exc.colno})")
    except (ValueError, RecursionError, MemoryError) as exc:
        return reject("not_json", f"not JSON: {type(exc).__name__}: {str(exc)[:200]}")
    if not isinstance(payload, dict):
        return reject("not_object", "not a JSON object")
    if _SURROGATE_ESCAPE.search(raw) and has_lone_surrogate(payload):
        return reject("invalid_unicode", "a string holds a lone surrogate escape (not valid Unicode)")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        return reject("invalid_fields", _reason(exc))
    except Exception as exc:  # noqa: BLE001 -- a validator bug must cost one line, not the run
        return reject("invalid_fields", f"{type(exc).__name__}: {str(exc)[:200]}")


def parse_jsonl(path: Path, model: type[M],
                max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, M, str] | Rejection]:
    """Stream a JSONL file line by line (never the whole file) into (line number, ``model``
    instance, raw preview); every bad line becomes a rejection with its kind and reason. A
    UTF-8 byte order mark at the start of a line (a file's first line, or files concatenated)
    is dropped."""
    name = path.name
    with open_regular(path) as handle:
        for number, (raw, complete) in enumerate(_read_lines(handle, max_line_bytes), start=1):
            raw = raw.removeprefix(_BOM_BYTES)
            if complete and not raw.strip():
                continue
            preview = raw[:RAW_PREVIEW_CHARS].decode("utf-8", errors="replace").rstrip("\n")
            if not complete:
                yield Rejection(name, number, "line_too_long",
                                f"line longer than {max_line_bytes} bytes", preview)
                continue
            decoded = _decode(name, number, raw, preview, model)
            yield decoded if isinstance(decoded, Rejection) else (number, decoded, preview)


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
