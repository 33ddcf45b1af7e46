"""Checks on a tenant's topic tree, run after its summary parents are written."""

import dagster as dg

from mem_assets.reorg import queries
from mem_assets.reorg.assets import summary_parents
from mem_resources.metadata import offenders_result
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_partitions


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions, blocking=True)
def parent_edges_acyclic(context: dg.AssetCheckExecutionContext, neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Following PARENT edges never leads back to where it started."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.parents_on_cycles, context.partition_key),
                                "topics lie on a PARENT cycle")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def parents_have_two_members(context: dg.AssetCheckExecutionContext,
                             neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Every topic groups at least two memories of its own tenant."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.parents_with_few_members, context.partition_key),
                                "topics have fewer than two members of their tenant")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def one_parent_per_level(context: dg.AssetCheckExecutionContext,
                         neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No activated memory sits under two topics of the same level."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.nodes_with_two_parents_at_one_level, context.partition_key),
                                "memories have two parents at one level")


reorg_checks = [parent_edges_acyclic, parents_have_two_members, one_parent_per_level]
