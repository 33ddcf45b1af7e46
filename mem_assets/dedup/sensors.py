"""Sensor: one dedup run per tenant with unchecked nodes, whoever wrote them."""

import json

import dagster as dg

from mem_assets.dedup import queries
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_resources.automation import add_unknown_tenants, digest
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.tenants import is_valid_tenant

dedup_job = dg.define_asset_job(
    "dedup",
    selection=dg.AssetSelection.assets(dedup_candidates, relation_judgments, merged_nodes),
    description="Find, judge and resolve repeats and contradictions among one tenant's new nodes.",
)


def plan_requests(pending: dict[str, list[str]], requested: dict[str, str]
                  ) -> tuple[list[str], dict[str, str]]:
    """Tenants to run now and the new cursor: a tenant is requested again only when its set of
    unchecked nodes changed since the last request (so a failing judge does not loop)."""
    cursor = {tenant: digest for tenant, digest in requested.items() if tenant in pending}
    to_run = []
    for tenant in sorted(pending):
        pending_digest = digest(pending[tenant])
        if cursor.get(tenant) != pending_digest:
            to_run.append(tenant)
            cursor[tenant] = pending_digest
    return to_run, cursor


def build_dedup_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(name="dedup_sensor", job=dedup_job, minimum_interval_seconds=30,
               default_status=default_status,
               description="One dedup run per tenant whose unchecked memories changed, whoever wrote them.")
    def dedup_sensor(context: dg.SensorEvaluationContext, neo4j: Neo4jResource) -> dg.SensorResult:
        """Finds tenants with unchecked activated nodes (also ones written by other writers straight
        into Neo4j), adds unknown tenants as partitions and requests one dedup run per tenant."""
        requested: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        with neo4j.session() as session:
            pending = session.execute_read(queries.pending_by_tenant)
        for tenant in [t for t in pending if not is_valid_tenant(t)]:
            context.log.warning(f"ignoring nodes with user_name {tenant!r}: not a valid tenant name")
            del pending[tenant]
        to_run, cursor = plan_requests(pending, requested)
        return dg.SensorResult(
            run_requests=[dg.RunRequest(partition_key=t, run_key=f"dedup:{t}:{cursor[t]}")
                          for t in to_run],
            dynamic_partitions_requests=add_unknown_tenants(context, to_run),
            cursor=json.dumps(cursor, sort_keys=True),
        )

    return dedup_sensor
