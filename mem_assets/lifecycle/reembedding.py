"""Re-embed a tenant's memories in place: the migration after switching embedders."""

from __future__ import annotations

from dataclasses import dataclass

from mem_resources import memory_queries
from mem_resources.embedder import EmbedderResource
from mem_resources.neo4j_resource import Neo4jResource


@dataclass(frozen=True)
class ReembedReport:
    tenant: str
    embedded: int
    without_text: int


def reembed_tenant(neo4j: Neo4jResource, embedder: EmbedderResource, tenant: str,
                   page_size: int = 1000) -> ReembedReport:
    """Every memory node of ``tenant`` (any status, topics and working copies too) gets a vector
    from ``embedder``, one page per write transaction; texts, statuses and dedup stamps stay.
    On a MemOS graph whose ``embedding`` memtend shares, refused: that vector is MemOS's."""
    if neo4j.dialect.memos and neo4j.dialect.shared_embedding:
        raise ValueError("MEMTEND_MEMOS_SHARED_EMBEDDING is on: `embedding` belongs to MemOS and memtend "
                         "never rewrites it; switch it off to keep memtend's own vector instead")
    embedded = without_text = 0
    after = ""
    while True:
        with neo4j.session() as session:
            page = session.execute_read(memory_queries.memory_text_page, tenant, after, page_size)
            if not page:
                break
            after = page[-1][0]
            with_text = [(node_id, text) for node_id, text in page if text.strip()]
            without_text += len(page) - len(with_text)
            vectors = embedder.embed([text for _, text in with_text])
            rows = [{"id": node_id, "embedding": vector.tolist()}
                    for (node_id, _), vector in zip(with_text, vectors, strict=True)]
            embedded += session.execute_write(memory_queries.set_memory_embeddings, tenant, rows)
    return ReembedReport(tenant, embedded, without_text)
