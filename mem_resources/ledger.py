"""The ingest ledger: every inbox file is ingested once, whichever writer (memories or context
records) reads it, and recorded in the graph (``:IngestedFile``) only when it is done."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mem_resources import memory_queries
from mem_resources.inbox import InboxFile
from mem_resources.neo4j_resource import Neo4jResource


@dataclass
class LedgerRun:
    ingested: list[str] = field(default_factory=list)
    already_ingested: list[str] = field(default_factory=list)


def ingest_new_files(neo4j: Neo4jResource, tenant: str, files: list[InboxFile], now: datetime,
                     ingest: Callable[[InboxFile], Mapping[str, int]],
                     key_of: Callable[[str], str] = lambda sha256: sha256,
                     extra: Mapping[str, Any] | None = None) -> LedgerRun:
    """Call ``ingest`` on each file whose ledger key is not recorded yet, then record the file
    with the counts ``ingest`` returns. ``key_of`` maps the content hash to the ledger key."""
    run = LedgerRun()
    with neo4j.session() as session:
        done = session.execute_read(memory_queries.ingested_file_hashes, tenant)
    for file in files:
        sha256 = file.sha256()
        key = key_of(sha256)
        if key in done:
            run.already_ingested.append(file.path.name)
            continue
        counts = ingest(file)
        entry = {"sha256": key, "path": str(file.path), "name": file.path.name,
                 "ingested_at": now, **counts, **(extra or {})}
        if key != sha256:
            entry["content_sha256"] = sha256
        with neo4j.session() as session:
            session.execute_write(memory_queries.record_ingested_file, tenant, entry)
        done.add(key)
        run.ingested.append(file.path.name)
    return run
