"""Soft delete and undelete of memories (seed 000 §5.1): a status change, never a removal.

Contract with every other stage: pipelines read only ``status = 'activated'`` memories, so a
``deleted`` node drops out of dedup, reorganization and search while its data, edges and history
stay in the graph; :func:`undelete_memories` puts back the status it had (activated, archived…).
"""

from __future__ import annotations

from mem_assets.lifecycle import queries
from mem_assets.lifecycle.queries import MemoryFilter
from mem_resources.memory_model import utc_now
from mem_resources.neo4j_resource import Neo4jResource


def _selection(ids: list[str], where: MemoryFilter) -> list[str] | None:
    if not ids and where.is_empty():
        raise ValueError("name the memories: give ids, a filter, or both (they combine with AND)")
    return ids or None


def soft_delete_memories(neo4j: Neo4jResource, tenant: str, ids: list[str], where: MemoryFilter,
                         evolve_to: list[str] | None = None, with_twins: bool = True) -> list[str]:
    """Mark the tenant's matching memories deleted; returns the ids that changed."""
    selected = _selection(ids, where)
    with neo4j.session() as session:
        return session.execute_write(queries.soft_delete, tenant, selected, where, evolve_to or [],
                                     utc_now(), with_twins)


def undelete_memories(neo4j: Neo4jResource, tenant: str, ids: list[str], where: MemoryFilter,
                      with_twins: bool = True) -> list[str]:
    """Restore the tenant's matching deleted memories; returns the ids that changed."""
    selected = _selection(ids, where)
    with neo4j.session() as session:
        return session.execute_write(queries.undelete, tenant, selected, where, with_twins)
