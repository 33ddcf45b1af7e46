"""What sensors of several domains share: change digests, tenant partitions added on the fly,
and the default status every sensor and schedule starts with (``MEMTEND_AUTOMATION``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

import dagster as dg

from mem_resources.inbox import InboxFile, InboxResource
from mem_resources.partitions import tenant_partitions


def sensor_status(on: bool) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if on else dg.DefaultSensorStatus.STOPPED


def schedule_status(on: bool) -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if on else dg.DefaultScheduleStatus.STOPPED


def digest(items: Iterable[str]) -> str:
    """Order-independent short digest of a set of strings (file fingerprints, node ids)."""
    return hashlib.sha256("\n".join(sorted(items)).encode()).hexdigest()[:16]


def add_unknown_tenants(context: dg.SensorEvaluationContext,
                        tenants: Iterable[str]) -> list[dg.AddDynamicPartitionsRequest]:
    """Partitions for tenants the instance does not know yet, added in the same tick."""
    known = set(context.instance.get_dynamic_partitions(tenant_partitions.name))
    new = sorted(set(tenants) - known)
    return [tenant_partitions.build_add_request(new)] if new else []


def request_changed_tenants(context: dg.SensorEvaluationContext, inbox: InboxResource,
                            files_of: Callable[[str], list[InboxFile]],
                            run_key_prefix: str) -> dg.SensorResult:
    """One run per tenant whose file set changed since the cursor; unknown tenants become
    partitions in the same tick. The run key carries the digest, so a file set triggers once."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    requests: list[dg.RunRequest] = []
    for tenant in inbox.tenants():
        files = files_of(tenant)
        if not files:
            continue
        files_digest = digest(f.fingerprint for f in files)
        if seen.get(tenant) == files_digest:
            continue
        requests.append(dg.RunRequest(partition_key=tenant,
                                      run_key=f"{run_key_prefix}:{tenant}:{files_digest}"))
        seen[tenant] = files_digest
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=add_unknown_tenants(context, [r.partition_key for r in requests]),
        cursor=json.dumps(seen, sort_keys=True))
