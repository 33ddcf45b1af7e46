import dagster as dg

from mem_assets.automation import default_sensor_status
from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.ingest import CONTEXT_FOLDER
from mem_assets.ingest.sensors import request_changed_tenants
from mem_resources.inbox import InboxResource


@dg.sensor(
    asset_selection=[context_graph, graph_schema],
    minimum_interval_seconds=30,
    default_status=default_sensor_status(),
)
def context_inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource) -> dg.SensorResult:
    """One context run (ingest + schema check) per tenant whose ``context/`` files changed."""
    return request_changed_tenants(context, inbox, lambda tenant: inbox.scan(tenant, CONTEXT_FOLDER),
                                   "context")
