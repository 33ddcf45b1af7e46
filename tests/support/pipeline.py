"""Run the real assets through Dagster against the real Neo4j."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.ingest.inbox import InboxResource
from mem_resources.embedder import HashingEmbedder
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.table_io import TableIOManager


def write_inbox_file(inbox_root: Path, tenant: str, name: str, lines: Sequence[dict | str | bytes]) -> Path:
    """Write a JSONL file; dicts are JSON-encoded, str and bytes are written as they are."""
    folder = inbox_root / tenant
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("wb") as out:
        for line in lines:
            if isinstance(line, dict):
                line = json.dumps(line, ensure_ascii=False)
            out.write((line.encode("utf-8") if isinstance(line, str) else line) + b"\n")
    return path


def base_resources(neo4j: Neo4jResource, inbox_root: Path, quarantine: Path) -> dict[str, Any]:
    return {
        "neo4j": neo4j,
        "embedder": HashingEmbedder(dimension=neo4j.embedding_dimension),
        "inbox": InboxResource(root=str(inbox_root), quarantine_dir=str(quarantine)),
        "context_profiles": ContextProfiles(),
        "io_manager": TableIOManager(base_path=str(quarantine.parent / "tables")),
    }


def materialize_partition(assets: Sequence[Any], tenant: str, instance: dg.DagsterInstance,
                          resources: dict[str, Any],
                          run_config: dict[str, Any] | None = None) -> dg.ExecuteInProcessResult:
    if not instance.has_dynamic_partition("tenants", tenant):
        instance.add_dynamic_partitions("tenants", [tenant])
    return dg.materialize(list(assets), partition_key=tenant, instance=instance,
                          resources=resources, run_config=run_config or {})


def node_count(neo4j: Neo4jResource, tenant: str) -> int:
    with neo4j.session() as session:
        return session.run("MATCH (n {user_name: $tenant}) RETURN count(n) AS n",
                           tenant=tenant).single()["n"]
