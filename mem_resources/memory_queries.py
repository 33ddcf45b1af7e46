"""Memory reads and Cypher fragments every domain shares; the tenant write lease."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neo4j import ManagedTransaction

from mem_resources.memory_model import MemoryItem


def live_memory(var: str) -> str:
    """Cypher predicate on node ``var``: a memory dedup and reorganization work on. Nodes other
    writers put in may lack our properties, so a missing status counts as activated and a missing
    memory type as LongTermMemory; working-memory copies and topic parents are left out."""
    return (f"coalesce({var}.status, 'activated') = 'activated' "
            f"AND coalesce({var}.memory_type, 'LongTermMemory') <> 'WorkingMemory' "
            f"AND coalesce({var}.type, 'fact') <> 'topic'")


def quote_name(name: str) -> str:
    """A label or relationship type as a Cypher identifier, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def memory_text(var: str) -> str:
    """Cypher expression: node ``var``'s text, ``memory`` or else ``data`` (other writers may
    leave ``memory`` empty and put the text in ``data``)."""
    return f"CASE WHEN {var}.memory <> '' THEN {var}.memory WHEN {var}.data <> '' THEN {var}.data ELSE '' END"


class Bulk(list):
    """A bulk query parameter (rows, vectors) with a short ``repr``.

    The driver formats every query's parameters for its debug log before the log level is
    checked (neo4j 6.4, Bolt 5 ``run``): for 2,000 rows of 256-dim vectors that ``repr`` took
    0.32 s of a 0.36 s round trip. The bytes sent are the same as for a plain list."""

    def __repr__(self) -> str:
        return f"<{len(self)} items>"


def by_id(var: str, label: str = "MemoryItem") -> str:
    """Index hint for a node matched on (tenant, id) (``label`` as written in the query). Without
    it a plan cached while the tenant was small may seek the tenant index and filter on id, which
    costs a scan of the tenant per id once it has grown (multi-second existence checks at 20k
    items)."""
    return f"USING INDEX {var}:{label}(user_name, id)"


def read_memories(tx: ManagedTransaction, tenant: str, ids: Sequence[str]) -> list[MemoryItem]:
    result = tx.run(
        f"UNWIND $ids AS id MATCH (m:MemoryItem {{user_name: $tenant, id: id}}) {by_id('m')} "
        "RETURN properties(m) AS props",
        tenant=tenant, ids=list(ids),
    )
    return [MemoryItem.from_properties(record["props"]) for record in result]


def count_by_type_and_status(tx: ManagedTransaction, tenant: str) -> dict[tuple[str, str, str], int]:
    """Node counts by (memory_type, ``topic`` for summary parents else ``memory``, status)."""
    result = tx.run(
        "MATCH (m:MemoryItem {user_name: $tenant}) "
        "RETURN m.memory_type AS memory_type, "
        "CASE m.type WHEN 'topic' THEN 'topic' ELSE 'memory' END AS kind, "
        "m.status AS status, count(*) AS n",
        tenant=tenant,
    )
    return {(r["memory_type"], r["kind"], r["status"]): r["n"] for r in result}


def relationship_counts(tx: ManagedTransaction, tenant: str) -> dict[str, int]:
    result = tx.run(
        "MATCH (:MemoryItem {user_name: $tenant})-[r]-() RETURN type(r) AS type, count(DISTINCT r) AS n",
        tenant=tenant,
    )
    return {r["type"]: r["n"] for r in result}


# --- the per-tenant write lease (see mem_resources/tenant_lock.py) ------------------------------

def lock_tenant_lease(tx: ManagedTransaction, tenant: str) -> dict[str, Any]:
    """The tenant's lease node, write-locked for the rest of the transaction (a property write
    takes the node's lock, so a concurrent acquirer waits here and then reads our outcome).
    It has no ``user_name``: no tenant query, backup or check ever sees it."""
    record = tx.run(
        """
        MERGE (l:TenantLock {tenant: $tenant})
        SET l.locked = true
        REMOVE l.locked
        RETURN l.holder AS holder, coalesce(l.claims, []) AS claims, l.info AS info,
               l.since AS since, l.expires_at IS NULL OR l.expires_at < datetime() AS expired
        """,
        tenant=tenant,
    ).single(strict=True)
    return record.data()


def write_tenant_lease(tx: ManagedTransaction, tenant: str, holder: str | None, claims: list[str],
                       info: str | None, ttl_s: float, fresh: bool) -> None:
    """Set the lease after :func:`lock_tenant_lease` in the same transaction; no claims frees it."""
    tx.run(
        """
        MATCH (l:TenantLock {tenant: $tenant})
        SET l.holder = CASE WHEN size($claims) = 0 THEN null ELSE $holder END,
            l.claims = $claims,
            l.info = CASE WHEN size($claims) = 0 THEN null ELSE $info END,
            l.since = CASE WHEN size($claims) = 0 THEN null WHEN $fresh THEN datetime() ELSE l.since END,
            l.expires_at = CASE WHEN size($claims) = 0 THEN null
                                ELSE datetime() + duration({milliseconds: toInteger($ttl_s * 1000)}) END
        """,
        tenant=tenant, holder=holder, claims=claims, info=info, ttl_s=ttl_s, fresh=fresh,
    ).consume()


def renew_tenant_lease(tx: ManagedTransaction, tenant: str, holder: str, claim: str, ttl_s: float) -> bool:
    """Push the lease's expiry on; False when it is no longer ours (it expired and was taken)."""
    record = tx.run(
        """
        MATCH (l:TenantLock {tenant: $tenant})
        WHERE l.holder = $holder AND $claim IN coalesce(l.claims, [])
        SET l.expires_at = datetime() + duration({milliseconds: toInteger($ttl_s * 1000)})
        RETURN count(l) AS renewed
        """,
        tenant=tenant, holder=holder, claim=claim, ttl_s=ttl_s,
    ).single(strict=True)
    return record["renewed"] == 1


def mark_incomplete(tx: ManagedTransaction, tenant: str, command: str) -> None:
    """Mark on the tenant's lease node that an operation is under way: ``command`` finishes it."""
    tx.run("MERGE (l:TenantLock {tenant: $tenant}) SET l.incomplete = $command, l.incomplete_since = datetime()",
           tenant=tenant, command=command).consume()


def clear_incomplete(tx: ManagedTransaction, tenant: str) -> None:
    tx.run("MATCH (l:TenantLock {tenant: $tenant}) REMOVE l.incomplete, l.incomplete_since",
           tenant=tenant).consume()


def incomplete_operation(tx: ManagedTransaction, tenant: str) -> dict[str, Any] | None:
    """The unfinished operation's command and start, or None."""
    record = tx.run("MATCH (l:TenantLock {tenant: $tenant}) WHERE l.incomplete IS NOT NULL "
                    "RETURN l.incomplete AS command, toString(l.incomplete_since) AS since",
                    tenant=tenant).single()
    return record.data() if record else None


def memory_tenants(tx: ManagedTransaction) -> list[str]:
    result = tx.run("MATCH (m:MemoryItem) WHERE m.user_name IS NOT NULL "
                    "RETURN DISTINCT m.user_name AS tenant ORDER BY tenant")
    return [record["tenant"] for record in result]


def memory_text_page(tx: ManagedTransaction, tenant: str, after: str, size: int) -> list[tuple[str, str]]:
    """(id, text) of the tenant's memory nodes with an id after ``after``, in id order: one page."""
    result = tx.run(
        "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.id > $after "
        f"RETURN m.id AS id, {memory_text('m')} AS text ORDER BY m.id LIMIT $size",
        tenant=tenant, after=after, size=size,
    )
    return [(record["id"], record["text"]) for record in result]


def set_memory_embeddings(tx: ManagedTransaction, tenant: str, rows: Sequence[dict[str, Any]]) -> int:
    """Replace embeddings in place (``rows``: id, embedding); nothing else on the node changes."""
    record = tx.run(
        f"UNWIND $rows AS row MATCH (m:MemoryItem {{user_name: $tenant, id: row.id}}) {by_id('m')} "
        "SET m.embedding = row.embedding RETURN count(m) AS n",
        tenant=tenant, rows=Bulk(rows),
    ).single()
    return record["n"] if record else 0


def topics_with_archived_members(tx: ManagedTransaction, tenant: str, limit: int = 20) -> list[dict[str, Any]]:
    """Activated topics with a PARENT edge to an archived memory: a merge or supersede (dedup) or
    hygiene (reorganization) that left a topic pointing at history instead of the survivor."""
    result = tx.run(
        """
        MATCH (t:MemoryItem {user_name: $tenant, type: 'topic'})-[:PARENT]->
              (c:MemoryItem {user_name: $tenant, status: 'archived'})
        WHERE coalesce(t.status, 'activated') = 'activated'
        RETURN t.id AS topic, c.id AS member ORDER BY topic, member LIMIT $limit
        """,
        tenant=tenant, limit=limit,
    )
    return [record.data() for record in result]
