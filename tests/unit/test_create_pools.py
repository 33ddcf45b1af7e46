"""`memtend create-pools`: the project's pools exist with the instance's default limit before any
run starts, and limits an operator set stay."""

from __future__ import annotations

import dagster as dg

from mem_resources.run_policy import LLM_POOL, NEO4J_WRITE_POOL, create_pools


def _limits(instance: dg.DagsterInstance) -> dict[str, tuple[int, bool]]:
    return {pool.name: (pool.limit, pool.from_default)
            for pool in instance.event_log_storage.get_pool_limits()}


def test_pools_are_created_once_with_the_default_limit_and_operator_limits_stay() -> None:
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 3}}}) as instance:
        instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
        assert create_pools(instance) == {NEO4J_WRITE_POOL: 3}
        assert create_pools(instance) == {}
        assert _limits(instance) == {NEO4J_WRITE_POOL: (3, False), LLM_POOL: (1, False)}


def test_without_a_default_limit_pools_stay_unlimited() -> None:
    with dg.instance_for_test() as instance:
        assert create_pools(instance) == {}
        assert _limits(instance) == {}
