"""The inbox folder tenants drop JSONL files into, and the per-tenant quarantine beside it.

Layout: ``<root>/<tenant>/*.jsonl``; rejected lines go to ``<quarantine_dir>/<tenant>.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dagster import ConfigurableResource

log = logging.getLogger(__name__)

TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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
        with self.path.open("rb") as handle:
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


def is_valid_tenant(name: str) -> bool:
    return bool(TENANT_NAME.match(name))


class InboxResource(ConfigurableResource):
    root: str = "data/inbox"
    quarantine_dir: str = "data/quarantine"

    def tenants(self) -> list[str]:
        """Tenant folders with a valid name; others are skipped with a warning."""
        root = Path(self.root)
        if not root.is_dir():
            return []
        names = []
        for child in sorted(root.iterdir()):
            if not child.is_dir() or child.name.startswith("."):
                continue
            if is_valid_tenant(child.name):
                names.append(child.name)
            else:
                log.warning("Skipping inbox folder %r: not a valid tenant name (%s)",
                            child.name, TENANT_NAME.pattern)
        return names

    def files(self, tenant: str, subfolder: str = "") -> list[InboxFile]:
        """The tenant's ``*.jsonl`` files (of ``subfolder`` when given), sorted by name."""
        folder = Path(self.root) / tenant / subfolder
        if not folder.is_dir():
            return []
        found = []
        for path in sorted(folder.glob("*.jsonl")):
            stat = path.stat()
            found.append(InboxFile(tenant, path, stat.st_size, stat.st_mtime_ns))
        return found

    def quarantine_path(self, tenant: str) -> Path:
        return Path(self.quarantine_dir) / f"{tenant}.jsonl"

    def quarantine(self, tenant: str, rejections: Iterable[Rejection]) -> int:
        """Append rejected lines with file, line number and reason; returns how many."""
        path = self.quarantine_path(tenant)
        path.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        at = datetime.now(UTC).isoformat()
        with path.open("a", encoding="utf-8") as out:
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
