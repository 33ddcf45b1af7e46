"""How assets run, shared by every domain: owners, concurrency pools and retries.

Pools (limits set on the instance, see README "Production"; default 4 each from dagster.yaml):
- ``neo4j_write``: steps that write a tenant's graph in bulk (ingest, context, dedup marks,
  lifecycle restore/drop/soft delete); bounds concurrent write load on Neo4j across tenants.
- ``llm``: steps that may call the chat model (judging, fusing, topic summaries); bounds
  concurrent load on the LLM endpoint, whose rate limit is usually the tighter one.
Each tenant's run executes one step at a time (in-process executor), so a pool limit is the
number of tenants doing that kind of work at once.
"""

from __future__ import annotations

import dagster as dg

OWNERS = ["team:memory-platform"]
NEO4J_WRITE_POOL = "neo4j_write"
LLM_POOL = "llm"

#: Transient failures (endpoint down, Neo4j leader switch) retried with growing, jittered waits:
#: about 10 s, 20 s, 40 s. Retrying is safe: every stage is idempotent.
LLM_RETRY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL,
                           jitter=dg.Jitter.PLUS_MINUS)

POOLS = (NEO4J_WRITE_POOL, LLM_POOL)


def create_pools(instance: dg.DagsterInstance) -> dict[str, int]:
    """Give each project pool its limit on the instance, once, before runs start.

    Left to the runs, the first steps of two concurrent runs both create a pool, and on
    PostgreSQL the loser's run fails (dagster-io/dagster#33552). The limit is the instance's
    ``concurrency.pools.default_limit``; without one, pools are unlimited and nothing is created.
    Pools already on the instance (e.g. set with ``dagster instance concurrency set``) keep their
    limit. Returns the pools created with their limits.
    """
    storage = instance.event_log_storage
    limit = instance.global_op_concurrency_default_limit
    if limit is None or not storage.supports_global_concurrency_limits:
        return {}
    existing = {pool.name for pool in storage.get_pool_limits()}
    created = {pool: limit for pool in POOLS if pool not in existing}
    for pool, slots in created.items():
        storage.set_concurrency_slots(pool, slots)
    return created
