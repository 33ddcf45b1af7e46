"""Switching embedders on a live graph: a clear refusal that says how to migrate, and
`memtend reembed` re-embedding a tenant in place on the real Neo4j."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from typer.testing import CliRunner

from mem_assets.cli import app
from mem_resources import constraints
from mem_resources.constraints import VectorIndexMismatchError
from mem_resources.embedder import HashingEmbedder, WordLlamaEmbedder
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.lifecycle import seed_tenant

#: Changes the database's indexes, which every other test relies on: runs alone (Makefile).
pytestmark = pytest.mark.serial


def _index_dimension(neo4j: Neo4jResource) -> int | None:
    with neo4j.session() as session:
        return constraints.vector_index_dimension(session)


def _nodes(neo4j: Neo4jResource, tenant: str) -> dict[str, dict]:
    with neo4j.session() as session:
        return {r["id"]: r["p"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t}) RETURN m.id AS id, properties(m) AS p", t=tenant)}


@pytest.fixture
def graph_of_the_old_embedder(neo4j: Neo4jResource, tenant: str) -> Iterator[str]:
    """A tenant whose memories carry 384-dim hashing vectors, under a 384-dim index."""
    seed_tenant(neo4j, tenant, memory_count=6)
    old = HashingEmbedder(dimension=384)
    with neo4j.session() as session:
        texts = session.run("MATCH (m:MemoryItem {user_name: $t}) RETURN m.id AS id, m.memory AS text",
                            t=tenant).data()
        session.run("UNWIND $rows AS row MATCH (m:MemoryItem {user_name: $t, id: row.id}) "
                    "SET m.embedding = row.embedding", t=tenant,
                    rows=[{"id": r["id"], "embedding": v.tolist()}
                          for r, v in zip(texts, old.embed([r["text"] for r in texts]), strict=True)]
                    ).consume()
        session.run(f"DROP INDEX {constraints.VECTOR_INDEX}").consume()
        constraints.ensure(session, 384)
    neo4j.close()
    try:
        yield tenant
    finally:
        neo4j.recreate_vector_index()  # back to the shared resource's dimension for other tests


def test_an_index_of_another_dimension_is_refused_with_the_migration(
        neo4j: Neo4jResource, neo4j_uri: str, graph_of_the_old_embedder: str,
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    fresh = Neo4jResource(uri=neo4j_uri, database=neo4j.database, embedding_dimension=256)
    with pytest.raises(VectorIndexMismatchError, match="holds 384-dim vectors.*gives 256-dim") as refused:
        fresh.driver  # noqa: B018 - first use creates the driver and checks the vector index
    assert "memtend reembed --recreate-index" in str(refused.value)

    without_index = CliRunner().invoke(app, ["reembed", graph_of_the_old_embedder])
    assert without_index.exit_code == 2
    assert "memtend reembed --recreate-index" in without_index.output


def test_reembed_recreates_the_index_and_re_embeds_the_tenant_in_place(
        neo4j: Neo4jResource, neo4j_uri: str, graph_of_the_old_embedder: str,
        monkeypatch: pytest.MonkeyPatch):
    tenant = graph_of_the_old_embedder
    old_graph = Neo4jResource(uri=neo4j_uri, database=neo4j.database, embedding_dimension=384)
    try:
        before = _nodes(old_graph, tenant)
    finally:
        old_graph.close()
    assert {len(p["embedding"]) for p in before.values()} == {384}
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    monkeypatch.setenv("MEMTEND_EMBEDDER", "offline")

    result = CliRunner().invoke(app, ["reembed", "--recreate-index", tenant])

    assert result.exit_code == 0, result.output
    assert "vector index recreated with 256 dimensions" in result.output
    assert f"{tenant}: {len(before)} memories re-embedded" in result.output
    assert _index_dimension(neo4j) == 256
    after = _nodes(neo4j, tenant)
    assert set(after) == set(before)
    expected = WordLlamaEmbedder().embed([after[i]["memory"] for i in sorted(after)])
    got = np.asarray([after[i]["embedding"] for i in sorted(after)], dtype=np.float32)
    assert np.allclose(got, expected, atol=1e-5)
    def strip(props: dict) -> dict:
        return {k: v for k, v in props.items() if k != "embedding"}

    assert {i: strip(p) for i, p in after.items()} == {i: strip(p) for i, p in before.items()}

    probe = next(i for i in sorted(after) if after[i]["memory_type"] == "LongTermMemory")
    with neo4j.session() as session:
        hits = session.run(
            "CALL db.index.vector.queryNodes($index, 50, $vector) YIELD node "
            "WHERE node.user_name = $t RETURN collect(node.id) AS ids",
            index=constraints.VECTOR_INDEX, vector=after[probe]["embedding"], t=tenant).single()["ids"]
    assert probe in hits  # the recreated index serves the new vectors

    again = CliRunner().invoke(app, ["reembed", tenant])
    assert again.exit_code == 0 and "vector index recreated" not in again.output
    assert _nodes(neo4j, tenant) == after
