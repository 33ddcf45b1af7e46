"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions."""

import dagster as dg

from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.sensors import context_inbox_sensor
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.sensors import dedup_job, dedup_sensor
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.sensors import inbox_sensor
from mem_assets.lifecycle.jobs import lifecycle_jobs, lifecycle_schedules
from mem_assets.reorg.assets import memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.checks import reorg_checks
from mem_assets.reorg.schedules import reorg_job, reorg_schedule
from mem_assets.resources import build_resources

#: Every tenant-partitioned stage, in lineage order; the main job runs them for one tenant.
tenant_pipeline = [memory_items, context_graph, dedup_candidates, relation_judgments, merged_nodes,
                   reorg_candidates, memory_clusters, summary_parents, graph_schema]

tend_memory_job = dg.define_asset_job(
    "tend_memory",
    selection=dg.AssetSelection.assets(*tenant_pipeline),
    description="Ingest, deduplicate and reorganize one tenant's memory graph.",
)

defs = dg.Definitions(
    assets=[*tenant_pipeline],
    asset_checks=[*dedup_checks, *reorg_checks],
    sensors=[inbox_sensor, context_inbox_sensor, dedup_sensor],
    schedules=[reorg_schedule, *lifecycle_schedules],
    jobs=[tend_memory_job, dedup_job, reorg_job, *lifecycle_jobs],
    resources=build_resources(),
)
