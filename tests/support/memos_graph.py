"""A MemOS 2.x graph in the test Neo4j: nodes shaped as MemOS's Neo4j graph store writes them
(``add_nodes_batch``), a memtend resource in MemOS mode, a dedup run with its checks, and views
of what memtend changed."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import numpy as np

from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.checks import dedup_checks
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_resources.embedder import WordLlamaEmbedder
from mem_resources.graph_schema_adapter import GraphSchema
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.topic_corpus import topic_memories

DEDUP = [dedup_candidates, relation_judgments, merged_nodes]
CATS = ["The user has two cats, Luna and Milo.", "The user has two cats named Luna and Milo."]
HOME = ["The user lives in Berlin.", "The user now lives in Paris."]
#: Enough memories on two themes for topics to form.
TOPICAL = [text for topic, text in topic_memories(per_topic=12) if topic in {"travel", "cooking"}]
OTHERS = ["The user plays chess every Sunday.", "The user is allergic to peanuts.",
          "The user works as a nurse in a hospital.", "The user likes hiking in the Alps.",
          "The user drinks green tea every morning."]
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
EMBEDDER = WordLlamaEmbedder()
#: What MemOS's graph store owns on a node; memtend may change only ``status``, ``evolve_to`` and
#: ``version`` of a node it archives or lets win a contradiction.
MEMOS_FIELDS = ("memory", "user_name", "memory_type", "status", "embedding", "key", "tags", "sources",
                "background", "created_at", "updated_at", "usage", "file_ids", "history", "version",
                "evolve_to", "user_id", "delete_time", "delete_record_id", "type", "confidence")


def memos_resource(neo4j: Neo4jResource, shared_embedding: bool = True) -> Neo4jResource:
    """A resource on the test server tending MemOS's schema (its own driver: the schema is
    ensured, in MemOS's terms, when it first connects)."""
    return Neo4jResource(uri=neo4j.uri, user=neo4j.user, password=neo4j.password, database=neo4j.database,
                         embedding_dimension=neo4j.embedding_dimension, graph_schema=GraphSchema.MEMOS.value,
                         memos_shared_embedding=shared_embedding)


def memos_node(user: str, text: str, at: datetime, embedding: Sequence[float]) -> dict[str, Any]:
    """One node as MemOS's ``add_nodes_batch`` sends it (sources JSON-encoded twice, as it does)."""
    source = json.dumps({"type": "chat", "role": "user", "content": text, "chat_time": at.isoformat()})
    return {"id": str(uuid.uuid4()), "memory": text, "created_at": at.isoformat(), "updated_at": at.isoformat(),
            "metadata": {"user_name": user, "user_id": user, "memory_type": "LongTermMemory",
                         "status": "activated", "key": text.split(".")[0][:40], "tags": ["test"],
                         "sources": [json.dumps(source)], "background": "", "embedding": list(embedding),
                         "usage": [], "file_ids": [], "history": [], "version": 1, "evolve_to": [],
                         "type": "fact", "confidence": 0.99, "delete_time": "", "delete_record_id": ""}}


def write_memos_nodes(neo4j: Neo4jResource, user: str, texts: Sequence[str], start_minutes: int = 0,
                      vectors: np.ndarray | None = None) -> list[str]:
    """MemOS's own batch write (its Cypher, verbatim), one minute apart; ids in text order."""
    vectors = EMBEDDER.embed(list(texts)) if vectors is None else vectors
    nodes = [memos_node(user, text, T0 + timedelta(minutes=start_minutes + i), vector.astype(float).tolist())
             for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))]
    with neo4j.driver.session(database=neo4j.database) as session:
        session.run(
            """
            UNWIND $nodes AS node
            MERGE (n:Memory {id: node.id})
            SET n.memory = node.memory,
                n.created_at = datetime(node.created_at),
                n.updated_at = datetime(node.updated_at),
                n += node.metadata
            """, nodes=nodes).consume()
    return [node["id"] for node in nodes]


def memos_nodes(neo4j: Neo4jResource, user: str) -> dict[str, dict[str, Any]]:
    """The user's ``Memory`` nodes as MemOS matches them: id -> labels and properties."""
    with neo4j.driver.session(database=neo4j.database) as session:
        result = session.run("MATCH (n:Memory {user_name: $u}) RETURN n.id AS id, labels(n) AS labels, "
                             "properties(n) AS p", u=user)
        return {r["id"]: {**r["p"], "labels": sorted(r["labels"])} for r in result}


def other_labels(neo4j: Neo4jResource, user: str) -> set[str]:
    """Labels of the user's nodes that are not MemOS's ``Memory`` nodes."""
    with neo4j.driver.session(database=neo4j.database) as session:
        result = session.run("MATCH (n {user_name: $u}) WHERE NOT n:Memory UNWIND labels(n) AS label "
                             "RETURN DISTINCT label", u=user)
        return {r["label"] for r in result}


def memos_edges(neo4j: Neo4jResource, user: str) -> set[tuple[str, str, str]]:
    with neo4j.driver.session(database=neo4j.database) as session:
        result = session.run("MATCH (a {user_name: $u})-[r]-(b) RETURN a.id AS a, type(r) AS r, b.id AS b, "
                             "startNode(r) = a AS out", u=user)
        return {(r["a"], r["r"], r["b"]) if r["out"] else (r["b"], r["r"], r["a"]) for r in result}


def run_dedup(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])
    return dg.materialize([*DEDUP, *dedup_checks], partition_key=tenant, instance=instance,
                          resources={"neo4j": neo4j, "embedder": EMBEDDER, "judge": OfflineJudge()})


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def checks_pass(result: dg.ExecuteInProcessResult) -> bool:
    evaluations = result.get_asset_check_evaluations()
    return bool(evaluations) and all(e.passed for e in evaluations)
