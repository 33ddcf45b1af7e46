"""Shared fixtures: a real Neo4j (started by the project unless NEO4J_URI is set)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from mem_resources.local_neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    return ensure_neo4j_uri()


@pytest.fixture(scope="session")
def neo4j(neo4j_uri: str) -> Iterator[Neo4jResource]:
    resource = Neo4jResource(uri=neo4j_uri)
    resource.ensure_schema()
    yield resource
    resource.close()


@pytest.fixture
def tenant() -> str:
    """A tenant name no other test uses, so tests never see each other's data."""
    return f"t_{uuid.uuid4().hex[:10]}"
