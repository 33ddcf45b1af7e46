"""Checks on a tenant's topic tree, run after its summary parents are written."""

import dagster as dg

from mem_assets.reorg import queries
from mem_assets.reorg.assets import summary_parents
from mem_assets.reorg.placement import PlacementParams, Topic, near_duplicate_roots
from mem_assets.reorg.topic_space import language
from mem_resources.embedder import EmbedderResource
from mem_resources.metadata import offenders_result
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions

DEFAULT_PLACEMENT = PlacementParams()
#: One reorganization cycle (the schedule runs daily): older unplaced memories need a reason.
CYCLE_HOURS = 24.0


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions, blocking=True)
def parent_edges_acyclic(context: dg.AssetCheckExecutionContext, neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Following PARENT edges never leads back to where it started."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.parents_on_cycles, tenant_of(context)),
                                "topics lie on a PARENT cycle")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def parents_have_two_members(context: dg.AssetCheckExecutionContext,
                             neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Every topic groups at least two memories of its own tenant."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.parents_with_few_members, tenant_of(context)),
                                "topics have fewer than two members of their tenant")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def one_parent_per_level(context: dg.AssetCheckExecutionContext,
                         neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No activated memory sits under two topics of the same level."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.nodes_with_two_parents_at_one_level, tenant_of(context)),
                                "memories have two parents at one level")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def no_archived_members(context: dg.AssetCheckExecutionContext, neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """No activated topic keeps a PARENT edge to an archived memory (hygiene moves or drops it)."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.topics_with_archived_members, context.partition_key),
                                "PARENT edges lead from activated topics to archived members")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def no_near_duplicate_topics(context: dg.AssetCheckExecutionContext, neo4j: Neo4jResource,
                             embedder: EmbedderResource) -> dg.AssetCheckResult:
    """No two activated top-level topics of one memory type and language have centroids at least
    the (default) merge threshold alike: a theme is told once."""
    tenant = context.partition_key
    with neo4j.session() as session:
        types = session.execute_read(queries.live_memory_types, tenant)
        stored = session.execute_read(queries.read_forest, tenant, types, embedder.dimension)
    offenders = []
    for memory_type in sorted({t.memory_type for t in stored}):
        roots = [Topic(id=t.id, level=t.level, language=t.language or language(t.memory), children=t.children,
                       vector_sum=t.centroid * (t.member_count or 1), member_count=t.member_count or 1)
                 for t in stored if t.memory_type == memory_type and t.parent is None and t.centroid is not None]
        offenders.extend({"first": a.id, "second": b.id, "similarity": round(sim, 3)}
                         for sim, a, b in near_duplicate_roots(roots, DEFAULT_PLACEMENT.merge_similarity))
    return offenders_result(offenders, "pairs of top-level topics are near-duplicates")


@dg.asset_check(asset=summary_parents, partitions_def=tenant_partitions)
def unplaced_memories_have_reasons(context: dg.AssetCheckExecutionContext,
                                   neo4j: Neo4jResource) -> dg.AssetCheckResult:
    """Every live memory older than one cycle is under a topic or set aside with a recorded reason."""
    with neo4j.session() as session:
        return offenders_result(session.execute_read(queries.unexplained_orphans, context.partition_key,
                                                     CYCLE_HOURS),
                                f"memories older than {CYCLE_HOURS} h have no topic and no recorded reason")


reorg_checks = [parent_edges_acyclic, parents_have_two_members, one_parent_per_level, no_archived_members,
                no_near_duplicate_topics, unplaced_memories_have_reasons]
