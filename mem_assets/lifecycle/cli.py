"""Tenant lifecycle from the shell, without the Dagster UI.

    memtend backup alice [--keep-last 30]
    memtend list-backups alice
    memtend restore alice [--backup-id 20261130T020000123456Z]
    memtend drop alice [--yes]
    memtend soft-delete alice --id mem:… [--tag …] [--evolve-to mem:…]
    memtend undelete alice --id mem:…

Part of ``memtend`` (``memtend backup alice`` …). Neo4j and the backups folder come from the
settings (NEO4J_URI …, MEMTEND_BACKUP_DIR). With DAGSTER_HOME set, drop and restore also remove /
re-add the tenant's partition in that Dagster instance.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from dagster import DagsterInstance

from mem_assets.lifecycle.backup_files import (
    DEFAULT_KEEP_LAST,
    BackupError,
    BackupReader,
    list_backups,
)
from mem_assets.lifecycle.operations import (
    LifecycleError,
    backup_tenant,
    drop_tenant,
    restore_tenant,
)
from mem_assets.lifecycle.queries import MemoryFilter
from mem_assets.lifecycle.soft_delete import soft_delete_memories, undelete_memories
from mem_assets.lifecycle.tenant_records import forget_tenant
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_partitions
from mem_resources.settings import Settings, load_settings
from mem_resources.table_io import TableIOManager, table_base
from mem_resources.tenant_lock import TenantBusy
from mem_resources.tenants import InvalidTenant, validate_tenant

T = TypeVar("T")


def _tenant(name: str) -> str:
    try:
        return validate_tenant(name)
    except InvalidTenant as exc:
        raise typer.BadParameter(str(exc)) from exc


app = typer.Typer(help="Back up, restore, drop and soft-delete a tenant's memory graph.",
                  no_args_is_help=True, add_completion=False)

Tenant = Annotated[str, typer.Argument(callback=_tenant, help="Tenant name.")]
BackupDir = Annotated[Path | None, typer.Option(help="Backups root folder; default MEMTEND_BACKUP_DIR.")]
KeepLast = Annotated[int, typer.Option(min=1, help="Backups kept per tenant.")]
Ids = Annotated[list[str] | None, typer.Option("--id", help="Memory id (repeatable).")]
Types = Annotated[list[str] | None, typer.Option("--type", help="memory_type (repeatable).")]
Statuses = Annotated[list[str] | None, typer.Option("--status", help="Current status (repeatable).")]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="Has this tag (repeatable, any).")]
Key = Annotated[str | None, typer.Option(help="Exact key.")]
Contains = Annotated[str | None, typer.Option("--contains", help="Memory text contains.")]
Before = Annotated[str | None, typer.Option(help="Created before (ISO 8601 with offset).")]
After = Annotated[str | None, typer.Option(help="Created at or after (ISO 8601 with offset).")]
Twins = Annotated[bool, typer.Option(help="Include the bound working/long-term copy.")]


def _run(settings: Settings, step: Callable[[Neo4jResource], T]) -> T:
    """Run one step against Neo4j; expected failures print one clear line and exit 1."""
    neo4j = Neo4jResource.from_settings(settings)
    try:
        return step(neo4j)
    except (BackupError, LifecycleError, TenantBusy, ValueError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    finally:
        neo4j.close()


def _backups(settings: Settings, option: Path | None) -> Path:
    return option if option is not None else Path(settings.backup_dir)


def _with_partitions(settings: Settings, action: Callable[[DagsterInstance], None]) -> None:
    if not settings.dagster_home:
        typer.echo("DAGSTER_HOME is not set: the tenant's Dagster partition was left as it is.")
        return
    with DagsterInstance.get() as instance:
        action(instance)


@app.command()
def backup(tenant: Tenant, keep_last: KeepLast = DEFAULT_KEEP_LAST,
           backup_dir: BackupDir = None) -> None:
    """Stream the tenant's subgraph into a new backup, then rotate old ones."""
    settings = load_settings()
    result = _run(settings, lambda neo4j: backup_tenant(neo4j, _backups(settings, backup_dir), tenant, keep_last))
    counts = result.manifest.counts
    typer.echo(f"{result.path}: {counts.nodes} nodes, {counts.relationships} relationships, "
               f"{result.seconds:.1f} s; rotated away {len(result.rotated)}")


@app.command("list-backups")
def list_backups_command(tenant: Tenant, backup_dir: BackupDir = None) -> None:
    """The tenant's backups, oldest first."""
    try:
        manifests = [BackupReader.open(path).manifest for path in list_backups(_backups(load_settings(), backup_dir), tenant)]
    except (BackupError, ValueError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    for manifest in manifests:
        typer.echo(f"{manifest.backup_id}  {manifest.counts.nodes:>9} nodes  "
                   f"{manifest.counts.relationships:>9} rels  {manifest.checksum[:12]}")


@app.command()
def restore(tenant: Tenant, backup_id: Annotated[str | None, typer.Option(help="Default: newest.")] = None,
            backup_dir: BackupDir = None) -> None:
    """Verify a backup, then merge it back into the graph (safe to repeat)."""
    settings = load_settings()
    result = _run(settings, lambda neo4j: restore_tenant(neo4j, _backups(settings, backup_dir), tenant, backup_id))
    typer.echo(f"restored {result.path.name}: {result.nodes} nodes ({result.nodes_created} created), "
               f"{result.relationships} relationships ({result.relationships_created} created)")

    def add(instance: DagsterInstance) -> None:
        if not instance.has_dynamic_partition(tenant_partitions.name, tenant):
            instance.add_dynamic_partitions(tenant_partitions.name, [tenant])
    _with_partitions(settings, add)


@app.command()
def drop(tenant: Tenant, keep_last: KeepLast = DEFAULT_KEEP_LAST,
         backup_dir: BackupDir = None,
         yes: Annotated[bool, typer.Option("--yes", help="Don't ask for confirmation.")] = False,
         ) -> None:
    """Back up the tenant, delete its whole graph in batches, remove its partition."""
    if not yes:
        typer.confirm(f"Drop every node of {tenant!r} (after a backup)?", abort=True)
    settings = load_settings()
    result = _run(settings, lambda neo4j: drop_tenant(neo4j, _backups(settings, backup_dir), tenant, keep_last))
    typer.echo(f"dropped {result.nodes_deleted} nodes of {tenant!r}; backup {result.backup.path}")

    def remove(instance: DagsterInstance) -> None:
        forget_tenant(instance, tenant, TableIOManager(base_path=table_base(settings)))
    _with_partitions(settings, remove)


def _filter(types: list[str] | None, statuses: list[str] | None, tags: list[str] | None,
            key: str | None, contains: str | None, before: str | None,
            after: str | None) -> MemoryFilter:
    return MemoryFilter(memory_types=types or [], statuses=statuses or [], tags=tags or [], key=key,
                        text_contains=contains, created_before=before, created_after=after)


@app.command("soft-delete")
def soft_delete(tenant: Tenant, ids: Ids = None, types: Types = None, statuses: Statuses = None,
                tags: Tags = None, key: Key = None, contains: Contains = None, before: Before = None,
                after: After = None, twins: Twins = True,
                evolve_to: Annotated[list[str] | None, typer.Option(help="Evolved-into id.")] = None,
                ) -> None:
    """Mark memories deleted (recoverable with undelete)."""
    changed = _run(load_settings(), lambda neo4j: soft_delete_memories(
        neo4j, tenant, ids or [], _filter(types, statuses, tags, key, contains, before, after),
        evolve_to, twins))
    typer.echo(f"soft-deleted {len(changed)} memories")
    for memory_id in changed:
        typer.echo(memory_id)


@app.command()
def undelete(tenant: Tenant, ids: Ids = None, types: Types = None, statuses: Statuses = None,
             tags: Tags = None, key: Key = None, contains: Contains = None, before: Before = None,
             after: After = None, twins: Twins = True) -> None:
    """Return soft-deleted memories to their previous status."""
    changed = _run(load_settings(), lambda neo4j: undelete_memories(
        neo4j, tenant, ids or [], _filter(types, statuses, tags, key, contains, before, after),
        twins))
    typer.echo(f"undeleted {len(changed)} memories")
    for memory_id in changed:
        typer.echo(memory_id)


if __name__ == "__main__":
    app()
