"""The resource creates the schema its queries rely on before the first query, on any graph."""

import pytest

from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.schema import SchemaMismatchError

#: Changes the database's indexes, which every other test relies on: runs alone (Makefile).
pytestmark = pytest.mark.serial


def _index_names(resource: Neo4jResource) -> set[str]:
    with resource.session() as session:
        return {r["name"] for r in session.run("SHOW INDEXES YIELD name RETURN name")}


def test_first_use_recreates_missing_indexes(neo4j: Neo4jResource, neo4j_uri: str):
    with neo4j.session() as session:
        session.run("DROP INDEX memory_type IF EXISTS").consume()
    fresh = Neo4jResource(uri=neo4j_uri, database=neo4j.database)
    try:
        assert {"memory_type", "memory_embedding", "memory_tenant_status",
                "memory_tenant_type_status"} <= _index_names(fresh)
    finally:
        fresh.close()


def test_an_embedder_of_another_dimension_is_refused(neo4j: Neo4jResource, neo4j_uri: str):
    other = Neo4jResource(uri=neo4j_uri, database=neo4j.database, embedding_dimension=8)
    expected = rf"holds {neo4j.embedding_dimension}-dim vectors, but the configured embedder gives 8-dim"
    with pytest.raises(SchemaMismatchError, match=expected) as refused:
        _ = other.driver
    assert "memtend reembed --recreate-index" in str(refused.value)
