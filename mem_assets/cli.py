"""``memtend`` command line: run the pipeline for tenants and look at what it left in the graph."""

from __future__ import annotations

import dagster as dg
import typer

from mem_assets.definitions import defs, tend_memory_job
from mem_assets.partitions import tenant_partitions
from mem_assets.run_liveness import fail_dead_runs, process_tags
from mem_resources.graph import memories
from mem_resources.inbox import InboxResource
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.tenants import InvalidTenant, validate_tenant

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Tend an AI agent's long-term memory graph in Neo4j.")


def _resource(key: str) -> object:
    return defs.resources[key]


def _valid_tenants(names: list[str]) -> list[str]:
    try:
        return [validate_tenant(name) for name in names]
    except InvalidTenant as exc:
        raise typer.BadParameter(str(exc), param_hint="TENANTS") from exc


@app.command()
def tend(tenants: list[str] = typer.Argument(None, help="Tenants to run; default: every inbox tenant.")) -> None:
    """Register tenants as partitions and run the main job for each, recorded in $DAGSTER_HOME."""
    inbox = _resource("inbox")
    assert isinstance(inbox, InboxResource)
    chosen = _valid_tenants(tenants or inbox.tenants())
    if not chosen:
        typer.echo(f"No tenant folders in {inbox.root}.", err=True)
        raise typer.Exit(1)
    instance = dg.DagsterInstance.get()
    for run_id in fail_dead_runs(instance):
        typer.echo(f"run {run_id}: its process died; marked failed", err=True)
    missing = [t for t in chosen if not instance.has_dynamic_partition(tenant_partitions.name, t)]
    if missing:
        instance.add_dynamic_partitions(tenant_partitions.name, missing)
    job = defs.resolve_job_def(tend_memory_job.name)
    failed = []
    for tenant in chosen:
        result = job.execute_in_process(partition_key=tenant, instance=instance, raise_on_error=False,
                                        tags=process_tags())
        typer.echo(f"{tenant}: run {result.run_id} {'succeeded' if result.success else 'FAILED'}")
        if not result.success:
            failed.append(tenant)
    for tenant in chosen:
        inspect(tenant)
    typer.echo("\nSee the runs, lineage and per-tenant metadata in the Dagster UI: `make ui`, then "
               "http://127.0.0.1:3000 (Assets). Quarantined lines: " + inbox.quarantine_dir)
    if failed:
        raise typer.Exit(1)


@app.command()
def inspect(tenant: str) -> None:
    """Print a tenant's memory counts by memory type, kind and status, and its edge counts."""
    [tenant] = _valid_tenants([tenant])
    neo4j = _resource("neo4j")
    assert isinstance(neo4j, Neo4jResource)
    with neo4j.session() as session:
        counts = session.execute_read(memories.count_by_type_and_status, tenant)
        edges = session.execute_read(memories.relationship_counts, tenant)
    typer.echo(f"\n{tenant} ({neo4j.uri}):")
    for (memory_type, kind, status), n in sorted(counts.items()):
        typer.echo(f"  {memory_type:<16} {kind:<11} {status:<10} {n:>7}")
    typer.echo("  edges touching memories: "
               + ", ".join(f"{name} {n}" for name, n in sorted(edges.items())))
    neo4j.close()


if __name__ == "__main__":
    app()
