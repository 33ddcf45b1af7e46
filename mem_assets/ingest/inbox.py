"""The inbox folder tenants drop JSONL files into, and the per-tenant quarantine beside it.

Layout: ``<root>/<tenant>/*.jsonl``; rejected lines go to ``<quarantine_dir>/<tenant>.jsonl``.
Only regular files are read, never through a symbolic link: a link (to a file or a folder) could
make one tenant's run read another tenant's files or anything else on the machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from dagster import ConfigurableResource

from mem_resources.tenants import (
    TENANT_PATTERN,
    inside,
    is_valid_tenant,
    validate_tenant,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InboxFile:
    tenant: str
    path: Path
    size: int
    mtime_ns: int

    @property
    def fingerprint(self) -> str:
        """Cheap change marker for sensors: name, size and modification time."""
        return f"{self.path.name}:{self.size}:{self.mtime_ns}"

    def sha256(self) -> str:
        digest = hashlib.sha256()
        with open_regular(self.path) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()


@dataclass(frozen=True)
class Rejection:
    file: str
    line: int
    kind: str
    reason: str
    raw: str


@dataclass(frozen=True)
class SkippedPath:
    """An inbox entry that is not read, and why (a symbolic link, a FIFO, a device...)."""

    tenant: str
    path: Path
    kind: str
    reason: str

    @property
    def fingerprint(self) -> str:
        return f"skipped:{self.path.name}:{self.kind}"

    @property
    def ledger_key(self) -> str:
        """Ledger key: the same skip (same name, same reason) is reported once."""
        return hashlib.sha256(f"skipped\x1f{self.path}\x1f{self.reason}".encode()).hexdigest()

    def rejection(self) -> Rejection:
        return Rejection(self.path.name, 0, self.kind, self.reason, "")


def open_regular(path: Path) -> BinaryIO:
    """Open for reading, refusing a symbolic link that appeared after the folder was listed."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")


def _skip_reason(tenant: str, path: Path) -> SkippedPath | None:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return SkippedPath(tenant, path, "symlink",
                           f"symbolic link to {os.readlink(path)!r}: links are never followed")
    if not stat.S_ISREG(mode):
        return SkippedPath(tenant, path, "not_regular_file", "not a regular file")
    return None


class InboxResource(ConfigurableResource):
    root: str = "data/inbox"
    quarantine_dir: str = "data/quarantine"

    def tenants(self) -> list[str]:
        """Tenant folders with a valid name; others, and symbolic links, are skipped with a warning."""
        root = Path(self.root)
        if not root.is_dir():
            return []
        names = []
        for child in sorted(root.iterdir()):
            if child.name.startswith("."):
                continue
            if child.is_symlink():
                log.warning("Skipping inbox folder %r: a symbolic link (never followed)", child.name)
            elif not child.is_dir():
                continue
            elif is_valid_tenant(child.name):
                names.append(child.name)
            else:
                log.warning("Skipping inbox folder %r: not a valid tenant name (%s)",
                            child.name, TENANT_PATTERN)
        return names

    def scan(self, tenant: str, subfolder: str = "") -> tuple[list[InboxFile], list[SkippedPath]]:
        """The tenant's regular ``*.jsonl`` files (of ``subfolder`` when given), sorted by name,
        and the entries skipped: links and non-regular files, or the folder itself if a link."""
        tenant_folder = Path(self.root) / validate_tenant(tenant)
        folder = tenant_folder / subfolder
        for level in dict.fromkeys((tenant_folder, folder)):
            if level.is_symlink():
                return [], [SkippedPath(tenant, level, "symlink",
                                        f"folder is a symbolic link to {os.readlink(level)!r}: "
                                        "links are never followed")]
        if not inside(self.root, tenant, subfolder).is_dir():
            return [], []
        found, skipped = [], []
        for path in sorted(folder.glob("*.jsonl")):
            if skip := _skip_reason(tenant, path):
                skipped.append(skip)
                continue
            info = path.stat()
            found.append(InboxFile(tenant, path, info.st_size, info.st_mtime_ns))
        return found, skipped

    def files(self, tenant: str, subfolder: str = "") -> list[InboxFile]:
        """The tenant's regular ``*.jsonl`` files (of ``subfolder`` when given), sorted by name."""
        return self.scan(tenant, subfolder)[0]

    def quarantine_path(self, tenant: str) -> Path:
        return inside(self.quarantine_dir, f"{validate_tenant(tenant)}.jsonl")

    def quarantine(self, tenant: str, rejections: Iterable[Rejection]) -> int:
        """Append rejected lines with file, line number and reason; returns how many."""
        path = self.quarantine_path(tenant)
        path.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        at = datetime.now(UTC).isoformat()
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "a", encoding="utf-8") as out:
            for rejection in rejections:
                out.write(json.dumps({"file": rejection.file, "line": rejection.line,
                                      "kind": rejection.kind, "reason": rejection.reason, "raw": rejection.raw,
                                      "quarantined_at": at}, ensure_ascii=False) + "\n")
                count += 1
        return count

    def read_quarantine(self, tenant: str) -> Iterator[dict]:
        path = self.quarantine_path(tenant)
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                for line in handle:
                    yield json.loads(line)
