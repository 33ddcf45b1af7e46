"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions."""

import dagster as dg

from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.sensors import context_inbox_sensor
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.sensors import inbox_sensor
from mem_assets.lifecycle.jobs import lifecycle_jobs, lifecycle_schedules
from mem_assets.resources import build_resources

#: Every tenant-partitioned stage, in lineage order; the main job runs them for one tenant.
tenant_pipeline = [memory_items, context_graph, graph_schema]

tend_memory_job = dg.define_asset_job(
    "tend_memory",
    selection=dg.AssetSelection.assets(*tenant_pipeline),
    description="Ingest, deduplicate and reorganize one tenant's memory graph.",
)

defs = dg.Definitions(
    assets=[*tenant_pipeline],
    sensors=[inbox_sensor, context_inbox_sensor],
    jobs=[tend_memory_job, *lifecycle_jobs],
    schedules=[*lifecycle_schedules],
    resources=build_resources(),
)
