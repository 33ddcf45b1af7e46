"""Dagster jobs for a tenant's lifecycle: backup, restore, drop, soft delete, undelete.

They are op jobs, not assets: each is an action an operator launches with typed config (or the
nightly schedule launches), and the tenant is config rather than a partition key because a
dropped tenant has no partition to restore into.
"""

import dagster as dg
from pydantic import Field

from mem_assets.lifecycle.backup_files import DEFAULT_KEEP_LAST, check_tenant, list_backups
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.lifecycle.operations import backup_tenant, drop_tenant, restore_tenant
from mem_assets.lifecycle.queries import MemoryFilter
from mem_assets.lifecycle.soft_delete import soft_delete_memories, undelete_memories
from mem_assets.lifecycle.tenant_records import forget_tenant
from mem_resources.neo4j_resource import PARTITION_TAG, Neo4jResource
from mem_resources.partitions import tenant_partitions
from mem_resources.run_policy import NEO4J_WRITE_POOL
from mem_resources.table_io import TableIOManager
from mem_resources.tenant_lock import LOCK_HOLDER_TAG
from mem_resources.tenants import TenantName, is_valid_tenant


def tenant_run_tags(tenant: str) -> dict[str, str]:
    """Tags that put a lifecycle run under the per-tenant run limit of dagster.yaml (keyed on
    the partition tag every pipeline run of the tenant carries)."""
    return {PARTITION_TAG: tenant}


class TenantConfig(dg.Config):
    tenant: TenantName = Field(description="Tenant (partition key, user_name on every node).")


class BackupConfig(TenantConfig):
    keep_last: int = Field(default=DEFAULT_KEEP_LAST, ge=1,
                           description="Backups kept per tenant; older ones go once this one is done.")
    page_size: int = Field(default=1000, ge=1, description="Nodes read per query.")


class RestoreConfig(TenantConfig):
    backup_id: str | None = Field(default=None, description="Backup to restore; the newest if empty.")
    batch_size: int = Field(default=500, ge=1, description="Nodes or relationships per write.")


class DropConfig(BackupConfig):
    confirm: str = Field(description="Type the tenant name again: a drop deletes its whole graph.")
    batch_size: int = Field(default=1000, ge=1, description="Nodes deleted per transaction.")


class MemorySelection(TenantConfig):
    ids: list[str] = Field(default_factory=list, description="Memory ids (combined with the filter).")
    memory_types: list[str] = Field(default_factory=list)
    statuses: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list, description="Any of these tags.")
    key: str | None = None
    text_contains: str | None = None
    created_before: str | None = Field(default=None, description="ISO 8601 with offset.")
    created_after: str | None = Field(default=None, description="ISO 8601 with offset.")
    with_twins: bool = Field(default=True, description="Include the bound working/long-term copy.")

    def memory_filter(self) -> MemoryFilter:
        return MemoryFilter(
            memory_types=self.memory_types, statuses=self.statuses, tags=self.tags, key=self.key,
            text_contains=self.text_contains, created_before=self.created_before,
            created_after=self.created_after,
        )


class SoftDeleteConfig(MemorySelection):
    evolve_to: list[str] = Field(default_factory=list,
                                 description="Ids of the memories these evolved into.")


def _holder(context: dg.OpExecutionContext) -> str:
    """The run's lease holder: the one its Neo4j resource joined when the run has a tenant tag."""
    return context.run.tags.get(LOCK_HOLDER_TAG) or context.run.run_id


def _id_table(ids: list[str], limit: int = 20) -> dg.MetadataValue:
    rows = ["| id |", "|---|", *(f"| {memory_id} |" for memory_id in ids[:limit])]
    if len(ids) > limit:
        rows.append(f"| … {len(ids) - limit} more |")
    return dg.MetadataValue.md("\n".join(rows))


@dg.op
def backup_tenant_op(context: dg.OpExecutionContext, config: BackupConfig, neo4j: Neo4jResource,
                     backups: BackupStorage) -> dg.Output[dict]:
    """Stream the tenant's subgraph into a new backup and rotate old ones."""
    result = backup_tenant(neo4j, backups.path, config.tenant, config.keep_last, config.page_size,
                           holder=_holder(context), sink=context.log.info)
    counts = result.manifest.counts
    context.log.info(f"backup {result.path}: {counts.nodes} nodes, {counts.relationships} relationships")
    return dg.Output(result.manifest.model_dump(mode="json"), metadata={
        "path": dg.MetadataValue.path(str(result.path)),
        "nodes": counts.nodes,
        "relationships": counts.relationships,
        "labels": counts.labels,
        "checksum": result.manifest.checksum,
        "rotated_away": len(result.rotated),
        "backups_kept": len(list_backups(backups.path, config.tenant)),
        "nodes_per_second": round(counts.nodes / max(result.seconds, 1e-9)),
    })


@dg.op(pool=NEO4J_WRITE_POOL)
def restore_tenant_op(context: dg.OpExecutionContext, config: RestoreConfig, neo4j: Neo4jResource,
                      backups: BackupStorage) -> dg.Output[dict]:
    """Verify a backup, MERGE it back, and make the tenant a partition again."""
    result = restore_tenant(neo4j, backups.path, config.tenant, config.backup_id, config.batch_size,
                            holder=_holder(context), sink=context.log.info)
    if not context.instance.has_dynamic_partition(tenant_partitions.name, config.tenant):
        context.instance.add_dynamic_partitions(tenant_partitions.name, [config.tenant])
    return dg.Output(result.manifest.model_dump(mode="json"), metadata={
        "backup": dg.MetadataValue.path(str(result.path)),
        "nodes": result.nodes,
        "nodes_created": result.nodes_created,
        "relationships": result.relationships,
        "relationships_created": result.relationships_created,
        "nodes_per_second": round(result.nodes / max(result.seconds, 1e-9)),
    })


@dg.op(pool=NEO4J_WRITE_POOL)
def drop_tenant_op(context: dg.OpExecutionContext, config: DropConfig, neo4j: Neo4jResource,
                   backups: BackupStorage,
                   tables: dg.ResourceParam[TableIOManager]) -> dg.Output[dict]:
    """Back up, delete the tenant's nodes in batches, then wipe its materializations and stored
    step outputs and remove its partition."""
    if config.confirm != config.tenant:
        raise dg.Failure(f"confirm must repeat the tenant name {config.tenant!r}; nothing done")
    result = drop_tenant(neo4j, backups.path, config.tenant, config.keep_last,
                         config.batch_size, config.page_size, holder=_holder(context),
                         sink=context.log.info)
    forgotten = forget_tenant(context.instance, config.tenant, tables)
    if forgotten.runs_in_progress:
        context.log.warning(f"{forgotten.runs_in_progress} runs of {config.tenant!r} are still in "
                            "progress; their records were kept")
    return dg.Output(result.backup.manifest.model_dump(mode="json"), metadata={
        "backup": dg.MetadataValue.path(str(result.backup.path)),
        "nodes_deleted": result.nodes_deleted,
        "runs_deleted": forgotten.runs_deleted,
        "stored_outputs_deleted": forgotten.tables_deleted,
        "partition_removed": forgotten.partition_removed,
        "deleted_by_label": result.deleted_by_label,
        "delete_batches": result.batches,
    })


@dg.op(pool=NEO4J_WRITE_POOL)
def soft_delete_op(context: dg.OpExecutionContext, config: SoftDeleteConfig,
                   neo4j: Neo4jResource) -> dg.Output[list[str]]:
    """Mark memories deleted: every pipeline stops seeing them, nothing is removed."""
    ids = soft_delete_memories(neo4j, check_tenant(config.tenant), config.ids,
                               config.memory_filter(), config.evolve_to, config.with_twins,
                               holder=_holder(context))
    return dg.Output(ids, metadata={"soft_deleted": len(ids), "ids": _id_table(ids)})


@dg.op(pool=NEO4J_WRITE_POOL)
def undelete_op(context: dg.OpExecutionContext, config: MemorySelection,
                neo4j: Neo4jResource) -> dg.Output[list[str]]:
    """Return soft-deleted memories to the status they had."""
    ids = undelete_memories(neo4j, check_tenant(config.tenant), config.ids, config.memory_filter(),
                            config.with_twins, holder=_holder(context))
    return dg.Output(ids, metadata={"undeleted": len(ids), "ids": _id_table(ids)})


@dg.job(tags={"memtend/lifecycle": "backup"})
def backup_tenant_job() -> None:
    """Back up one tenant, keeping its last N backups."""
    backup_tenant_op()


@dg.job(tags={"memtend/lifecycle": "restore"})
def restore_tenant_job() -> None:
    """Restore one tenant from a verified backup (idempotent)."""
    restore_tenant_op()


@dg.job(tags={"memtend/lifecycle": "drop"})
def drop_tenant_job() -> None:
    """Drop one tenant: backup first, batched delete, partition removed."""
    drop_tenant_op()


@dg.job(tags={"memtend/lifecycle": "soft_delete"})
def soft_delete_job() -> None:
    """Soft-delete memories of one tenant by id and/or filter."""
    soft_delete_op()


@dg.job(tags={"memtend/lifecycle": "undelete"})
def undelete_job() -> None:
    """Undo a soft delete."""
    undelete_op()


@dg.schedule(job=backup_tenant_job, cron_schedule="30 2 * * *",
             default_status=dg.DefaultScheduleStatus.STOPPED,
             description="One backup run per tenant each night (off by default); rotation keeps the last 30.")
def nightly_backups(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest]:
    """One backup run per tenant each night; rotation keeps the last 30. Each run carries its
    tenant's partition tag, so the instance's one-run-per-tenant limit keeps it from reading
    while a pipeline run writes that tenant."""
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [
        dg.RunRequest(run_key=f"backup:{day}:{tenant}", tags=tenant_run_tags(tenant),
                      run_config={"ops": {"backup_tenant_op": {"config": {"tenant": tenant}}}})
        for tenant in context.instance.get_dynamic_partitions(tenant_partitions.name)
        if is_valid_tenant(tenant)
    ]


lifecycle_jobs = [backup_tenant_job, restore_tenant_job, drop_tenant_job, soft_delete_job, undelete_job]
lifecycle_schedules = [nightly_backups]
