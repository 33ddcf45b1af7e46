import hashlib
import json
from collections.abc import Callable

import dagster as dg

from mem_assets.automation import default_sensor_status
from mem_assets.ingest.assets import memory_items
from mem_assets.partitions import tenant_partitions
from mem_resources.inbox import InboxFile, InboxResource, SkippedPath
from mem_resources.tenants import validate_tenant


def inbox_digest(fingerprints: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(fingerprints)).encode()).hexdigest()[:16]


def request_changed_tenants(context: dg.SensorEvaluationContext, inbox: InboxResource,
                            scan_of: Callable[[str], tuple[list[InboxFile], list[SkippedPath]]],
                            run_key_prefix: str) -> dg.SensorResult:
    """One run per tenant whose file set changed since the cursor; unknown tenants become
    partitions in the same tick. The run key carries the digest, so a file set triggers once.
    Skipped entries (links, FIFOs) count too, so that a run records why they were skipped."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    known = set(context.instance.get_dynamic_partitions(tenant_partitions.name))
    new_tenants: list[str] = []
    requests: list[dg.RunRequest] = []
    for tenant in map(validate_tenant, inbox.tenants()):
        files, skipped = scan_of(tenant)
        if not files and not skipped:
            continue
        digest = inbox_digest([f.fingerprint for f in [*files, *skipped]])
        if seen.get(tenant) == digest:
            continue
        if tenant not in known:
            new_tenants.append(tenant)
        requests.append(dg.RunRequest(partition_key=tenant,
                                      run_key=f"{run_key_prefix}:{tenant}:{digest}"))
        seen[tenant] = digest
    partition_requests = [tenant_partitions.build_add_request(new_tenants)] if new_tenants else []
    return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=partition_requests,
                           cursor=json.dumps(seen, sort_keys=True))


@dg.sensor(
    asset_selection=[memory_items],
    minimum_interval_seconds=30,
    default_status=default_sensor_status(),
)
def inbox_sensor(context: dg.SensorEvaluationContext, inbox: InboxResource) -> dg.SensorResult:
    """One ingest run per tenant whose inbox files changed; new tenant folders become partitions."""
    return request_changed_tenants(context, inbox, inbox.scan, "ingest")
