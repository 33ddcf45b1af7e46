"""Metadata shapes every domain shares: preview tables, histograms and invariant-check results."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd

PREVIEW_ROWS = 20
CELL_CHARS = 120


def _cell(value: Any) -> str | int | float | bool:
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float | np.floating):
        return round(float(value), 3)
    return str(value)[:CELL_CHARS]


def preview_table(rows: pd.DataFrame | Iterable[Mapping[str, Any]], columns: Sequence[str],
                  limit: int = PREVIEW_ROWS) -> dg.MetadataValue:
    """The first ``limit`` rows as a Dagster table (sortable in the UI, no markdown escaping)."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=list(columns))
    head = frame[list(columns)].head(limit) if len(frame) else pd.DataFrame(columns=list(columns))
    records = [dg.TableRecord({c: _cell(v) for c, v in zip(columns, row, strict=True)})
               for row in head.itertuples(index=False)]
    return dg.MetadataValue.table(records=records,
                                  schema=dg.TableSchema(columns=[dg.TableColumn(c) for c in columns]))


def histogram(values: pd.Series | Sequence[float], bins: int = 10,
              value_range: tuple[float, float] = (0.0, 1.0), label: str = "value") -> dg.MetadataValue:
    """Counts per equal-width bin, as a table (empty bins left out)."""
    counts, edges = np.histogram(np.asarray(values, dtype=float), bins=bins, range=value_range)
    rows = [{label: f"{lo:.1f}–{hi:.1f}", "count": int(n)}
            for lo, hi, n in zip(edges, edges[1:], counts, strict=False) if n]
    return preview_table(rows, [label, "count"], limit=bins)


def count_table(counts: Mapping[Any, int], label: str) -> dg.MetadataValue:
    """How many of each value, e.g. clusters per size, as a table sorted by value."""
    rows = [{label: key, "count": int(n)} for key, n in sorted(counts.items())]
    return preview_table(rows, [label, "count"], limit=max(len(rows), 1))


def offenders_result(offenders: list[Any], what: str) -> dg.AssetCheckResult:
    """One shape for every graph-invariant check: pass when no offender, else count and examples."""
    return dg.AssetCheckResult(
        passed=not offenders,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(offenders)} {what}" if offenders else None,
        metadata={"offenders": len(offenders), "examples": dg.MetadataValue.json(offenders[:10])},
    )


def change_marker(context: dg.AssetExecutionContext, changed: bool) -> dict[str, dg.MetadataValue]:
    """``changed``, and ``last_change``: a link to this run when it changed the graph, else to the
    run that last did for this partition.

    An idle rerun (nothing new, nothing written) is still materialized, so the partition stays
    up to date for sensors, backfills and downstream assets; its metadata then says "nothing
    changed" and links to the run whose counts and previews are worth reading, instead of the
    run being skipped and the partition looking stale."""
    run_id: str | None = context.run.run_id
    if not changed:
        records = context.instance.fetch_materializations(dg.AssetRecordsFilter(
            asset_key=context.asset_key, asset_partitions=[context.partition_key]), limit=1).records
        previous = records[0].asset_materialization.metadata.get("last_change") if records else None
        run_id = previous.run_id if isinstance(previous, dg.DagsterRunMetadataValue) else None
    marker = {"changed": dg.MetadataValue.bool(changed)}
    if run_id is not None:
        marker["last_change"] = dg.MetadataValue.dagster_run(run_id)
    return marker
