"""One shape for every graph-invariant check: pass when no offender, else count and examples."""

from typing import Any

import dagster as dg


def offenders_result(offenders: list[Any], what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not offenders,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(offenders)} {what}" if offenders else None,
        metadata={"offenders": len(offenders), "examples": dg.MetadataValue.json(offenders[:10])},
    )
