import dagster as dg
from pydantic import Field

from mem_assets.ingest.ingest import ingest_tenant
from mem_assets.partitions import tenant_of, tenant_partitions
from mem_resources.embedder import EmbedderResource
from mem_resources.inbox import InboxResource
from mem_resources.neo4j_resource import Neo4jResource


class IngestConfig(dg.Config):
    batch_size: int = Field(default=2000, ge=1, description="Items per write transaction.")
    max_text_chars: int = Field(default=8000, ge=1, description="Longer memory texts are quarantined.")
    working_memory_capacity: int = Field(default=20, ge=0,
                                         description="Activated WorkingMemory nodes kept per tenant.")


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "python"},
    group_name="ingest",
)
def memory_items(context: dg.AssetExecutionContext, config: IngestConfig, neo4j: Neo4jResource,
                 embedder: EmbedderResource, inbox: InboxResource) -> dg.MaterializeResult:
    """The tenant's memory nodes: new inbox lines written as long-term + working memory."""
    tenant = tenant_of(context)
    report = ingest_tenant(tenant, neo4j, embedder, inbox, config.batch_size,
                           config.max_text_chars, config.working_memory_capacity)
    for skipped in report.files_skipped:
        context.log.warning(f"inbox entry skipped, not read: {skipped}")
    if report.rejected:
        context.log.warning(f"{report.rejected} lines quarantined in {inbox.quarantine_path(tenant)}")
    preview = "\n".join(
        ["| id | type | memory |", "|---|---|---|"]
        + [f"| {row['id']} | {row['memory_type']} | {row['memory'].replace('|', '/')} |"
           for row in report.preview]
    )
    return dg.MaterializeResult(metadata={
        "files_ingested": report.files_ingested,
        "files_already_ingested": len(report.files_already_ingested),
        "files_skipped": report.files_skipped,
        "accepted": report.accepted,
        "rejected": report.rejected,
        "new": report.new,
        "already_present": report.already_present,
        "nodes_created": report.nodes_created,
        "working_memory_archived": report.working_trimmed,
        "rejections_by_kind": dict(report.rejection_kinds),
        "preview": dg.MetadataValue.md(preview),
    })
