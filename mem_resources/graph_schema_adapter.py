"""Which graph schema memtend tends: its own seed-002 one (``:Node:MemoryItem``) or MemOS 2.x's
(``:Memory``, written by MemOS's Neo4j graph store), chosen per deployment by one setting.

Every query in the domains is written once, against the seed-002 label. On a MemOS graph the
session (:class:`DialectSession`) puts the few identifiers that differ into MemOS's terms: the
memory label, memtend's own vector property (when it does not share MemOS's ``embedding``) and
memtend's JSON lineage ``history`` (``memtend_history``: MemOS parses its ``history`` as a list
of objects, which a Neo4j property cannot hold). Labels cannot be query parameters, so they come
from this module's fixed table, never from input; values stay parameters. Property *values*
that differ (``sources``, ids) are written by the codec in :mod:`mem_resources.memory_model`,
told the dialect by its caller.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from enum import StrEnum
from functools import lru_cache
from typing import Any

from neo4j import ManagedTransaction, Session
from pydantic import BaseModel, ConfigDict

SEED_LABEL = "MemoryItem"
SEED_VECTOR_INDEX = "memory_embedding"
SEED_ID_PREFIX = "mem:"
MEMOS_LABEL = "Memory"
#: MemOS's own vector index on ``Memory.embedding`` (its graph store creates it).
MEMOS_VECTOR_INDEX = "memory_vector_index"
#: memtend's vector and its index when MemOS's ``embedding`` comes from another model or size.
OWN_VECTOR_PROPERTY = "memtend_embedding"
OWN_VECTOR_INDEX = "memtend_embedding"
#: memtend's lineage details on a MemOS node: MemOS's ``history`` must stay a list it can parse.
OWN_HISTORY_PROPERTY = "memtend_history"

_SEED_NODE_LABELS = re.compile(r":Node:MemoryItem\b")
_SEED_LABEL = re.compile(r"(?<=:)MemoryItem\b")
#: ``SET t:Node, t += ...``: the seed-002 extra label on nodes memtend creates.
_ADD_NODE_LABEL = re.compile(r"\bSET (\w+):Node, ")
#: A node's ``embedding``; ``row.embedding`` is a value sent with the query, not a property.
_EMBEDDING = re.compile(r"(?<!\brow)\.embedding\b")
#: A node's lineage ``history`` (a JSON string in seed 002): memtend's own property on MemOS's.
_HISTORY = re.compile(r"(?<!\brow)\.history\b")


class GraphSchema(StrEnum):
    SEED_002 = "seed-002"
    MEMOS = "memos"


class GraphDialect(BaseModel):
    """The identifiers and id form of one deployment's schema."""

    model_config = ConfigDict(frozen=True)

    schema_name: GraphSchema = GraphSchema.SEED_002
    #: MemOS mode: MemOS's ``embedding`` was made by the embedder memtend is configured with (same
    #: model; the dimension is checked against ``memory_vector_index``), so candidates use it.
    shared_embedding: bool = False

    @property
    def memos(self) -> bool:
        return self.schema_name is GraphSchema.MEMOS

    @property
    def memory_label(self) -> str:
        return MEMOS_LABEL if self.memos else SEED_LABEL

    @property
    def vector_property(self) -> str:
        """Where memtend reads and writes the vectors its candidates use."""
        return OWN_VECTOR_PROPERTY if self.memos and not self.shared_embedding else "embedding"

    @property
    def vector_index(self) -> str:
        if not self.memos:
            return SEED_VECTOR_INDEX
        return MEMOS_VECTOR_INDEX if self.shared_embedding else OWN_VECTOR_INDEX

    def node_id(self, digest: str) -> str:
        """A node id from a 32-hex-digit digest: ``mem:<hex>``, or the UUID MemOS requires."""
        return str(uuid.UUID(hex=digest)) if self.memos else f"{SEED_ID_PREFIX}{digest}"

    def cypher(self, query: str) -> str:
        """``query`` (written for seed 002) in this schema's identifiers."""
        return _memos_cypher(query, self.shared_embedding) if self.memos else query


@lru_cache(maxsize=1024)
def _memos_cypher(query: str, shared_embedding: bool) -> str:
    """The MemOS rewrite, cached: the domains send the same few hundred query texts again and
    again, so each is rewritten once per process rather than on every run of it."""
    query = _SEED_NODE_LABELS.sub(":" + MEMOS_LABEL, query)
    query = _ADD_NODE_LABEL.sub(r"SET ", query)
    query = _SEED_LABEL.sub(MEMOS_LABEL, query)
    query = _HISTORY.sub("." + OWN_HISTORY_PROPERTY, query)
    if not shared_embedding:
        query = _EMBEDDING.sub("." + OWN_VECTOR_PROPERTY, query)
    return query


SEED_DIALECT = GraphDialect()


class DialectTransaction:
    """A managed transaction whose queries are put in the dialect's identifiers."""

    def __init__(self, tx: ManagedTransaction, dialect: GraphDialect) -> None:
        self._tx = tx
        self._dialect = dialect

    def run(self, query: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return self._tx.run(self._dialect.cypher(query), parameters, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


class DialectSession:
    """A session whose auto-commit queries and transaction functions speak the dialect."""

    def __init__(self, session: Session, dialect: GraphDialect) -> None:
        self._session = session
        self._dialect = dialect

    def run(self, query: str, parameters: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return self._session.run(self._dialect.cypher(query), parameters, **kwargs)

    def _wrap(self, work: Callable[..., Any]) -> Callable[..., Any]:
        return lambda tx, *args, **kwargs: work(DialectTransaction(tx, self._dialect), *args, **kwargs)

    def execute_read(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._session.execute_read(self._wrap(work), *args, **kwargs)

    def execute_write(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._session.execute_write(self._wrap(work), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)
