"""What the Dagster instance and the table store keep about a tenant, removed when it is dropped."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from mem_resources.neo4j_resource import PARTITION_TAG
from mem_resources.partitions import tenant_partitions
from mem_resources.table_io import TableIOManager


@dataclass(frozen=True)
class Forgotten:
    runs_deleted: int
    runs_in_progress: int
    tables_deleted: int
    partition_removed: bool


def forget_tenant(instance: dg.DagsterInstance, tenant: str,
                  tables: TableIOManager | None) -> Forgotten:
    """Delete the tenant's finished runs (with them their event logs: materializations, check
    results, previews that quote its memories), its stored step outputs and its partition, so a
    dropped tenant leaves nothing in the UI or the storage; its backups stay.

    Dagster OSS cannot wipe single partitions of an asset (``wipe_asset_partitions`` is not
    implemented for SQL storage), and every materialization of a tenant is recorded by one of
    that tenant's runs, so deleting those runs is what wipes them."""
    records = instance.get_run_records(dg.RunsFilter(tags={PARTITION_TAG: tenant}))
    finished = [record.dagster_run.run_id for record in records if record.dagster_run.is_finished]
    for run_id in finished:
        instance.delete_run(run_id)
    removed = tables.wipe_partition(instance.get_asset_keys(), tenant) if tables is not None else 0
    present = instance.has_dynamic_partition(tenant_partitions.name, tenant)
    if present:
        instance.delete_dynamic_partition(tenant_partitions.name, tenant)
    return Forgotten(len(finished), len(records) - len(finished), removed, present)
