"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions."""

import dagster as dg

from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.sensors import inbox_sensor
from mem_assets.lifecycle.jobs import lifecycle_jobs, lifecycle_schedules
from mem_assets.partitions import tenant_partitions
from mem_assets.resources import build_resources

#: Every tenant-partitioned stage, in lineage order; the main job runs them for one tenant.
tenant_pipeline = [memory_items]

tend_memory_job = dg.define_asset_job(
    "tend_memory",
    selection=dg.AssetSelection.assets(*tenant_pipeline),
    partitions_def=tenant_partitions,
    description="Ingest, deduplicate and reorganize one tenant's memory graph.",
)

defs = dg.Definitions(
    assets=[*tenant_pipeline],
    sensors=[inbox_sensor],
    jobs=[tend_memory_job, *lifecycle_jobs],
    schedules=[*lifecycle_schedules],
    resources=build_resources(),
)
