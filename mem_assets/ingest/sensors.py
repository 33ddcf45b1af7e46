"""New inbox files → one ingest run per tenant."""

import dagster as dg

from mem_resources.automation import request_changed_tenants
from mem_resources.inbox import InboxResource


def build_inbox_sensor(default_status: dg.DefaultSensorStatus) -> dg.SensorDefinition:
    @dg.sensor(name="inbox_sensor", asset_selection=["memory_items"], minimum_interval_seconds=30,
               default_status=default_status)
    def inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource) -> dg.SensorResult:
        """One ingest run per tenant whose inbox files changed; new tenant folders become partitions."""
        return request_changed_tenants(context, inbox, inbox.files, "ingest")

    return inbox_sensor
