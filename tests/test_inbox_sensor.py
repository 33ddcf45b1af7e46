"""The inbox sensor: new tenants become partitions, changed inboxes trigger exactly one run."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from mem_assets.ingest.sensors import build_inbox_sensor

inbox_sensor = build_inbox_sensor(dg.DefaultSensorStatus.RUNNING)
from mem_resources.inbox import InboxResource
from tests.support.pipeline import write_inbox_file


def _tick(instance: dg.DagsterInstance, inbox: InboxResource, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"inbox": inbox})
    result = inbox_sensor(context)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_sensor_adds_tenants_and_requests_one_run_per_changed_tenant(tmp_path: Path):
    root = tmp_path / "inbox"
    inbox = InboxResource(root=str(root), quarantine_dir=str(tmp_path / "q"))
    write_inbox_file(root, "alice", "1.jsonl", [{"memory": "a"}])
    write_inbox_file(root, "bob", "1.jsonl", [{"memory": "b"}])
    (root / "not a tenant!").mkdir()
    (root / "carol").mkdir()

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", ["bob"])
        first = _tick(instance, inbox, None)
        [add] = first.dynamic_partitions_requests
        assert list(add.partition_keys) == ["alice"]
        assert sorted(r.partition_key for r in first.run_requests) == ["alice", "bob"]
        assert set(instance.get_dynamic_partitions("tenants")) == {"alice", "bob"}

        again = _tick(instance, inbox, first.cursor)
        assert again.run_requests == [] and not again.dynamic_partitions_requests

        path = write_inbox_file(root, "bob", "2.jsonl", [{"memory": "b2"}])
        third = _tick(instance, inbox, again.cursor)
        [request] = third.run_requests
        assert request.partition_key == "bob"
        assert request.run_key not in {r.run_key for r in first.run_requests}

        os.utime(path, ns=(1, 1))
        fourth = _tick(instance, inbox, third.cursor)
        assert [r.partition_key for r in fourth.run_requests] == ["bob"]
