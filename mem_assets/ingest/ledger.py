"""The ingest ledger: every inbox file is ingested once, whichever writer (memories or context
records) reads it, and recorded in the graph (``:IngestedFile``) only when it is done."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.inbox import InboxFile, InboxResource, SkippedPath
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
        done = session.execute_read(ingest_queries.ingested_file_hashes, tenant)
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
            session.execute_write(ingest_queries.record_ingested_files, tenant, [entry])
        done.add(key)
        run.ingested.append(file.path.name)
    return run


def record_skipped(neo4j: Neo4jResource, inbox: InboxResource, tenant: str,
                   skipped: list[SkippedPath], now: datetime) -> list[str]:
    """Quarantine and ledger entries for inbox entries that are not read (links, FIFOs...),
    once per entry and reason; returns the ones reported now, as 'name: reason'."""
    if not skipped:
        return []
    with neo4j.session() as session:
        done = session.execute_read(ingest_queries.ingested_file_hashes, tenant)
    fresh = [skip for skip in skipped if skip.ledger_key not in done]
    if not fresh:
        return []
    inbox.quarantine(tenant, [skip.rejection() for skip in fresh])
    with neo4j.session() as session:
        session.execute_write(ingest_queries.record_ingested_files, tenant, [{
            "sha256": skip.ledger_key, "kind": "skipped", "path": str(skip.path),
            "name": skip.path.name, "reason": skip.reason, "ingested_at": now,
            "accepted": 0, "rejected": 1, "new": 0,
        } for skip in fresh])
    return [f"{skip.path.name}: {skip.reason}" for skip in fresh]


def not_yet_ingested(neo4j: Neo4jResource, tenant: str, files: list[InboxFile],
                     key_of: Callable[[str], str] = lambda sha256: sha256) -> list[InboxFile]:
    """The files whose ledger key is not recorded: what an ingest run would actually read."""
    with neo4j.session() as session:
        done = session.execute_read(ingest_queries.ingested_file_hashes, tenant)
    return [file for file in files if key_of(file.sha256()) not in done]
