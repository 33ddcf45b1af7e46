import hashlib
import json

import dagster as dg

from mem_assets.ingest.assets import memory_items
from mem_assets.partitions import tenant_partitions
from mem_resources.inbox import InboxResource


def inbox_digest(fingerprints: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(fingerprints)).encode()).hexdigest()[:16]


@dg.sensor(
    asset_selection=[memory_items],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource) -> dg.SensorResult:
    """One ingest run per tenant whose inbox files changed; new tenant folders become partitions."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    known = set(context.instance.get_dynamic_partitions(tenant_partitions.name))
    new_tenants: list[str] = []
    requests: list[dg.RunRequest] = []
    for tenant in inbox.tenants():
        files = inbox.files(tenant)
        if not files:
            continue
        digest = inbox_digest([f.fingerprint for f in files])
        if seen.get(tenant) == digest:
            continue
        if tenant not in known:
            new_tenants.append(tenant)
        requests.append(dg.RunRequest(partition_key=tenant, run_key=f"ingest:{tenant}:{digest}"))
        seen[tenant] = digest
    partition_requests = [tenant_partitions.build_add_request(new_tenants)] if new_tenants else []
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests,
                           cursor=json.dumps(seen, sort_keys=True))
