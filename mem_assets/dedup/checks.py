"""Graph invariants dedup promises, checked per tenant after each merge run (one step)."""

import dagster as dg
from neo4j import Session

from mem_assets.dedup import queries
from mem_assets.dedup.assets import merged_nodes
from mem_resources.checks import checks_step, topics_have_no_archived_members
from mem_resources.metadata import offenders_result


def no_duplicate_payloads(session: Session, tenant: str) -> dg.AssetCheckResult:
    """No two activated (non-working) nodes of the tenant share a payload hash."""
    return offenders_result(session.execute_read(queries.duplicate_payload_hashes, tenant),
                            "payload hashes shared by activated nodes")


def archived_have_successor(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Every archived long-term node points at an existing MERGED_TO / SUPERSEDED_BY successor."""
    return offenders_result(session.execute_read(queries.archived_without_successor, tenant),
                            "archived nodes without a successor")


def lineage_edges_unique(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Each archived node has one MERGED_TO / SUPERSEDED_BY edge: never two to one successor
    (two resolutions of the same node) nor edges to two successors."""
    return offenders_result(session.execute_read(queries.duplicate_lineage_edges, tenant),
                            "nodes with more than one lineage edge")


def no_cross_tenant_edges(session: Session, tenant: str) -> dg.AssetCheckResult:
    """No relationship joins a node of this tenant to a node of another tenant."""
    return offenders_result(session.execute_read(queries.cross_tenant_edges, tenant),
                            "edges join this tenant to another")


def archived_left_their_topics(session: Session, tenant: str) -> dg.AssetCheckResult:
    """Every memory a merge or supersede archived has left its topics: no activated topic has a
    PARENT edge to an archived memory (reorganization checks the same on its own asset)."""
    return topics_have_no_archived_members(session, tenant)


dedup_checks = [checks_step("dedup_checks", merged_nodes, [
    no_duplicate_payloads, archived_have_successor, lineage_edges_unique, no_cross_tenant_edges,
    archived_left_their_topics])]
