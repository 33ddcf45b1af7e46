"""Stream a tenant's context records (``<inbox>/<tenant>/context/*.jsonl``) into the graph.

Memories go through the same planning, embedding and writer as plain memory items (dual write
included); the records' characters, conversations, scenes and claims attach to those nodes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from mem_assets.context_graph import queries
from mem_assets.context_graph.records import (
    ContextConfig,
    ContextError,
    ContextRecord,
    ContextRows,
    Role,
    TenantContext,
    add_record,
    owner_role,
)
from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.inbox import InboxFile, InboxResource, Rejection
from mem_assets.ingest.ledger import ingest_new_files, record_skipped
from mem_assets.ingest.memory_nodes import arrival, build_nodes, plan
from mem_assets.ingest.parsing import RAW_PREVIEW_CHARS, MemoryItemIn, parse_jsonl
from mem_resources.batching import chunks
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import SourceMessage, utc_now
from mem_resources.neo4j_resource import Neo4jResource

CONTEXT_FOLDER = "context"
PREVIEW_ROWS = 10


@dataclass(frozen=True)
class ParsedRecord:
    line: int
    record: ContextRecord


@dataclass
class ContextIngestReport:
    files_ingested: list[str] = field(default_factory=list)
    files_already_ingested: list[str] = field(default_factory=list)
    files_skipped: list[str] = field(default_factory=list)
    accepted: int = 0
    rejected: int = 0
    new_memories: int = 0
    nodes_created: int = 0
    claims: int = 0
    superseded: list[tuple[str, str]] = field(default_factory=list)
    working_trimmed: int = 0
    rejection_kinds: Counter[str] = field(default_factory=Counter)
    preview: list[dict[str, str]] = field(default_factory=list)


def ledger_key(sha256: str) -> str:
    """Ledger key of a context file, distinct from the same bytes dropped as plain memories."""
    return hashlib.sha256(f"context\x1f{sha256}".encode()).hexdigest()


def parse_records(path: Path) -> Iterator[ParsedRecord | Rejection]:
    """Validate a JSONL file line by line; a bad line becomes a rejection with its reason."""
    for entry in parse_jsonl(path, ContextRecord):
        yield entry if isinstance(entry, Rejection) else ParsedRecord(entry[0], entry[1])


def memory_input(record: ContextRecord) -> MemoryItemIn:
    """The plain memory item a record carries: same text and type, so the same node id."""
    role = owner_role(record.memory)
    return MemoryItemIn(
        memory=record.memory, memory_type=record.memory_type, tags=["context", role.value],
        created_at=record.created_at,
        sources=[SourceMessage(type="chat", role="user" if role is Role.USER else "assistant",
                               content=record.memory, chat_time=record.created_at.isoformat())],
    )


def write_batch(tenant: str, records: list[ParsedRecord], file_name: str, profile: TenantContext,
                neo4j: Neo4jResource, embedder: EmbedderResource, report: ContextIngestReport,
                now: datetime) -> list[Rejection]:
    """Write one batch in one transaction; records the tenant config cannot place are returned."""
    rows = ContextRows()
    placed: list[ContextRecord] = []
    arrivals: list[str] = []
    rejections: list[Rejection] = []
    for parsed in records:
        try:
            add_record(rows, tenant, parsed.record, profile, now)
        except ContextError as exc:
            rejections.append(Rejection(file_name, parsed.line, "no_context", str(exc),
                                        parsed.record.model_dump_json()[:RAW_PREVIEW_CHARS]))
            continue
        placed.append(parsed.record)
        arrivals.append(arrival(now, file_name, parsed.line))
    if not placed:
        return rejections
    planned = plan(tenant, [memory_input(record) for record in placed], arrivals)
    with neo4j.session() as session:
        present = session.execute_read(ingest_queries.existing_ids, tenant, [p.node_id for p in planned])
        fresh = [p for p in planned if p.node_id not in present]
        vectors = embedder.embed([p.item.memory for p in fresh])
        nodes = build_nodes(tenant, fresh, vectors, now)
        summary = queries.write_context(session, tenant, nodes, rows,
                                        profile.single_valued_predicates, now)
    report.accepted += len(placed)
    report.new_memories += len(fresh)
    report.nodes_created += summary.nodes_created
    report.claims += summary.claims
    report.superseded.extend(summary.superseded)
    room = PREVIEW_ROWS - len(report.preview)
    report.preview.extend({"id": p.node_id, "memory": p.item.memory[:120]} for p in fresh[:max(room, 0)])
    return rejections


def ingest_context(tenant: str, neo4j: Neo4jResource, embedder: EmbedderResource,
                   inbox: InboxResource, config: ContextConfig, batch_size: int,
                   working_memory_capacity: int) -> ContextIngestReport:
    """Ingest every context file of ``tenant`` not yet in the ledger; each is recorded once done.
    Refused on a MemOS graph (seed 002's context nodes have no MemOS counterpart)."""
    report = ContextIngestReport()
    profile = config.for_tenant(tenant)
    now = utc_now()
    files, skipped = inbox.scan(tenant, CONTEXT_FOLDER)
    if files and neo4j.dialect.memos:
        raise ValueError(f"{len(files)} context file(s) for {tenant!r}: the context graph (characters, "
                         "conversations, claims) is seed-002 only and has no place in a MemOS graph")
    report.files_skipped = record_skipped(neo4j, inbox, tenant, skipped, now)

    def ingest(file: InboxFile) -> dict[str, int]:
        before = (report.accepted, report.rejected, report.new_memories)
        for chunk in chunks(parse_records(file.path), batch_size):
            parsed = [entry for entry in chunk if isinstance(entry, ParsedRecord)]
            rejections = [entry for entry in chunk if isinstance(entry, Rejection)]
            rejections += write_batch(tenant, parsed, file.path.name, profile, neo4j, embedder, report, now)
            if rejections:
                inbox.quarantine(tenant, rejections)
                report.rejected += len(rejections)
                report.rejection_kinds.update(r.kind for r in rejections)
        return {"accepted": report.accepted - before[0], "rejected": report.rejected - before[1],
                "new": report.new_memories - before[2]}

    ledger = ingest_new_files(neo4j, tenant, files, now, ingest,
                              key_of=ledger_key, extra={"kind": "context"})
    report.files_ingested, report.files_already_ingested = ledger.ingested, ledger.already_ingested
    if report.new_memories:
        with neo4j.session() as session:
            report.working_trimmed = session.execute_write(
                ingest_queries.trim_working_memory, tenant, working_memory_capacity, now)
    return report
