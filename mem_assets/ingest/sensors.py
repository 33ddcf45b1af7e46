"""New inbox files → one ingest run per tenant."""

import dagster as dg

from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.inbox_changes import request_changed_tenants
from mem_assets.ingest.ledger import not_yet_ingested
from mem_resources.neo4j_resource import Neo4jResource


def build_inbox_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(name="inbox_sensor", asset_selection=["memory_items"], minimum_interval_seconds=30,
               default_status=default_status,
               description="One ingest run per tenant with inbox files not yet in the graph.")
    def inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource,
                     neo4j: Neo4jResource) -> dg.SensorResult:
        """One ingest run per tenant with inbox files not in the graph's ingest ledger (or entries
        to skip); new tenant folders become partitions."""
        return request_changed_tenants(
            context, inbox, inbox.scan, "ingest",
            lambda tenant, files: not_yet_ingested(neo4j, tenant, files))

    return inbox_sensor
