"""Introspect the live graph's schema: aggregated in Cypher, so only summary rows leave Neo4j.

Nodes are grouped by label set, id prefix (``mem:``, ``char:``, …) and id format — the id after
its prefix with every run of characters other than ``:`` and ``|`` folded to ``<x>``, and md5s,
dates and chapters named (``<md5>``, ``<date>``, ``ch<n>``). ``$tenant`` null means every tenant.
"""

from __future__ import annotations

from typing import Any

from neo4j import ManagedTransaction

_SCOPE = "($tenant IS NULL OR n.user_name = $tenant)"
_PREFIX = ("CASE WHEN {v}.id IS :: STRING AND {v}.id CONTAINS ':' "
           "THEN split({v}.id, ':')[0] + ':' ELSE '' END")

_NODE_GROUPS = f"""
MATCH (n) WHERE {_SCOPE}
WITH labels(n) AS labels, {_PREFIX.format(v='n')} AS prefix, n.id AS id
WITH labels, prefix, CASE WHEN prefix = '' THEN '' ELSE substring(id, size(prefix)) END AS rest
WITH labels, prefix,
     CASE WHEN prefix = '' THEN ''
          WHEN rest =~ '[0-9a-f]{{32}}' THEN '<md5>'
          WHEN rest =~ '[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}' THEN '<date>'
          WHEN rest =~ 'ch[0-9]+' THEN 'ch<n>'
          ELSE reduce(shape = '', c IN split(rest, '') |
                      CASE WHEN c IN [':', '|'] THEN shape + c
                           WHEN shape ENDS WITH '<x>' THEN shape
                           ELSE shape + '<x>' END)
     END AS id_format
RETURN labels, prefix, id_format, count(*) AS count
"""

_NODE_PROPERTIES = f"""
MATCH (n) WHERE {_SCOPE}
WITH labels(n) AS labels, {_PREFIX.format(v='n')} AS prefix, keys(n) AS keys
UNWIND keys AS key
RETURN labels, prefix, key, count(*) AS count
"""

_RELATIONSHIPS = f"""
MATCH (n)-[r]->(m) WHERE {_SCOPE}
RETURN type(r) AS type,
       labels(n) AS source_labels, {_PREFIX.format(v='n')} AS source_prefix,
       labels(m) AS target_labels, {_PREFIX.format(v='m')} AS target_prefix,
       count(*) AS count,
       sum(CASE WHEN n.user_name = m.user_name THEN 0 ELSE 1 END) AS cross_tenant
"""


def node_groups(tx: ManagedTransaction, tenant: str | None) -> list[dict[str, Any]]:
    """One row per (labels, prefix, id_format) with its node count."""
    return [record.data() for record in tx.run(_NODE_GROUPS, tenant=tenant)]


def node_properties(tx: ManagedTransaction, tenant: str | None) -> list[dict[str, Any]]:
    """One row per (labels, prefix, property key) with how many nodes carry the key."""
    return [record.data() for record in tx.run(_NODE_PROPERTIES, tenant=tenant)]


def relationships(tx: ManagedTransaction, tenant: str | None) -> list[dict[str, Any]]:
    """One row per (type, source labels/prefix, target labels/prefix), with cross-tenant count."""
    return [record.data() for record in tx.run(_RELATIONSHIPS, tenant=tenant)]
