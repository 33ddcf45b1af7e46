"""The inbox sensor: new tenants become partitions, changed inboxes trigger exactly one run, and
files the graph's ingest ledger already has trigger none (a fresh instance, a touched file)."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.sensors import build_inbox_sensor
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    write_inbox_file,
)

inbox_sensor = build_inbox_sensor(dg.DefaultSensorStatus.RUNNING)


def _tick(instance: dg.DagsterInstance, inbox: InboxResource, neo4j: Neo4jResource,
          cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, cursor=cursor,
                                 resources={"inbox": inbox, "neo4j": neo4j}) as context:
        result = inbox_sensor(context)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


def test_sensor_adds_tenants_and_requests_one_run_per_changed_tenant(tmp_path: Path, neo4j, tenant):
    alice, bob = f"{tenant}_alice", f"{tenant}_bob"
    root = tmp_path / "inbox"
    inbox = InboxResource(root=str(root), quarantine_dir=str(tmp_path / "q"))
    write_inbox_file(root, alice, "1.jsonl", [{"memory": "a"}])
    write_inbox_file(root, bob, "1.jsonl", [{"memory": "b"}])
    (root / "not a tenant!").mkdir()
    (root / f"{tenant}_carol").mkdir()

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", [bob])
        first = _tick(instance, inbox, neo4j, None)
        [add] = first.dynamic_partitions_requests
        assert list(add.partition_keys) == [alice]
        assert sorted(r.partition_key for r in first.run_requests) == [alice, bob]
        assert {alice, bob} <= set(instance.get_dynamic_partitions("tenants"))

        again = _tick(instance, inbox, neo4j, first.cursor)
        assert again.run_requests == [] and not again.dynamic_partitions_requests

        path = write_inbox_file(root, bob, "2.jsonl", [{"memory": "b2"}])
        third = _tick(instance, inbox, neo4j, again.cursor)
        [request] = third.run_requests
        assert request.partition_key == bob
        assert request.run_key not in {r.run_key for r in first.run_requests}

        os.utime(path, ns=(1, 1))
        fourth = _tick(instance, inbox, neo4j, third.cursor)
        assert [r.partition_key for r in fourth.run_requests] == [bob]


def test_files_already_in_the_ingest_ledger_request_nothing(tmp_path: Path, neo4j, tenant):
    root = tmp_path / "inbox"
    inbox = InboxResource(root=str(root), quarantine_dir=str(tmp_path / "q"))
    path = write_inbox_file(root, tenant, "1.jsonl", [{"memory": "The user likes tea."}])
    with dg.instance_for_test() as instance:
        assert materialize_partition([memory_items], tenant, instance,
                                     base_resources(neo4j, root, tmp_path / "q")).success

    with dg.instance_for_test() as fresh:
        first = _tick(fresh, inbox, neo4j, None)
        assert first.run_requests == []
        os.utime(path, ns=(1, 1))
        touched = _tick(fresh, inbox, neo4j, first.cursor)
        assert touched.run_requests == []
        write_inbox_file(root, tenant, "2.jsonl", [{"memory": "The user likes coffee."}])
        new_file = _tick(fresh, inbox, neo4j, touched.cursor)
        assert [r.partition_key for r in new_file.run_requests] == [tenant]
