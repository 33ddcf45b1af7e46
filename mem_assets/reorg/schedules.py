"""The nightly reorganization: one run per tenant that has enough new orphans.

Written by hand because ``build_schedule_from_partitioned_job`` refuses dynamic partitions.
"""

from datetime import UTC, datetime

import dagster as dg

from mem_assets.reorg import queries
from mem_assets.reorg.assets import (
    CandidatesConfig,
    memory_clusters,
    reorg_candidates,
    summary_parents,
)
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_partitions
from mem_resources.tenants import is_valid_tenant

reorg_job = dg.define_asset_job(
    "reorg_job",
    selection=dg.AssetSelection.assets(reorg_candidates, memory_clusters, summary_parents),
    executor_def=dg.in_process_executor,
    description="Cluster one tenant's orphan memories and write topic parents over them. "
                "In one process: the three steps form a chain, so separate processes only add start-up time.",
)


def eligible_tenants(neo4j: Neo4jResource, tenants: list[str], min_group_size: int) -> list[str]:
    """Tenants with a memory type that has enough new orphans, or work deferred by a past run."""
    with neo4j.session() as session:
        return [tenant for tenant in tenants
                if any(count.eligible(min_group_size)
                       for count in session.execute_read(queries.orphan_counts, tenant))]


def build_reorg_schedule(cron: str, default_status: dg.DefaultScheduleStatus) -> dg.ScheduleDefinition:
    @dg.schedule(name="reorg_schedule", cron_schedule=cron, job=reorg_job, execution_timezone="UTC",
                 default_status=default_status,
                 description="Nightly reorganization: one run per tenant with enough new orphan memories.")
    def reorg_schedule(context: dg.ScheduleEvaluationContext,
                       neo4j: Neo4jResource) -> list[dg.RunRequest] | dg.SkipReason:
        """One run per eligible tenant; the run key (day, tenant) keeps a day from running it twice."""
        day = (context.scheduled_execution_time or datetime.now(UTC)).strftime("%Y-%m-%d")
        tenants = [t for t in context.instance.get_dynamic_partitions(tenant_partitions.name)
                   if is_valid_tenant(t)]
        eligible = eligible_tenants(neo4j, tenants, CandidatesConfig().min_group_size)
        if not eligible:
            return dg.SkipReason(f"none of {len(tenants)} tenants has enough new orphan memories")
        return [dg.RunRequest(partition_key=tenant, run_key=f"reorg-{day}-{tenant}")
                for tenant in eligible]

    return reorg_schedule
