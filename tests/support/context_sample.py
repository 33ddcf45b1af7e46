"""The bundled context sample (data/sample/inbox/xnne) loaded into a test tenant through Dagster."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from mem_assets.context_graph.assets import context_graph
from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.ingest.assets import memory_items
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.pipeline import base_resources, materialize_partition

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
SAMPLE_INBOX = SAMPLE / "inbox" / "xnne"
SAMPLE_CONFIG = SAMPLE / "context_config.json"


def with_context_config(resources: dict[str, Any], config_file: Path = SAMPLE_CONFIG) -> dict[str, Any]:
    """``resources`` with the context profiles of ``config_file`` (MEMTEND_CONTEXT_CONFIG)."""
    return {**resources, "context_profiles": ContextProfiles(config_file=str(config_file))}


def stage_sample(inbox_root: Path, tenant: str, context_files: tuple[str, ...] = ("offline.jsonl", "realtime.jsonl"),
                 plain: bool = True) -> None:
    """Copy the sample's context files (and its plain memory file) into ``tenant``'s inbox."""
    folder = inbox_root / tenant / "context"
    folder.mkdir(parents=True, exist_ok=True)
    for name in context_files:
        shutil.copy(SAMPLE_INBOX / "context" / name, folder / name)
    if plain:
        for path in SAMPLE_INBOX.glob("*.jsonl"):
            shutil.copy(path, inbox_root / tenant / path.name)


def load_sample(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance, tmp: Path,
                context_files: tuple[str, ...] = ("offline.jsonl", "realtime.jsonl"),
                plain: bool = True) -> dg.ExecuteInProcessResult:
    stage_sample(tmp / "inbox", tenant, context_files, plain)
    assets = [memory_items, context_graph] if plain else [context_graph]
    return materialize_partition(assets, tenant, instance,
                                 with_context_config(base_resources(neo4j, tmp / "inbox", tmp / "quarantine")))
