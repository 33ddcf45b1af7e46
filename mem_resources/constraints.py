"""Constraints and indexes every memtend query relies on; the Neo4j resource creates them."""

from __future__ import annotations

from typing import Any

from neo4j import Session
from neo4j.exceptions import ClientError

from mem_resources.graph_schema_adapter import MEMOS_LABEL, SEED_DIALECT, SEED_VECTOR_INDEX, GraphDialect

#: Labels whose nodes carry an ``id`` unique within a tenant (seed 002's node types).
TENANT_SCOPED_LABELS = (
    "MemoryItem", "Character", "Conversation", "Scene", "User", "Agent",
    "Claim", "Domain", "Predicate", "Topic", "IngestedFile", "DedupJudgment",
    "DedupResolution", "DedupReview",
)
VECTOR_INDEX = SEED_VECTOR_INDEX
#: What a process sees when another one (a run of another tenant, a parallel test worker) creates
#: the same constraints and indexes at the same moment: ``IF NOT EXISTS`` does not cover a creation not yet
#: committed (and two creations on one label can deadlock, which the driver retries).
_RACED_CODES = frozenset({
    "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
    "Neo.ClientError.Schema.IndexAlreadyExists",
    "Neo.ClientError.Schema.ConstraintAlreadyExists",
})

#: Name → statement of every constraint and range index, created when its name is missing.
_STATEMENTS = {
    **{
        f"{label.lower()}_tenant_id": (
            f"CREATE CONSTRAINT {label.lower()}_tenant_id IF NOT EXISTS "
            f"FOR (n:{label}) REQUIRE (n.user_name, n.id) IS UNIQUE")
        for label in TENANT_SCOPED_LABELS
    },
    **{
        f"{label.lower()}_tenant": f"CREATE INDEX {label.lower()}_tenant IF NOT EXISTS FOR (n:{label}) ON (n.user_name)"
        for label in TENANT_SCOPED_LABELS if label != "MemoryItem"
    },
    "tenant_lock": "CREATE CONSTRAINT tenant_lock IF NOT EXISTS FOR (l:TenantLock) REQUIRE l.tenant IS UNIQUE",
    "memory_tenant": "CREATE INDEX memory_tenant IF NOT EXISTS FOR (m:MemoryItem) ON (m.user_name)",
    # Seed 002's extra label on every node memtend writes: a tenant's schema export reads each label
    # by tenant, and a label scan of :Node would read every tenant's memories (0.57 s at 150k).
    "node_tenant": "CREATE INDEX node_tenant IF NOT EXISTS FOR (n:Node) ON (n.user_name)",
    "memory_tenant_status": ("CREATE INDEX memory_tenant_status IF NOT EXISTS "
                             "FOR (m:MemoryItem) ON (m.user_name, m.status)"),
    "memory_tenant_type_status": ("CREATE INDEX memory_tenant_type_status IF NOT EXISTS "
                                  "FOR (m:MemoryItem) ON (m.user_name, m.memory_type, m.status)"),
    "memory_type": "CREATE INDEX memory_type IF NOT EXISTS FOR (m:MemoryItem) ON (m.memory_type)",
    "memory_payload_hash": ("CREATE INDEX memory_payload_hash IF NOT EXISTS "
                            "FOR (m:MemoryItem) ON (m.user_name, m.payload_hash)"),
    # MemOS's label is a backup key label in either schema (lifecycle pages it by (tenant, id)).
    "memtend_memory_tenant_id": (f"CREATE INDEX memtend_memory_tenant_id IF NOT EXISTS "
                                 f"FOR (m:{MEMOS_LABEL}) ON (m.user_name, m.id)"),
}

#: What memtend adds to a MemOS graph: range indexes on MemOS's ``Memory`` label for the
#: status filters of its queries (the (tenant, id) one is in ``_STATEMENTS``). Indexes, not constraints: they never
#: refuse a write MemOS makes.
_MEMOS_STATEMENTS = {
    "memtend_memory_tenant_status": (f"CREATE INDEX memtend_memory_tenant_status IF NOT EXISTS "
                                     f"FOR (m:{MEMOS_LABEL}) ON (m.user_name, m.status)"),
    "memtend_memory_tenant_type_status": (f"CREATE INDEX memtend_memory_tenant_type_status IF NOT EXISTS "
                                          f"FOR (m:{MEMOS_LABEL}) ON (m.user_name, m.memory_type, m.status)"),
}


class VectorIndexMismatchError(RuntimeError):
    """The live vector index was built for another embedding dimension."""


def _vector_index_statement(dialect: GraphDialect = SEED_DIALECT) -> str:
    """The dialect's vector index (MemOS's own ``memory_vector_index`` when memtend shares its
    embedding: created as MemOS creates it, should MemOS not have done so yet)."""
    return (f"CREATE VECTOR INDEX {dialect.vector_index} IF NOT EXISTS "
            f"FOR (m:{dialect.memory_label}) ON m.{dialect.vector_property} OPTIONS $options")


def _vector_options(embedding_dimension: int) -> dict:
    return {"indexConfig": {"vector.dimensions": embedding_dimension,
                            "vector.similarity_function": "cosine"}}


def vector_index_dimension(session: Session, name: str = VECTOR_INDEX) -> int | None:
    record = session.run(
        "SHOW VECTOR INDEXES YIELD name, options WHERE name = $name RETURN options",
        name=name,
    ).single()
    return record["options"]["indexConfig"]["vector.dimensions"] if record else None


def mismatch_message(live: int | None, embedding_dimension: int, dialect: GraphDialect = SEED_DIALECT) -> str:
    if dialect.memos and dialect.shared_embedding:
        return (f"MemOS's vector index {dialect.vector_index} holds {live}-dim vectors, but memtend's "
                f"embedder gives {embedding_dimension}-dim ones: MemOS's embedding is not memtend's. Set "
                "MEMTEND_MEMOS_SHARED_EMBEDDING=false so memtend keeps its own vector beside MemOS's.")
    return (
        f"Vector index {VECTOR_INDEX} holds {live}-dim vectors, but the configured embedder gives "
        f"{embedding_dimension}-dim ones (MEMTEND_EMBEDDER / MEMTEND_EMBEDDING_DIM changed). "
        "To migrate: `memtend reembed --recreate-index --all` (or name the tenants) recreates the "
        f"index with {embedding_dimension} dimensions and re-embeds every memory in place; nothing "
        "else changes. Or set the embedder back to the one that wrote this graph."
    )


def _existing(session: Session, vector_index: str = VECTOR_INDEX) -> tuple[set[str], set[str], int | None]:
    """Names of the constraints and indexes that exist, those of indexes not yet online, and the
    vector index's dimension."""
    names = {r["name"] for r in session.run("SHOW CONSTRAINTS YIELD name RETURN name")}
    pending, dimension = set(), None
    for record in session.run("SHOW INDEXES YIELD name, state, options RETURN name, state, options"):
        names.add(record["name"])
        if record["state"] != "ONLINE":
            pending.add(record["name"])
        if record["name"] == vector_index:
            dimension = record["options"]["indexConfig"]["vector.dimensions"]
    return names, pending, dimension


def ensure(session: Session, embedding_dimension: int, dialect: GraphDialect = SEED_DIALECT) -> None:
    """Create what is missing and wait for indexes still populating. On a graph that has it all
    this is two reads (every run's resource starts here), not twenty index and constraint commands."""
    names, pending, live = _existing(session, dialect.vector_index)
    statements = {**_STATEMENTS, **(_MEMOS_STATEMENTS if dialect.memos else {})}
    missing = [statement for name, statement in statements.items() if name not in names]
    for statement in missing:
        _create(session, statement)
    created_vector_index = live is None
    if created_vector_index:
        _create(session, _vector_index_statement(dialect), options=_vector_options(embedding_dimension))
        live = vector_index_dimension(session, dialect.vector_index)
    if live != embedding_dimension:
        raise VectorIndexMismatchError(mismatch_message(live, embedding_dimension, dialect))
    if missing or pending or created_vector_index:
        session.run("CALL db.awaitIndexes(300)").consume()


def _create(session: Session, statement: str, **parameters: Any) -> None:
    """One index or constraint command in a managed transaction (the driver retries a deadlock with backoff);
    another process having created the same rule first counts as done."""
    try:
        session.execute_write(lambda tx: tx.run(statement, **parameters).consume())
    except ClientError as exc:
        if exc.code not in _RACED_CODES:
            raise


def recreate_vector_index(session: Session, embedding_dimension: int) -> bool:
    """Drop the vector index when it has another dimension and create it anew (the embeddings
    themselves stay; the index is derived data). Returns whether it was recreated."""
    if vector_index_dimension(session) in (None, embedding_dimension):
        return False
    session.run(f"DROP INDEX {VECTOR_INDEX} IF EXISTS").consume()
    session.run(_vector_index_statement(), options=_vector_options(embedding_dimension)).consume()
    return True
