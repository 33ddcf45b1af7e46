"""The Dagster UI as a real client: lineage, tenant partitions, sensors, schedules and a backfill.

Starts ``dagster-webserver`` and ``dagster-daemon`` from workspace.yaml and uses only GraphQL.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from mem_resources.neo4j_resource import Neo4jResource
from tests.support.dagster_server import (
    BIN,
    MODEL_FREE_ENV,
    ROOT,
    DagsterServer,
    dagster_webserver_and_daemon,
)
from tests.support.reorg_graph import graph_counts, write_memories
from tests.support.topic_corpus import topic_memories

REPOSITORY = {"repositoryLocationName": "memtend", "repositoryName": "__repository__"}
REORG_ASSETS = ["reorg_candidates", "memory_clusters", "summary_parents"]

ASSET_NODES = """
query {
  assetNodes {
    assetKey { path }
    groupName
    isPartitioned
    partitionDefinition { name type }
    dependencyKeys { path }
    dependedByKeys { path }
    assetChecksOrError { ... on AssetChecks { checks { name } } }
  }
}
"""

REPOSITORY_QUERY = """
query($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    ... on Repository {
      sensors { name }
      schedules { name cronSchedule scheduleState { status } }
      jobs { name }
    }
  }
}
"""

ADD_PARTITION = """
mutation($selector: RepositorySelector!, $key: String!) {
  addDynamicPartition(repositorySelector: $selector, partitionsDefName: "tenants", partitionKey: $key) {
    __typename
    ... on AddDynamicPartitionSuccess { partitionKey }
    ... on PythonError { message }
  }
}
"""

PARTITION_KEYS = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionKeys } }
}
"""

LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
  }
}
"""

BACKFILL_STATUS = """
query($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { status }
  }
}
"""

PARTITION_STATUSES = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses { materializedPartitions failedPartitions }
      }
    }
  }
}
"""


def _paths(keys: list[dict]) -> set[str]:
    return {"/".join(key["path"]) for key in keys}


@pytest.fixture(scope="module")
def server(neo4j_uri: str, tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("dagster_home")
    env = {**MODEL_FREE_ENV, "NEO4J_URI": neo4j_uri, "MEMTEND_AUTOMATION": "off", "MEMTEND_INBOX": str(home / "inbox"),
           "MEMTEND_QUARANTINE": str(home / "quarantine")}
    with dagster_webserver_and_daemon(home, env) as running:
        yield running


def test_assets_show_the_lineage_a_data_engineer_relies_on(server: DagsterServer):
    nodes = {"/".join(node["assetKey"]["path"]): node for node in server.graphql(ASSET_NODES)["assetNodes"]}
    assert _paths(nodes["reorg_candidates"]["dependencyKeys"]) == {"memory_items", "merged_nodes"}
    assert "reorg_candidates" in _paths(nodes["memory_items"]["dependedByKeys"])
    assert _paths(nodes["memory_clusters"]["dependencyKeys"]) == {"reorg_candidates"}
    assert _paths(nodes["summary_parents"]["dependencyKeys"]) == {"reorg_candidates", "memory_clusters"}
    assert _paths(nodes["memory_clusters"]["dependedByKeys"]) == {"summary_parents"}
    for name in ["memory_items", *REORG_ASSETS]:
        assert nodes[name]["isPartitioned"]
        assert nodes[name]["partitionDefinition"] == {"name": "tenants", "type": "DYNAMIC"}
    checks = {check["name"] for check in nodes["summary_parents"]["assetChecksOrError"]["checks"]}
    assert checks == {"parent_edges_acyclic", "parents_have_two_members", "one_parent_per_level",
                      "no_duplicate_parent_edges", "topics_have_no_archived_members", "no_near_duplicate_topics", "unplaced_memories_have_reasons"}


def test_sensors_schedules_and_jobs_are_listed(server: DagsterServer):
    repository = server.graphql(REPOSITORY_QUERY, {"selector": REPOSITORY})["repositoryOrError"]
    assert "inbox_sensor" in {sensor["name"] for sensor in repository["sensors"]}
    [schedule] = [s for s in repository["schedules"] if s["name"] == "reorg_schedule"]
    assert schedule["cronSchedule"] == "0 3 * * *"
    assert schedule["scheduleState"]["status"] == "STOPPED"  # the server runs with automation off
    assert {"reorg_job", "tend_memory"} <= {job["name"] for job in repository["jobs"]}


def _write_tenants(server: DagsterServer, neo4j: Neo4jResource, prefix: str, topics: set[str]) -> list[str]:
    tenants = [f"{prefix}_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    corpus = [text for topic, text in topic_memories(per_topic=15) if topic in topics]
    for tenant in tenants:
        write_memories(neo4j, tenant, corpus)
        added = server.graphql(ADD_PARTITION, {"selector": REPOSITORY, "key": tenant})
        assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess"
    return tenants


def _partition_statuses(server: DagsterServer, asset: str) -> dict[str, list[str]]:
    statuses = server.graphql(PARTITION_STATUSES, {"key": {"path": [asset]}})
    return statuses["assetNodeOrError"]["assetPartitionStatuses"]


def test_backfills_from_graphql_and_from_the_cli_reorganize_every_listed_tenant(
        server: DagsterServer, neo4j: Neo4jResource):
    ui_tenants = _write_tenants(server, neo4j, "ui", {"cooking", "music"})
    cli_tenants = _write_tenants(server, neo4j, "cli", {"travel", "fitness"})
    keys = server.graphql(PARTITION_KEYS, {"key": {"path": ["reorg_candidates"]}})
    assert set(ui_tenants + cli_tenants) <= set(keys["assetNodeOrError"]["partitionKeys"])

    launched = server.graphql(LAUNCH_BACKFILL, {"params": {
        "assetSelection": [{"path": [name]} for name in REORG_ASSETS],
        "partitionNames": ui_tenants,
        "title": "reorganize two tenants",
    }})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    command = [str(BIN / "dagster"), "job", "backfill", "-w", "workspace.yaml", "-l", "memtend",
               "-j", "reorg_job", "--partitions", ",".join(cli_tenants), "--noprompt"]
    done = subprocess.run(command, cwd=ROOT, env=server.env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr

    deadline = time.monotonic() + 480
    status = "REQUESTED"
    while time.monotonic() < deadline:
        status = server.graphql(BACKFILL_STATUS, {"id": launched["backfillId"]})[
            "partitionBackfillOrError"]["status"]
        finished = set().union(*_partition_statuses(server, "summary_parents").values())
        if status not in {"REQUESTED", "CANCELING", "FAILING"} and set(cli_tenants) <= finished:
            break
        time.sleep(3)
    assert status in {"COMPLETED", "COMPLETED_SUCCESS"}, f"backfill ended {status}; logs in {server.home}"

    for name in REORG_ASSETS:
        partitions = _partition_statuses(server, name)
        assert set(ui_tenants + cli_tenants) <= set(partitions["materializedPartitions"]), name
        assert not set(ui_tenants + cli_tenants) & set(partitions["failedPartitions"])
    for tenant in ui_tenants + cli_tenants:
        assert graph_counts(neo4j, tenant)["topics"] >= 2
