import json

import dagster as dg

from mem_assets.context_graph.assets import context_graph, graph_schema
from mem_assets.context_graph.ingest import context_files
from mem_assets.ingest.sensors import inbox_digest
from mem_assets.partitions import tenant_partitions
from mem_resources.inbox import InboxResource


@dg.sensor(
    asset_selection=[context_graph, graph_schema],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def context_inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource) -> dg.SensorResult:
    """One context run (ingest + schema check) per tenant whose ``context/`` files changed."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    known = set(context.instance.get_dynamic_partitions(tenant_partitions.name))
    new_tenants: list[str] = []
    requests: list[dg.RunRequest] = []
    for tenant in inbox.tenants():
        files = context_files(inbox, tenant)
        if not files:
            continue
        digest = inbox_digest([f.fingerprint for f in files])
        if seen.get(tenant) == digest:
            continue
        if tenant not in known:
            new_tenants.append(tenant)
        requests.append(dg.RunRequest(partition_key=tenant, run_key=f"context:{tenant}:{digest}"))
        seen[tenant] = digest
    partition_requests = [tenant_partitions.build_add_request(new_tenants)] if new_tenants else []
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests,
                           cursor=json.dumps(seen, sort_keys=True))
