"""New context files → one context-graph run (ingest + schema check) per tenant."""

import dagster as dg

from mem_assets.context_graph.loading import context_files
from mem_resources.automation import request_changed_tenants
from mem_resources.inbox import InboxResource


def build_context_inbox_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(name="context_inbox_sensor", asset_selection=["context_graph", "graph_schema"],
               minimum_interval_seconds=30, default_status=default_status)
    def context_inbox_sensor(context: dg.SensorEvaluationContext,
                             inbox: InboxResource) -> dg.SensorResult:
        """One context run (ingest + schema check) per tenant whose ``context/`` files changed."""
        return request_changed_tenants(context, inbox, lambda tenant: context_files(inbox, tenant),
                                       "context")

    return context_inbox_sensor
