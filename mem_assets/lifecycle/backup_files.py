"""The on-disk backup format: a folder of gzip'd JSON lines plus a manifest.

    <root>/<tenant>/<backup_id>/manifest.json
                               nodes.jsonl.gz           one node per line
                               relationships.jsonl.gz   one (start, type, end) per line

A backup is written into ``<root>/<tenant>/.<backup_id>.partial/`` and renamed into place only
after the manifest is on disk, so a listed backup is always complete; rotation runs after that
rename. Each file's manifest entry holds its line count and the sha256 of its uncompressed
bytes. Lines are canonical JSON in key order, so the ``checksum`` (sha256 over the two file
digests) is a digest of the tenant's content: two backups of the same graph have equal checksums.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import zlib
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ValidationError

from mem_assets.lifecycle.backup_codec import CodecError, decode_properties, dumps_line
from mem_resources.tenants import inside, validate_tenant

FORMAT = "memtend-tenant-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
NODES = "nodes.jsonl.gz"
RELATIONSHIPS = "relationships.jsonl.gz"
DEFAULT_KEEP_LAST = 30
_ID_FORMAT = "%Y%m%dT%H%M%S%fZ"


class BackupError(RuntimeError):
    """A backup is missing, incomplete or corrupt; nothing was changed in the graph."""


class FileEntry(BaseModel):
    name: str
    lines: int
    sha256: str


class BackupCounts(BaseModel):
    nodes: int
    relationships: int
    labels: dict[str, int]
    relationship_types: dict[str, int]
    external_relationships: int = 0


class Manifest(BaseModel):
    format: Literal["memtend-tenant-backup"] = FORMAT
    format_version: int = FORMAT_VERSION
    tenant: str
    backup_id: str
    created_at: datetime
    completed_at: datetime
    counts: BackupCounts
    files: dict[str, FileEntry]
    checksum: str


def check_tenant(tenant: str) -> str:
    """Tenant names double as folder names: the one tenant rule keeps them path-safe."""
    return validate_tenant(tenant)


def combined_checksum(files: dict[str, FileEntry]) -> str:
    text = "".join(f"{name}:{files[name].sha256}\n" for name in sorted(files))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class _LineWriter:
    """Gzip'd text lines with a running sha256 and count of the uncompressed bytes."""

    def __init__(self, path: Path, compresslevel: int) -> None:
        self.name = path.name
        self._file = path.open("wb")
        self._gzip = gzip.GzipFile(fileobj=self._file, mode="wb", compresslevel=compresslevel)
        self._text = io.TextIOWrapper(self._gzip, encoding="utf-8", newline="\n")
        self._digest = hashlib.sha256()
        self.lines = 0

    def write(self, line: str) -> None:
        self._digest.update(line.encode("utf-8"))
        self._text.write(line)
        self.lines += 1

    def close(self) -> FileEntry:
        """Finish the gzip stream and make it durable before anything refers to it."""
        self._text.close()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        return FileEntry(name=self.name, lines=self.lines, sha256=self._digest.hexdigest())

    def abort(self) -> None:
        self._text.close()
        self._file.close()


@dataclass
class BackupWriter:
    """Writes one backup; use as a context manager, call :meth:`commit` to publish it.

    Leaving the block without commit (an error midway) removes the partial folder. gzip level 1:
    embedding digits barely compress further at higher levels, which cost three times the CPU.
    """

    root: Path
    tenant: str
    compresslevel: int = 1
    backup_id: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    labels: Counter[str] = field(default_factory=Counter)
    relationship_types: Counter[str] = field(default_factory=Counter)
    external_relationships: int = 0

    def __enter__(self) -> Self:
        folder = tenant_folder(self.root, self.tenant)
        folder.mkdir(parents=True, exist_ok=True)
        self.backup_id = self.backup_id or self.created_at.strftime(_ID_FORMAT)
        self.final_path = folder / self.backup_id
        self.partial_path = folder / f".{self.backup_id}.partial"
        if self.final_path.exists() or self.partial_path.exists():
            raise BackupError(f"backup {self.backup_id} of {self.tenant} already exists")
        self.partial_path.mkdir()
        self._nodes = _LineWriter(self.partial_path / NODES, self.compresslevel)
        self._relationships = _LineWriter(self.partial_path / RELATIONSHIPS, self.compresslevel)
        self._committed = False
        return self

    def write_node(self, node_id: str, labels: list[str], key: str, props: dict[str, Any]) -> None:
        """``props`` already encoded (see :mod:`codec`)."""
        self._nodes.write(dumps_line({"id": node_id, "key": key, "labels": sorted(labels),
                                      "props": props}))
        self.labels.update(labels)

    def write_relationships(self, start_key: str, start: str, rel_type: str, end_key: str, end: str,
                            props: list[dict[str, Any]]) -> None:
        """All ``rel_type`` relationships from start to end: one encoded property map each."""
        self._relationships.write(dumps_line({
            "start_key": start_key, "start": start, "type": rel_type, "end_key": end_key,
            "end": end, "props": sorted(props, key=dumps_line),
        }))
        self.relationship_types[rel_type] += len(props)

    def commit(self) -> Manifest:
        files = {NODES: self._nodes.close(), RELATIONSHIPS: self._relationships.close()}
        manifest = Manifest(
            tenant=self.tenant, backup_id=self.backup_id, created_at=self.created_at,
            completed_at=datetime.now(UTC),
            counts=BackupCounts(
                nodes=files[NODES].lines, relationships=sum(self.relationship_types.values()),
                labels=dict(sorted(self.labels.items())),
                relationship_types=dict(sorted(self.relationship_types.items())),
                external_relationships=self.external_relationships,
            ),
            files=files, checksum=combined_checksum(files),
        )
        _write_durably(self.partial_path / MANIFEST, manifest.model_dump_json(indent=2) + "\n")
        os.replace(self.partial_path, self.final_path)
        _fsync_dir(self.final_path.parent)
        self._committed = True
        return manifest

    def __exit__(self, *exc_info: object) -> None:
        if not self._committed:
            self._nodes.abort()
            self._relationships.abort()
            shutil.rmtree(self.partial_path, ignore_errors=True)


def _write_durably(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    """Persist a rename: a drop deletes graph data right after a backup is published."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# --- reading -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BackupReader:
    """A published backup folder whose manifest parsed; :meth:`verify` before trusting lines."""

    path: Path
    manifest: Manifest

    @classmethod
    def open(cls, path: Path) -> BackupReader:
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise BackupError(f"no backup at {path} (missing {MANIFEST})")
        try:
            manifest = Manifest.model_validate_json(manifest_path.read_bytes())
        except ValidationError as exc:
            raise BackupError(f"corrupt manifest in {path}: {exc.error_count()} invalid fields "
                              f"({exc.errors()[0]['loc']}: {exc.errors()[0]['msg']})") from exc
        if manifest.format_version != FORMAT_VERSION:
            raise BackupError(f"backup {path} has format version {manifest.format_version}; "
                              f"this memtend reads version {FORMAT_VERSION}")
        if set(manifest.files) != {NODES, RELATIONSHIPS}:
            raise BackupError(f"manifest of {path} lists files {sorted(manifest.files)}")
        if combined_checksum(manifest.files) != manifest.checksum:
            raise BackupError(f"manifest of {path} does not match its own checksum")
        return cls(path, manifest)

    def _lines(self, name: str) -> Iterator[bytes]:
        file = self.path / name
        if not file.is_file():
            raise BackupError(f"backup {self.path} is missing {name}")
        try:
            with gzip.open(file, "rb") as handle:
                yield from handle
        except (OSError, EOFError, zlib.error) as exc:
            raise BackupError(f"{file} is damaged or truncated: {exc}") from exc

    def verify(self, key_labels: Collection[str]) -> None:
        """Stream every file once: line counts, sha256, the shape of each line and its values
        must match, nodes must belong to the manifest's tenant under a known key label, every
        relationship must join two nodes of the backup, and the content must add up to the
        manifest's counts (which its checksum does not cover). Nothing is written before this."""
        addresses: set[tuple[str, str]] = set()
        labels: Counter[str] = Counter()
        relationship_types: Counter[str] = Counter()
        dangling: list[str] = []
        for name in (NODES, RELATIONSHIPS):
            entry = self.manifest.files[name]
            digest, lines = hashlib.sha256(), 0
            for line in self._lines(name):
                digest.update(line)
                lines += 1
                record = _parse(line, name, lines)
                self._check(record, name, lines, key_labels)
                if name == NODES:
                    address = (record["key"], record["id"])
                    if address in addresses:
                        raise BackupError(f"{self.path / name} line {lines}: node {record['id']!r} "
                                          "appears twice")
                    addresses.add(address)
                    labels.update(record["labels"])
                    continue
                relationship_types[record["type"]] += len(record["props"])
                dangling += [f"{record['type']} {record['start']} -> {record['end']}"
                             for end in ((record["start_key"], record["start"]),
                                         (record["end_key"], record["end"])) if end not in addresses]
            if lines != entry.lines or digest.hexdigest() != entry.sha256:
                raise BackupError(
                    f"{self.path / name} does not match the manifest ({lines} lines, sha256 "
                    f"{digest.hexdigest()[:12]}…; expected {entry.lines}, {entry.sha256[:12]}…)"
                )
        if dangling:
            raise BackupError(f"{self.path}: {len(dangling)} relationship ends are not in the backup "
                              f"(first: {dangling[0]}); it cannot be restored")
        found = BackupCounts(nodes=len(addresses), relationships=sum(relationship_types.values()),
                             labels=dict(labels), relationship_types=dict(relationship_types),
                             external_relationships=self.manifest.counts.external_relationships)
        if found != self.manifest.counts:
            raise BackupError(f"{self.path}: content does not add up to the manifest's counts "
                              f"(found {found.model_dump()}, manifest {self.manifest.counts.model_dump()})")

    def _check(self, record: dict[str, Any], name: str, number: int,
               key_labels: Collection[str]) -> None:
        where = f"{self.path / name} line {number}"
        if name == NODES:
            keys, maps = [record["key"]], [record["props"]]
            props = record["props"]
            if props.get("user_name") != self.manifest.tenant or props.get("id") != record["id"]:
                raise BackupError(f"{where}: node does not belong to {self.manifest.tenant!r}")
            if record["key"] not in record["labels"]:
                raise BackupError(f"{where}: key label {record['key']!r} is not among its labels")
        else:
            keys, maps = [record["start_key"], record["end_key"]], record["props"]
        if unknown := [key for key in keys if key not in key_labels]:
            raise BackupError(f"{where}: unknown key label {unknown[0]!r}")
        try:
            for props in maps:
                decode_properties(props)
        except (CodecError, TypeError, ValueError, AttributeError) as exc:
            raise BackupError(f"{where}: undecodable property value ({exc})") from exc

    def records(self, name: str) -> Iterator[dict[str, Any]]:
        for number, line in enumerate(self._lines(name), start=1):
            yield _parse(line, name, number)


_REQUIRED = {
    NODES: {"id": str, "key": str, "labels": list, "props": dict},
    RELATIONSHIPS: {"start_key": str, "start": str, "type": str, "end_key": str, "end": str,
                    "props": list},
}


def _parse(line: bytes, name: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise BackupError(f"{name} line {number} is not JSON: {exc}") from exc
    if not isinstance(record, dict) or any(
        not isinstance(record.get(key), kind) for key, kind in _REQUIRED[name].items()
    ):
        raise BackupError(f"{name} line {number} lacks fields {sorted(_REQUIRED[name])}")
    return record


# --- listing and rotation ----------------------------------------------------------------------

def tenant_folder(root: Path, tenant: str) -> Path:
    return inside(root, check_tenant(tenant))


def list_backups(root: Path, tenant: str) -> list[Path]:
    """Published backups of a tenant, oldest first (ids sort by time)."""
    folder = tenant_folder(root, tenant)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / MANIFEST).is_file())


def find_backup(root: Path, tenant: str, backup_id: str | None) -> Path:
    """The backup with this id, or the newest one when ``backup_id`` is None."""
    backups = list_backups(root, tenant)
    if backup_id is None:
        if not backups:
            raise BackupError(f"tenant {tenant!r} has no backups in {root}")
        return backups[-1]
    path = tenant_folder(root, tenant) / backup_id
    if path not in backups:
        raise BackupError(f"tenant {tenant!r} has no backup {backup_id!r} in {root}")
    return path


def rotate(root: Path, tenant: str, keep_last: int) -> list[str]:
    """Delete all but the newest ``keep_last`` published backups; returns the deleted ids."""
    if keep_last < 1:
        raise ValueError("keep_last must be at least 1")
    doomed = list_backups(root, tenant)[:-keep_last]
    for path in doomed:
        shutil.rmtree(path)
    return [path.name for path in doomed]
