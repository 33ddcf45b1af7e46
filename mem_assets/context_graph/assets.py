import json

import dagster as dg
from pydantic import Field

from mem_assets.context_graph import queries
from mem_assets.context_graph import schema_export as schema_doc
from mem_assets.context_graph.loading import ingest_context
from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.run_config import WorkingMemoryConfig
from mem_resources.embedder import EmbedderResource
from mem_resources.metadata import change_marker, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import NEO4J_WRITE_POOL, OWNERS

SCHEMA_CHECK = "matches_reference_schema"


class ContextGraphConfig(WorkingMemoryConfig):
    """The context config file (ids, characters, scene per tenant) is the ``context_profiles``
    resource's (MEMTEND_CONTEXT_CONFIG): one per deployment, with a section per tenant."""

    batch_size: int = Field(default=2000, ge=1, description="Records per write transaction.")


class GraphSchemaConfig(dg.Config):
    reference_file: str = Field(default="", description="Reference schema JSON; empty: the shipped one.")


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "python"},
    group_name="context",
    owners=OWNERS,
    code_version="1",
    pool=NEO4J_WRITE_POOL,
)
def context_graph(context: dg.AssetExecutionContext, config: ContextGraphConfig, neo4j: Neo4jResource,
                  embedder: EmbedderResource, inbox: InboxResource,
                  context_profiles: ContextProfiles) -> dg.MaterializeResult:
    """Seed 002's context graph: realtime/offline records as memories with characters, scenes,
    conversations and claims (older single-valued claims superseded)."""
    tenant = tenant_of(context)
    profiles = context_profiles.load()
    report = ingest_context(tenant, neo4j, embedder, inbox, profiles, config.batch_size,
                            config.working_memory_capacity)
    for skipped in report.files_skipped:
        context.log.warning(f"context inbox entry skipped, not read: {skipped}")
    if report.rejected:
        context.log.warning(f"{report.rejected} records quarantined in {inbox.quarantine_path(tenant)}")
    superseded = [{"superseded": old, "by": new} for old, new in report.superseded]
    return dg.MaterializeResult(metadata={
        **change_marker(context, report.nodes_created + report.working_trimmed
                        + len(report.superseded) > 0),
        "files_ingested": len(report.files_ingested),
        "files_already_ingested": len(report.files_already_ingested),
        "files_skipped": report.files_skipped,
        "accepted": report.accepted,
        "rejected": report.rejected,
        "new_memories": report.new_memories,
        "nodes_created": report.nodes_created,
        "claims": report.claims,
        "claims_superseded": len(report.superseded),
        "working_memory_archived": report.working_trimmed,
        "rejections_by_kind": dict(report.rejection_kinds),
        "preview": preview_table(report.preview, ["id", "memory"]),
        "superseded": preview_table(superseded, ["superseded", "by"]),
    })


def _memos_schema(neo4j: Neo4jResource, tenant: str) -> dg.MaterializeResult:
    """On a MemOS graph the reference is MemOS's own model: every memory node must be one MemOS
    reads back (seed 002's reference document does not apply)."""
    with neo4j.session() as session:
        unreadable = session.execute_read(queries.memos_unreadable, tenant)
    table = "\n".join(f"- `{row['id']}`: {', '.join(row['problems'])}" for row in unreadable)
    return dg.MaterializeResult(
        metadata={"reference": "MemOS 2.x TextualMemoryItem", "unreadable_by_memos": len(unreadable)},
        check_results=[dg.AssetCheckResult(
            check_name=SCHEMA_CHECK, passed=not unreadable, severity=dg.AssetCheckSeverity.ERROR,
            metadata={"breaking": len(unreadable), "differences": dg.MetadataValue.md(table or "none")},
        )],
    )


@dg.asset(
    partitions_def=tenant_partitions,
    deps=["memory_items", context_graph, "merged_nodes", "summary_parents"],
    kinds={"neo4j", "python"},
    group_name="schema",
    owners=OWNERS,
    code_version="1",
    check_specs=[dg.AssetCheckSpec(SCHEMA_CHECK, asset="graph_schema", partitions_def=tenant_partitions,
                                   description="No breaking difference from the reference schema.")],
)
def graph_schema(context: dg.AssetExecutionContext, config: GraphSchemaConfig,
                 neo4j: Neo4jResource) -> dg.MaterializeResult:
    """The tenant's live graph schema (node types, properties, relationships), diffed against
    the reference so that realtime and offline writers stay compatible."""
    tenant = tenant_of(context)
    if neo4j.dialect.memos:
        return _memos_schema(neo4j, tenant)
    document = schema_doc.export_document(neo4j, tenant)
    reference = schema_doc.load_document(config.reference_file or schema_doc.REFERENCE_PATH)
    differences = schema_doc.diff(reference, document)
    broken = schema_doc.breaking(differences)
    diff_md = schema_doc.render_diff_markdown(differences, "reference", f"tenant {tenant}")
    return dg.MaterializeResult(
        metadata={
            "node_types": len(document.node_types),
            "relationship_types": len({r.type for r in document.relationship_types}),
            "nodes": sum(n.count for n in document.node_types),
            "breaking_differences": len(broken),
            "expected_differences": len(differences) - len(broken),
            "schema": dg.MetadataValue.md(schema_doc.render_markdown(document)),
            "diff": dg.MetadataValue.md(diff_md),
            "schema_json": dg.MetadataValue.json(json.loads(document.model_dump_json())),
        },
        check_results=[dg.AssetCheckResult(
            check_name=SCHEMA_CHECK,
            passed=not broken,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"breaking": len(broken), "differences": dg.MetadataValue.md(diff_md)},
        )],
    )
