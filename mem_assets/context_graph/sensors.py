"""New context files → one context-graph run (ingest + schema check) per tenant."""

import dagster as dg

from mem_assets.context_graph.loading import CONTEXT_FOLDER, ledger_key
from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.inbox_changes import request_changed_tenants
from mem_assets.ingest.ledger import not_yet_ingested
from mem_resources.neo4j_resource import Neo4jResource


def build_context_inbox_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(name="context_inbox_sensor", asset_selection=["context_graph", "graph_schema"],
               minimum_interval_seconds=30, default_status=default_status,
               description="One context-graph run (ingest and schema check) per tenant with new context/ files.")
    def context_inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource,
                             neo4j: Neo4jResource) -> dg.SensorResult:
        """One context run (ingest + schema check) per tenant with ``context/`` files not in the
        graph's ingest ledger."""
        return request_changed_tenants(
            context, inbox, lambda tenant: inbox.scan(tenant, CONTEXT_FOLDER), "context",
            lambda tenant, files: not_yet_ingested(neo4j, tenant, files, key_of=ledger_key))

    return context_inbox_sensor
