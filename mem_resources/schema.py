"""Constraints and indexes the queries in this package rely on."""

from __future__ import annotations

from neo4j import Session

#: Labels whose nodes carry an ``id`` unique within a tenant (seed 002's node types).
TENANT_SCOPED_LABELS = (
    "MemoryItem", "Character", "Conversation", "Scene", "User", "Agent",
    "Claim", "Domain", "Predicate", "Topic", "IngestedFile", "DedupJudgment",
)
VECTOR_INDEX = "memory_embedding"

_STATEMENTS = [
    *(
        f"CREATE CONSTRAINT {label.lower()}_tenant_id IF NOT EXISTS "
        f"FOR (n:{label}) REQUIRE (n.user_name, n.id) IS UNIQUE"
        for label in TENANT_SCOPED_LABELS
    ),
    "CREATE INDEX memory_tenant IF NOT EXISTS FOR (m:MemoryItem) ON (m.user_name)",
    "CREATE INDEX memory_tenant_status IF NOT EXISTS FOR (m:MemoryItem) ON (m.user_name, m.status)",
    "CREATE INDEX memory_type IF NOT EXISTS FOR (m:MemoryItem) ON (m.memory_type)",
    "CREATE INDEX memory_payload_hash IF NOT EXISTS FOR (m:MemoryItem) ON (m.user_name, m.payload_hash)",
]


class SchemaMismatchError(RuntimeError):
    """The live vector index was built for another embedding dimension."""


def ensure(session: Session, embedding_dimension: int) -> None:
    for statement in _STATEMENTS:
        session.run(statement).consume()
    session.run(
        f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS "
        "FOR (m:MemoryItem) ON m.embedding OPTIONS $options",
        options={"indexConfig": {"vector.dimensions": embedding_dimension,
                                 "vector.similarity_function": "cosine"}},
    ).consume()
    record = session.run(
        "SHOW VECTOR INDEXES YIELD name, options WHERE name = $name RETURN options",
        name=VECTOR_INDEX,
    ).single()
    live = record["options"]["indexConfig"]["vector.dimensions"] if record else None
    if live != embedding_dimension:
        raise SchemaMismatchError(
            f"Vector index {VECTOR_INDEX} has dimension {live}, the embedder produces "
            f"{embedding_dimension}; re-embed or drop the index before switching embedders."
        )
    session.run("CALL db.awaitIndexes(300)").consume()
