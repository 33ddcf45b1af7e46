import dagster as dg
from pydantic import Field

from mem_assets.ingest.inbox import InboxResource
from mem_assets.ingest.loading import ingest_tenant
from mem_assets.ingest.run_config import WorkingMemoryConfig
from mem_resources import model_passes
from mem_resources.embedder import EmbedderResource
from mem_resources.metadata import change_marker, preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import NEO4J_WRITE_POOL, OWNERS


class IngestConfig(WorkingMemoryConfig):
    batch_size: int = Field(default=1000, ge=1, description=(
        "Items per write transaction (at 1,000 the slowest write of a 100k ingest stays near 1 s; "
        "vector-index insertion makes a 2,000-item write ~2 s)."))
    max_text_chars: int = Field(default=8000, ge=1, description="Longer memory texts are quarantined.")


@dg.asset(
    partitions_def=tenant_partitions,
    kinds={"neo4j", "python"},
    group_name="ingest",
    owners=OWNERS,
    code_version="1",
    pool=NEO4J_WRITE_POOL,
)
def memory_items(context: dg.AssetExecutionContext, config: IngestConfig, neo4j: Neo4jResource,
                 embedder: EmbedderResource, inbox: InboxResource) -> dg.MaterializeResult:
    """The tenant's memory nodes: new inbox lines written as long-term + working memory."""
    tenant, started = tenant_of(context), model_passes.snapshot()
    report = ingest_tenant(tenant, neo4j, embedder, inbox, config.batch_size,
                           config.max_text_chars, config.working_memory_capacity,
                           sink=context.log.info)
    for skipped in report.files_skipped:
        context.log.warning(f"inbox entry skipped, not read: {skipped}")
    if report.rejected:
        context.log.warning(f"{report.rejected} lines quarantined in {inbox.quarantine_path(tenant)}")
    return dg.MaterializeResult(metadata={
        **change_marker(context, report.nodes_created + report.working_trimmed > 0),
        "files_ingested": len(report.files_ingested),
        "files": dg.MetadataValue.json(report.files_ingested),
        "files_already_ingested": len(report.files_already_ingested),
        "files_skipped": report.files_skipped,
        "accepted": report.accepted,
        "rejected": report.rejected,
        "new": report.new,
        "already_present": report.already_present,
        "nodes_created": report.nodes_created,
        "working_memory_twins_created": max(report.nodes_created - report.new, 0),
        "nodes_created_note": "Each new long-term item is also written as its WorkingMemory twin "
                              "(seed §3.2 dual write), so nodes_created is up to twice new.",
        "working_memory_archived": report.working_trimmed,
        "rejections_by_kind": dict(report.rejection_kinds),
        "slowest_existence_check_s": round(report.slowest_check_s, 3),
        "slowest_write_s": round(report.slowest_write_s, 3),
        "preview": preview_table(report.preview, ["id", "memory_type", "memory"]),
        **model_passes.metadata(started),
    })
