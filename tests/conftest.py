"""Shared fixtures: a real Neo4j, started by the project unless NEO4J_URI names one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from mem_resources import local_neo4j
from mem_resources.neo4j_resource import Neo4jResource


@pytest.fixture(scope="session")
def neo4j_uri() -> Iterator[str]:
    """The server under test; one this session started is stopped again at the end."""
    if external := os.environ.get("NEO4J_URI"):
        yield external
        return
    settings = local_neo4j.LocalNeo4jSettings.from_env()
    already_running = local_neo4j.bolt_answers(settings.uri)
    uri = local_neo4j.up(settings)
    yield uri
    if not already_running:
        local_neo4j.down(settings)


@pytest.fixture(scope="session")
def neo4j(neo4j_uri: str) -> Iterator[Neo4jResource]:
    resource = Neo4jResource(
        uri=neo4j_uri,
        user=os.environ.get("NEO4J_USER", ""),
        password=os.environ.get("NEO4J_PASSWORD", ""),
        database=os.environ.get("NEO4J_DATABASE", "neo4j"),
    )
    yield resource
    resource.close()


@pytest.fixture
def tenant() -> str:
    """A tenant name no other test uses, so tests never see each other's data."""
    return f"t_{uuid.uuid4().hex[:10]}"
