"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions.

Settings are read once, here, when the code location loads; everything below takes them as
arguments.
"""

import dagster as dg

from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.sensors import build_context_inbox_sensor
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.sensors import build_dedup_sensor, dedup_job
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.sensors import build_inbox_sensor
from mem_assets.lifecycle.jobs import lifecycle_jobs, lifecycle_schedules
from mem_assets.planning import plan_job, tenant_plan
from mem_assets.reorg.assets import memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.checks import reorg_checks
from mem_assets.reorg.schedules import build_reorg_schedule, reorg_job
from mem_assets.resources import build_resources
from mem_resources.automation import schedule_status, sensor_status
from mem_resources.settings import Settings, load_settings

#: Every tenant-partitioned stage, in lineage order; the main job runs them for one tenant.
tenant_pipeline = [memory_items, context_graph, dedup_candidates, relation_judgments, merged_nodes,
                   reorg_candidates, memory_clusters, summary_parents, graph_schema]

tend_memory_job = dg.define_asset_job(
    "tend_memory",
    selection=dg.AssetSelection.assets(*tenant_pipeline),
    description="Ingest, deduplicate and reorganize one tenant's memory graph.",
)


def build_definitions(settings: Settings) -> dg.Definitions:
    """Sensors and schedules start running unless ``MEMTEND_AUTOMATION=off``."""
    sensors = sensor_status(settings.automation_on)
    return dg.Definitions(
        assets=[*tenant_pipeline, tenant_plan],
        asset_checks=[*dedup_checks, *reorg_checks],
        sensors=[build_inbox_sensor(sensors), build_context_inbox_sensor(sensors),
                 build_dedup_sensor(sensors)],
        schedules=[build_reorg_schedule(settings.reorg_cron, schedule_status(settings.automation_on)),
                   *lifecycle_schedules],
        jobs=[tend_memory_job, dedup_job, reorg_job, plan_job, *lifecycle_jobs],
        resources=build_resources(settings),
        executor=dg.in_process_executor if settings.executor == "in_process"
        else dg.multiprocess_executor,
    )


settings = load_settings()
defs = build_definitions(settings)
