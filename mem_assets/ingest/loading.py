"""Stream a tenant's new inbox files into the graph in large UNWIND batches."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from pathlib import Path

from neo4j import ManagedTransaction

from mem_assets.ingest import queries as ingest_queries
from mem_assets.ingest.inbox import InboxFile, InboxResource, Rejection
from mem_assets.ingest.ledger import ingest_new_files, record_skipped
from mem_assets.ingest.memory_nodes import PlannedMemory, arrival, build_nodes, plan
from mem_assets.ingest.parsing import ParsedLine, parse_lines
from mem_resources.embedder import EmbedderResource
from mem_resources.graph_schema_adapter import GraphDialect
from mem_resources.memory_model import MemoryItem, utc_now
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Progress, Sink, tracked

PREVIEW_ROWS = 10


@dataclass
class IngestReport:
    files_ingested: list[str] = field(default_factory=list)
    files_already_ingested: list[str] = field(default_factory=list)
    files_skipped: list[str] = field(default_factory=list)
    accepted: int = 0
    rejected: int = 0
    new: int = 0
    already_present: int = 0
    nodes_created: int = 0
    working_trimmed: int = 0
    rejection_kinds: Counter[str] = field(default_factory=Counter)
    preview: list[dict[str, str]] = field(default_factory=list)
    slowest_check_s: float = 0.0
    slowest_write_s: float = 0.0


@dataclass(frozen=True)
class PreparedChunk:
    rejections: list[Rejection]
    accepted: int
    planned_ids: frozenset[str]
    fresh: list[PlannedMemory]
    nodes: list[MemoryItem]
    check_s: float


def _prepare_next(lines: Iterator[ParsedLine | Rejection], size: int, tenant: str, file_name: str,
                  in_flight: frozenset[str], neo4j: Neo4jResource, embedder: EmbedderResource,
                  now: datetime) -> PreparedChunk | None:
    """Parse, check existence and embed one chunk; ids of the chunk being written are skipped."""
    chunk = list(islice(lines, size))
    if not chunk:
        return None
    parsed = [entry for entry in chunk if isinstance(entry, ParsedLine)]
    accepted = [entry.item for entry in parsed]
    planned = plan(tenant, accepted, [arrival(now, file_name, entry.line) for entry in parsed], neo4j.dialect)
    started = time.perf_counter()
    with neo4j.session() as session:
        present = session.execute_read(ingest_queries.existing_ids, tenant, [p.node_id for p in planned])
    check_s = time.perf_counter() - started
    fresh = [p for p in planned if p.node_id not in present and p.node_id not in in_flight]
    vectors = embedder.embed([p.item.memory for p in fresh])
    return PreparedChunk(
        rejections=[entry for entry in chunk if isinstance(entry, Rejection)],
        accepted=len(accepted), planned_ids=frozenset(p.node_id for p in planned), fresh=fresh,
        nodes=build_nodes(tenant, fresh, vectors, now), check_s=check_s,
    )


def _write_and_trim(tx: ManagedTransaction, tenant: str, nodes: list[MemoryItem],
                    working_memory_capacity: int, now: datetime, dialect: GraphDialect) -> tuple[int, int]:
    """One transaction per chunk: working memory never exceeds capacity + one chunk."""
    created = ingest_queries.write_memories(tx, tenant, nodes, dialect)
    return created, ingest_queries.trim_working_memory(tx, tenant, working_memory_capacity, now)


def count_lines(path: Path) -> int:
    """Non-blank lines: the total a file's progress is measured against."""
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def ingest_file(file: InboxFile, neo4j: Neo4jResource, embedder: EmbedderResource,
                inbox: InboxResource, batch_size: int, max_chars: int,
                working_memory_capacity: int, report: IngestReport, now: datetime,
                progress: Progress) -> None:
    """Chunk k+1 is prepared (parse, existence check, embedding) while chunk k is written."""
    tenant = file.tenant
    lines = parse_lines(file.path, max_chars)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-prepare") as pool:
        pending = pool.submit(_prepare_next, lines, batch_size, tenant, file.path.name, frozenset(),
                              neo4j, embedder, now)
        while (chunk := pending.result()) is not None:
            pending = pool.submit(_prepare_next, lines, batch_size, tenant, file.path.name,
                                  chunk.planned_ids, neo4j, embedder, now)
            if chunk.rejections:
                inbox.quarantine(tenant, chunk.rejections)
                report.rejected += len(chunk.rejections)
                report.rejection_kinds.update(r.kind for r in chunk.rejections)
            report.accepted += chunk.accepted
            report.slowest_check_s = max(report.slowest_check_s, chunk.check_s)
            report.already_present += chunk.accepted - len(chunk.fresh)
            lines_done = chunk.accepted + len(chunk.rejections)
            if not chunk.fresh:
                progress.advance(lines_done)
                continue
            started = time.perf_counter()
            with neo4j.session() as session:
                created, trimmed = session.execute_write(
                    _write_and_trim, tenant, chunk.nodes, working_memory_capacity, now, neo4j.dialect)
            report.slowest_write_s = max(report.slowest_write_s, time.perf_counter() - started)
            report.nodes_created += created
            report.working_trimmed += trimmed
            report.new += len(chunk.fresh)
            room = max(PREVIEW_ROWS - len(report.preview), 0)
            report.preview.extend(
                {"id": p.node_id, "memory_type": p.item.memory_type.value,
                 "memory": p.item.memory[:120]}
                for p in chunk.fresh[:room]
            )
            progress.advance(lines_done)


def ingest_tenant(tenant: str, neo4j: Neo4jResource, embedder: EmbedderResource,
                  inbox: InboxResource, batch_size: int, max_chars: int,
                  working_memory_capacity: int, sink: Sink | None = None) -> IngestReport:
    """Ingest every inbox file of ``tenant`` not in the ledger; a file is recorded once done.
    Long files report progress (lines, rate, ETA) to ``sink``."""
    report = IngestReport()
    now = utc_now()
    files, skipped = inbox.scan(tenant)
    report.files_skipped = record_skipped(neo4j, inbox, tenant, skipped, now)

    def ingest(file: InboxFile) -> dict[str, int]:
        before = (report.accepted, report.rejected, report.new)
        with tracked(f"ingest {tenant}/{file.path.name}", sink, total=count_lines(file.path),
                     unit="lines") as progress:
            ingest_file(file, neo4j, embedder, inbox, batch_size, max_chars,
                        working_memory_capacity, report, now, progress)
        return {"accepted": report.accepted - before[0], "rejected": report.rejected - before[1],
                "new": report.new - before[2]}

    ledger = ingest_new_files(neo4j, tenant, files, now, ingest)
    report.files_ingested, report.files_already_ingested = ledger.ingested, ledger.already_ingested
    return report
