"""Shared fixtures: a real Neo4j, started by the project unless NEO4J_URI names one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import dagster as dg
import pytest

from mem_resources import local_neo4j
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings


@pytest.fixture(scope="session")
def neo4j_uri() -> Iterator[str]:
    """The server under test; one this session started is stopped again at the end."""
    settings = load_settings()
    if settings.neo4j_uri:
        yield settings.neo4j_uri
        return
    local = local_neo4j.LocalNeo4jSettings.from_settings(settings)
    already_running = local_neo4j.bolt_answers(local.uri)
    uri = local_neo4j.up(local)
    yield uri
    if not already_running:
        local_neo4j.down(local)


@pytest.fixture(scope="session")
def neo4j(neo4j_uri: str) -> Iterator[Neo4jResource]:
    resource = Neo4jResource.from_settings(load_settings().model_copy(update={"neo4j_uri": neo4j_uri}))
    yield resource
    resource.close()


@pytest.fixture
def tenant() -> str:
    """A tenant name no other test uses, so tests never see each other's data."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """A throwaway Dagster instance (its own temp storage) per test."""
    with dg.instance_for_test() as test_instance:
        yield test_instance
