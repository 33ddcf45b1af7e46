"""Where tenant backups are written: a local folder (mount network storage there to keep them
off the machine)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from mem_resources.settings import DEFAULT_BACKUP_DIR


class BackupStorage(ConfigurableResource):
    """Root folder of ``<tenant>/<backup_id>/`` backups (``MEMTEND_BACKUP_DIR``)."""

    root: str = DEFAULT_BACKUP_DIR

    @property
    def path(self) -> Path:
        return Path(self.root)
