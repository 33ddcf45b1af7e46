"""MemOS itself as memtend's client, run by the MemOS virtual environment's Python (``make
memos-venv``), never imported by memtend: ``write`` stores pre-embedded memories through MemOS's
``MemoryManager`` (no LLM, no embedder), ``read`` reads them back through MemOS's Neo4j graph
store and its ``TextualMemoryItem`` model. JSON request on stdin, JSON answer on stdout, with
every warning or error MemOS logged or raised while doing it.

    .memos-venv/bin/python tests/support/memos_client.py write < request.json
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import warnings
from typing import Any


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def _graph(request: dict[str, Any], user: str) -> Any:
    from memos.configs.graph_db import Neo4jGraphDBConfig
    from memos.graph_dbs.neo4j import Neo4jGraphDB

    return Neo4jGraphDB(Neo4jGraphDBConfig(
        uri=request["uri"], user=request.get("user", ""), password=request.get("password", ""),
        db_name=request.get("database", "neo4j"), auto_create=False, use_multi_db=False,
        user_name=user, embedding_dimension=request["dimension"]))


def write(request: dict[str, Any]) -> dict[str, Any]:
    """Each user's memories through ``MemoryManager.add`` (sync, batch), as a MemOS app adds them."""
    from memos.memories.textual.item import SourceMessage, TextualMemoryItem, TreeNodeTextualMemoryMetadata
    from memos.memories.textual.tree_text_memory.organize.manager import MemoryManager

    ids: dict[str, list[str]] = {}
    for user, memories in request["users"].items():
        graph = _graph(request, user)
        items = [TextualMemoryItem(memory=m["memory"], metadata=TreeNodeTextualMemoryMetadata(
            user_id=user, memory_type="LongTermMemory", status="activated", type="fact",
            key=m["key"], tags=m["tags"], embedding=m["embedding"], background="",
            created_at=m["at"], updated_at=m["at"],
            sources=[SourceMessage(type="chat", role="user", content=m["memory"], chat_time=m["at"])]))
            for m in memories]
        manager = MemoryManager(graph, embedder=None, llm=None, is_reorganize=False)
        ids[user] = manager.add(items, user_name=user, mode="sync", use_batch=True)
        graph.driver.close()
    return {"ids": ids}


def read(request: dict[str, Any]) -> dict[str, Any]:
    """What MemOS shows of each user: nodes by id, every activated long-term memory, the nearest
    activated ones to a query vector, the PARENT edges of given nodes; each node also parsed as
    MemOS's ``TextualMemoryItem`` (the model its tree memory returns)."""
    from memos.memories.textual.item import TextualMemoryItem

    answer: dict[str, Any] = {}
    for user, asked in request["users"].items():
        graph = _graph(request, user)
        nodes = {i: graph.get_node(i, user_name=user) for i in asked["ids"]}
        listed = graph.get_all_memory_items("LongTermMemory", user_name=user, status="activated")
        found = graph.search_by_embedding(asked["query"], top_k=asked.get("top_k", 5), status="activated",
                                          user_name=user)
        parents = {i: graph.get_edges(i, type="PARENT", direction="INCOMING", user_name=user)
                   for i in asked["ids"]}
        for node in [*[n for n in nodes.values() if n], *listed]:
            TextualMemoryItem(**node)
        graph.driver.close()
        answer[user] = {
            "nodes": {i: None if n is None else {"memory": n["memory"], "status": n["metadata"].get("status"),
                                                 "type": n["metadata"].get("type")}
                      for i, n in nodes.items()},
            "listed": [{"id": n["id"], "memory": n["memory"], "type": n["metadata"].get("type")} for n in listed],
            "search": [hit["id"] for hit in found],
            "parents": parents,
        }
    return answer


def main() -> None:
    """Imports first (their warnings are about this environment's optional extras, not about the
    graph); then every warning logged or raised while MemOS writes or reads is collected. MemOS
    logs and prints to stdout: all of it goes to stderr, stdout carries only the answer."""
    command = sys.argv[1]
    request = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):
        import memos.graph_dbs.neo4j
        import memos.memories.textual.tree_text_memory.organize.manager  # noqa: F401
        from memos.log import configure_logging

        configure_logging()
        collected = _Collect()
        logging.getLogger().addHandler(collected)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answer = {"write": write, "read": read}[command](request)
    answer["problems"] = collected.records + [f"{w.category.__name__}: {w.message}" for w in caught]
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
