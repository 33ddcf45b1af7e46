"""The pipeline against a Neo4j that requires a password, with credentials only in env vars.

Starts a second local server with authentication on (port ``MEMTEND_NEO4J_AUTH_PORT`` or a free
one, home ``<MEMTEND_NEO4J_HOME>_auth``), as a deployed Neo4j or Aura would be, and builds the
resources exactly as the code location does (``build_resources(load_settings())``).
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
from mem_assets.resources import build_resources
from mem_resources.local_servers import neo4j as local_neo4j
from mem_resources.settings import load_settings
from tests.support.dagster_server import MODEL_FREE_ENV, free_port
from tests.support.pipeline import materialize_partition

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "inbox" / "alice"
PASSWORD = "memtend-auth-test"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[local_neo4j.LocalNeo4jSettings]:
    settings = load_settings()
    if settings.neo4j_uri:
        pytest.skip("an external server is configured; the local launcher is not used")
    base = local_neo4j.LocalNeo4jSettings.from_settings(settings)
    settings = dataclasses.replace(
        base, home=base.home.with_name(base.home.name + "_auth"),
        port=int(os.environ.get("MEMTEND_NEO4J_AUTH_PORT") or free_port()),
        heap="512m", password=PASSWORD)
    already_running = local_neo4j.bolt_answers(settings.uri, auth=settings.auth)
    local_neo4j.up(settings)
    yield settings
    if not already_running:
        local_neo4j.down(settings)


def _environment(monkeypatch: pytest.MonkeyPatch, uri: str, password: str, tmp_path: Path) -> dict:
    """What a deployment sets; returns the code location's resources built from it."""
    for name, value in {"NEO4J_URI": uri, "NEO4J_USER": "neo4j", "NEO4J_PASSWORD": password,
                        "NEO4J_DATABASE": "neo4j", "MEMTEND_INBOX": str(tmp_path / "inbox"),
                        "MEMTEND_QUARANTINE": str(tmp_path / "q"), "MEMTEND_LLM": "offline",
                        "MEMTEND_EMBEDDER": "offline", **MODEL_FREE_ENV}.items():
        monkeypatch.setenv(name, value)
    return build_resources(load_settings())


def test_the_server_refuses_clients_without_the_password(auth_server):
    assert local_neo4j.bolt_answers(auth_server.uri, auth=auth_server.auth)
    assert not local_neo4j.bolt_answers(auth_server.uri)
    assert not local_neo4j.bolt_answers(auth_server.uri, auth=("neo4j", "not-the-password"))


def test_tend_memory_runs_with_credentials_from_env_vars(auth_server, monkeypatch, tmp_path, tenant):
    resources = _environment(monkeypatch, auth_server.uri, PASSWORD, tmp_path)
    shutil.copytree(SAMPLE, tmp_path / "inbox" / tenant)
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
    resources = _environment(monkeypatch, auth_server.uri, "wrong-password", tmp_path)
    shutil.copytree(SAMPLE, tmp_path / "inbox" / tenant)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", [tenant])
        result = dg.materialize(tenant_pipeline[:1], partition_key=tenant, instance=instance,
                                resources=resources, raise_on_error=False)
    assert not result.success
    errors = " ".join(event.event_specific_data.error.to_string() for event in result.all_events
                      if getattr(event.event_specific_data, "error", None) is not None)
    assert "Unauthorized" in errors or "authentication" in errors.lower(), errors
