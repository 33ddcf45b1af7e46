"""What sensors of several domains share: change digests, tenant partitions added on the fly,
and the default status every sensor and schedule starts with (``MEMTEND_AUTOMATION``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import dagster as dg

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
