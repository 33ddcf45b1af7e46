"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions."""

import dagster as dg

from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.sensors import context_inbox_sensor
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.sensors import inbox_sensor
from mem_assets.reorg.assets import memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.checks import reorg_checks
from mem_assets.reorg.schedules import reorg_job, reorg_schedule
from mem_assets.resources import build_resources

#: Every tenant-partitioned stage, in lineage order; the main job runs them for one tenant.
tenant_pipeline = [memory_items, context_graph, graph_schema,
                   reorg_candidates, memory_clusters, summary_parents]

tend_memory_job = dg.define_asset_job(
    "tend_memory",
    selection=dg.AssetSelection.assets(*tenant_pipeline),
    description="Ingest, deduplicate and reorganize one tenant's memory graph.",
)

defs = dg.Definitions(
    assets=[*tenant_pipeline],
    asset_checks=[*reorg_checks],
    sensors=[inbox_sensor, context_inbox_sensor],
    schedules=[reorg_schedule],
    jobs=[tend_memory_job, reorg_job],
    resources=build_resources(),
)
