"""Which tenants' inbox folders changed since a sensor's last tick: the ingest and context
sensors request one run per such tenant."""

from __future__ import annotations

import json
from collections.abc import Callable

import dagster as dg

from mem_assets.ingest.inbox import InboxFile, InboxResource, SkippedPath
from mem_resources.automation import add_unknown_tenants, digest
from mem_resources.tenants import validate_tenant


def request_changed_tenants(context: dg.SensorEvaluationContext, inbox: InboxResource,
                            scan_of: Callable[[str], tuple[list[InboxFile], list[SkippedPath]]],
                            run_key_prefix: str,
                            new_in_ledger: Callable[[str, list[InboxFile]], list[InboxFile]]
                            ) -> dg.SensorResult:
    """One run per tenant whose file set changed since the cursor and holds a file the graph's
    ingest ledger does not have (a fresh instance's empty cursor, a touched or renamed file
    request nothing) or an entry to skip (links, FIFOs: the run records why); unknown tenants
    become partitions in the same tick. The run key carries the digest, so a set triggers once."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    requests: list[dg.RunRequest] = []
    for tenant in map(validate_tenant, inbox.tenants()):
        files, skipped = scan_of(tenant)
        if not files and not skipped:
            continue
        files_digest = digest(f.fingerprint for f in [*files, *skipped])
        if seen.get(tenant) == files_digest:
            continue
        seen[tenant] = files_digest
        if not skipped and not new_in_ledger(tenant, files):
            continue
        requests.append(dg.RunRequest(partition_key=tenant,
                                      run_key=f"{run_key_prefix}:{tenant}:{files_digest}"))
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=add_unknown_tenants(context, [r.partition_key for r in requests]),
        cursor=json.dumps(seen, sort_keys=True))
