"""Checks on a tenant's topic tree, run after its summary parents are written (one step)."""

import dagster as dg
from neo4j import Session

from mem_assets.reorg import queries
from mem_assets.reorg.assets import summary_parents
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.placement_plan import near_duplicate_topics
from mem_resources.checks import checks_step, topics_have_no_archived_members
from mem_resources.embedder import EmbedderResource
from mem_resources.metadata import offenders_result

DEFAULT_PLACEMENT = PlacementParams()
#: One reorganization cycle (the schedule runs daily): older unplaced memories need a reason.
CYCLE_HOURS = 24.0


def parent_edges_acyclic(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Following PARENT edges never leads back to where it started."""
    return offenders_result(session.execute_read(queries.parents_on_cycles, tenant),
                            "topics lie on a PARENT cycle")


def parents_have_two_members(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Every topic groups at least two memories of its own tenant."""
    return offenders_result(session.execute_read(queries.parents_with_few_members, tenant),
                            "topics have fewer than two members of their tenant")


def one_parent_per_level(session: Session, tenant: str) -> dg.AssetCheckResult:
    """No activated memory sits under two topics of the same level."""
    return offenders_result(session.execute_read(queries.nodes_with_two_parents_at_one_level, tenant),
                            "memories have two parents at one level")


def no_duplicate_parent_edges(session: Session, tenant: str) -> dg.AssetCheckResult:
    """No topic reaches a member through two PARENT edges: a retried or repeated write adds none."""
    return offenders_result(session.execute_read(queries.doubled_parent_edges, tenant),
                            "parent-child pairs have more than one PARENT edge")


def no_near_duplicate_topics(session: Session, tenant: str,
                             embedder: EmbedderResource) -> dg.AssetCheckResult:
    """No two activated top-level topics of one memory type and language have centroids at least
    the (default) merge threshold of their space alike: a theme is told once."""
    types = session.execute_read(queries.live_memory_types, tenant)
    stored = session.execute_read(queries.read_forest, tenant, types)
    offenders = near_duplicate_topics(stored, embedder.dimension, DEFAULT_PLACEMENT)
    return offenders_result(offenders, "pairs of top-level topics are near-duplicates")


def unplaced_memories_have_reasons(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Every live memory older than one cycle is under a topic or set aside with a recorded reason."""
    return offenders_result(session.execute_read(queries.unexplained_orphans, tenant, CYCLE_HOURS),
                            f"memories older than {CYCLE_HOURS} h have no topic and no recorded reason")


reorg_checks = [checks_step("reorg_checks", summary_parents, [
    parent_edges_acyclic, parents_have_two_members, one_parent_per_level, no_duplicate_parent_edges,
    topics_have_no_archived_members, no_near_duplicate_topics, unplaced_memories_have_reasons], blocking=[parent_edges_acyclic])]
