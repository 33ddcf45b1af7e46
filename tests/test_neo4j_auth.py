"""The pipeline against a Neo4j that requires a password, with credentials only in env vars.

Starts a second local server with authentication on (port ``MEMTEND_NEO4J_AUTH_PORT`` or a free
one, home ``<MEMTEND_NEO4J_HOME>_auth``), as a deployed Neo4j or Aura would be.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from neo4j import GraphDatabase

from mem_assets.definitions import tenant_pipeline
from mem_resources import env_config, local_neo4j
from mem_resources.embedder import HashingEmbedder
from mem_resources.inbox import InboxResource
from mem_resources.judges import OfflineJudge
from mem_resources.summarizers import ExtractiveSummarizer
from tests.support.dagster_server import free_port
from tests.support.pipeline import materialize_partition

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "inbox" / "alice"
PASSWORD = "memtend-auth-test"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[local_neo4j.LocalNeo4jSettings]:
    if os.environ.get("NEO4J_URI"):
        pytest.skip("an external server is configured; the local launcher is not used")
    base = local_neo4j.LocalNeo4jSettings.from_env()
    settings = dataclasses.replace(
        base, home=base.home.with_name(base.home.name + "_auth"),
        port=int(os.environ.get("MEMTEND_NEO4J_AUTH_PORT") or free_port()),
        heap="512m", password=PASSWORD)
    already_running = local_neo4j.bolt_answers(settings.uri, auth=settings.auth)
    local_neo4j.up(settings)
    yield settings
    if not already_running:
        local_neo4j.down(settings)


def _resources(environ: dict[str, str], tmp_path: Path) -> dict:
    neo4j = env_config.neo4j_resource(environ, default_uri="bolt://127.0.0.1:1")
    return {"neo4j": neo4j, "embedder": HashingEmbedder(dimension=neo4j.embedding_dimension),
            "judge": OfflineJudge(), "summarizer": ExtractiveSummarizer(),
            "inbox": InboxResource(root=str(tmp_path / "inbox"), quarantine_dir=str(tmp_path / "q"))}


def _set_credentials(monkeypatch: pytest.MonkeyPatch, uri: str, password: str) -> dict[str, str]:
    for name, value in {"NEO4J_URI": uri, "NEO4J_USER": "neo4j", "NEO4J_PASSWORD": password,
                        "NEO4J_DATABASE": "neo4j"}.items():
        monkeypatch.setenv(name, value)
    return dict(os.environ)


def test_the_server_refuses_clients_without_the_password(auth_server):
    assert local_neo4j.bolt_answers(auth_server.uri, auth=auth_server.auth)
    assert not local_neo4j.bolt_answers(auth_server.uri)
    assert not local_neo4j.bolt_answers(auth_server.uri, auth=("neo4j", "not-the-password"))


def test_tend_memory_runs_with_credentials_from_env_vars(auth_server, monkeypatch, tmp_path, tenant):
    environ = _set_credentials(monkeypatch, auth_server.uri, PASSWORD)
    shutil.copytree(SAMPLE, tmp_path / "inbox" / tenant)
    resources = _resources(environ, tmp_path)
    for field in ("uri", "user", "password", "database"):
        assert isinstance(getattr(resources["neo4j"], field), dg.EnvVar), field

    with dg.instance_for_test() as instance:
        assert materialize_partition(tenant_pipeline, tenant, instance, resources).success

    with GraphDatabase.driver(auth_server.uri, auth=auth_server.auth) as driver:
        records, _, _ = driver.execute_query(
            "MATCH (m:MemoryItem {user_name: $t}) RETURN m.type AS type, count(*) AS n", t=tenant)
        driver.execute_query("MATCH (n {user_name: $t}) DETACH DELETE n", t=tenant)
    counts = {row["type"] or "fact": row["n"] for row in records}
    assert counts.get("fact", 0) > 50 and counts.get("topic", 0) >= 2, counts


def test_a_wrong_password_in_the_environment_fails_the_run(auth_server, monkeypatch, tmp_path, tenant):
    environ = _set_credentials(monkeypatch, auth_server.uri, "wrong-password")
    shutil.copytree(SAMPLE, tmp_path / "inbox" / tenant)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", [tenant])
        result = dg.materialize(tenant_pipeline[:1], partition_key=tenant, instance=instance,
                                resources=_resources(environ, tmp_path), raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data.error
    assert "Unauthorized" in failure.to_string() or "authentication" in failure.to_string().lower()
