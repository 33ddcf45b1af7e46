"""The one rule for tenant names, and paths that must stay inside their configured roots.

A tenant name is a partition key, the ``user_name`` on every node, an inbox folder, a quarantine
file name and a backup folder, so every place a tenant enters (sensors, CLI, run config,
partition keys, restore) validates it here before using it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

TENANT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_TENANT = re.compile(TENANT_PATTERN)


class InvalidTenant(ValueError):
    """A tenant name that could escape a folder, clash with another tenant, or confuse a key."""


def is_valid_tenant(name: object) -> bool:
    """Full match only: no trailing newline (``$`` would accept one), no path separators."""
    return isinstance(name, str) and _TENANT.fullmatch(name) is not None


def validate_tenant(name: object) -> str:
    if not is_valid_tenant(name):
        raise InvalidTenant(f"invalid tenant name {name!r}: expected 1-64 characters of "
                            f"A-Z a-z 0-9 _ . - starting with a letter or digit ({TENANT_PATTERN})")
    assert isinstance(name, str)
    return name


#: A tenant name in a pydantic model or Dagster config.
TenantName = Annotated[str, AfterValidator(validate_tenant)]


class OutsideRoot(ValueError):
    """A path that resolves outside the folder it was configured under."""


def inside(root: str | Path, *parts: str) -> Path:
    """``root/parts…``, refused unless it resolves (symlinks followed) inside ``root``."""
    path = Path(root).joinpath(*parts)
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise OutsideRoot(f"{path} resolves outside {root}")
    return path
