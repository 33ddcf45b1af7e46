"""Graph invariants dedup promises, checked per tenant after each merge run."""

import dagster as dg

from mem_assets.dedup import queries
from mem_assets.dedup.assets import merged_nodes
from mem_resources.metadata import offenders_result
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions


@dg.asset_check(asset=merged_nodes, partitions_def=tenant_partitions)
def no_duplicate_payloads(context: dg.AssetCheckExecutionContext,
                          neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No two activated (non-working) nodes of the tenant share a payload hash."""
    with neo4j.session() as session:
        clashes = session.execute_read(queries.duplicate_payload_hashes, tenant_of(context))
    return offenders_result(clashes, "payload hashes shared by activated nodes")


@dg.asset_check(asset=merged_nodes, partitions_def=tenant_partitions)
def archived_have_successor(context: dg.AssetCheckExecutionContext,
                            neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Every archived long-term node points at an existing MERGED_TO / SUPERSEDED_BY successor."""
    with neo4j.session() as session:
        orphans = session.execute_read(queries.archived_without_successor, tenant_of(context))
    return offenders_result(orphans, "archived nodes without a successor")


@dg.asset_check(asset=merged_nodes, partitions_def=tenant_partitions)
def lineage_edges_unique(context: dg.AssetCheckExecutionContext,
                         neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Each archived node has one MERGED_TO / SUPERSEDED_BY edge: never two to one successor
    (two resolutions of the same node) nor edges to two successors."""
    with neo4j.session() as session:
        nodes = session.execute_read(queries.duplicate_lineage_edges, tenant_of(context))
    return offenders_result(nodes, "nodes with more than one lineage edge")


@dg.asset_check(asset=merged_nodes, partitions_def=tenant_partitions)
def no_cross_tenant_edges(context: dg.AssetCheckExecutionContext,
                          neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No relationship joins a node of this tenant to a node of another tenant."""
    with neo4j.session() as session:
        edges = session.execute_read(queries.cross_tenant_edges, tenant_of(context))
    return offenders_result(edges, "edges join this tenant to another")


@dg.asset_check(asset=merged_nodes, partitions_def=tenant_partitions)
def topics_have_no_archived_members(context: dg.AssetCheckExecutionContext,
                                    neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No activated topic has a PARENT edge to an archived memory: a merge or supersede moves a
    topic's edge to the survivor (or drops it when the survivor is already under a topic)."""
    with neo4j.session() as session:
        edges = session.execute_read(queries.topics_with_archived_members, context.partition_key)
    return offenders_result(edges, "activated topics point at archived members")


dedup_checks = [no_duplicate_payloads, archived_have_successor, lineage_edges_unique,
                no_cross_tenant_edges, topics_have_no_archived_members]
