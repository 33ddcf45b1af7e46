"""The resource creates the constraints and indexes its queries rely on before the first query, on
any graph."""

import threading

import pytest
from neo4j.exceptions import Neo4jError

from mem_resources.constraints import _STATEMENTS, VectorIndexMismatchError
from mem_resources.neo4j_resource import Neo4jResource

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
    with pytest.raises(VectorIndexMismatchError, match=expected) as refused:
        _ = other.driver
    assert "memtend reembed --recreate-index" in str(refused.value)


def test_processes_creating_the_constraints_at_once_all_start(neo4j: Neo4jResource, neo4j_uri: str):
    """Runs of several tenants (or test workers) meeting a graph without the constraints and indexes: each creates
    it, none fails because another one got there first."""
    with neo4j.session() as session:
        for name in _STATEMENTS:
            session.run(f"DROP CONSTRAINT {name} IF EXISTS").consume()
            session.run(f"DROP INDEX {name} IF EXISTS").consume()
    starting = threading.Barrier(6)
    failures: list[Neo4jError] = []

    def start() -> None:
        resource = Neo4jResource(uri=neo4j_uri, database=neo4j.database)
        try:
            starting.wait()
            _ = resource.driver
        except Neo4jError as exc:
            failures.append(exc)
        finally:
            resource.close()

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert set(_STATEMENTS) <= _index_names(neo4j) | _constraint_names(neo4j)


def _constraint_names(resource: Neo4jResource) -> set[str]:
    with resource.session() as session:
        return {r["name"] for r in session.run("SHOW CONSTRAINTS YIELD name RETURN name")}
