"""``memtend``: run the pipeline for tenants, look at the graph, manage tenants and the graph schema."""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import dagster as dg
import typer
from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from mem_assets.context_graph.cli import app as schema_app
from mem_assets.lifecycle.cli import app as lifecycle_app
from mem_assets.reorg.evaluation import (
    evaluate_topics,
    holdout_split,
    read_items,
    report_json,
)
from mem_assets.resources import build_embedder, build_topic_placer
from mem_assets.tending import tend_many
from mem_resources import memory_queries
from mem_resources.embedder import HashingEmbedder, WordLlamaEmbedder
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_partitions
from mem_resources.progress import listening
from mem_resources.run_liveness import fail_dead_runs
from mem_resources.run_policy import create_pools
from mem_resources.settings import Settings, load_settings
from mem_resources.tenants import InvalidTenant, validate_tenant

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Tend an AI agent's long-term memory graph in Neo4j.")
app.add_typer(lifecycle_app)
app.add_typer(schema_app, name="schema")

#: One summary line per domain: its stages, and the metadata shown for each (absent or zero skipped).
SUMMARY: dict[str, dict[str, tuple[str, ...]]] = {
    "ingest": {"memory_items": ("accepted", "rejected", "new"),
               "context_graph": ("new_memories", "claims")},
    "dedup": {"dedup_candidates": ("pairs",),
              "relation_judgments": ("redundant", "contradictory", "llm_calls"),
              "merged_nodes": ("merges", "supersedes", "resolver_calls")},
    "reorg": {"reorg_candidates": ("candidates",), "memory_clusters": ("topics", "llm_placement_calls"),
              "summary_parents": ("topics_created", "topics_grown", "llm_calls")},
    "schema": {"graph_schema": ("node_types", "nodes", "breaking_differences")},
}
#: How a run's LLM calls read in the summary: what each stage asked the model for.
LABELS = {("relation_judgments", "llm_calls"): "llm judge calls", ("merged_nodes", "resolver_calls"): "llm fusion calls",
          ("memory_clusters", "llm_placement_calls"): "llm placement calls",
          ("summary_parents", "llm_calls"): "llm naming calls"}


@dataclass(frozen=True)
class SummaryLine:
    domain: str
    seconds: float
    counts: dict[str, Any]

    def render(self) -> str:
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.counts.items()) or "nothing new"
        return f"  {self.domain:<7}{self.seconds:>6.1f} s  {counts}"


def summary_lines(instance: dg.DagsterInstance, run_id: str) -> list[SummaryLine]:
    """One line per domain that ran: wall time of its steps and the headline counts."""
    seconds = {stats.step_key: (stats.end_time or 0.0) - (stats.start_time or 0.0)
               for stats in instance.get_run_step_stats(run_id)}
    metadata = {}
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is not None:
            metadata[materialization.asset_key.to_user_string()] = materialization.metadata
    lines = []
    for domain, stages in SUMMARY.items():
        ran = [stage for stage in stages if stage in metadata]
        if not ran:
            continue
        counts = {LABELS.get((stage, key), key): metadata[stage][key].value for stage in ran for key in stages[stage]
                  if key in metadata[stage] and metadata[stage][key].value}
        lines.append(SummaryLine(domain, sum(seconds.get(stage, 0.0) for stage in ran), counts))
    return lines


def failed_error_checks(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The error-severity asset checks that failed in a run, as ``asset:check``."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    failed = []
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        if not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR:
            failed.append(f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}")
    return sorted(set(failed))


def _known_or_exit(instance: dg.DagsterInstance, tenants: list[str], inbox_tenants: list[str],
                   create: bool) -> None:
    """A typo must not create a partition: unknown tenants need an inbox folder or ``--create``."""
    known = set(instance.get_dynamic_partitions(tenant_partitions.name)) | set(inbox_tenants)
    unknown = [t for t in tenants if t not in known]
    if unknown and not create:
        typer.secho(f"error: unknown tenant(s) {', '.join(unknown)}: no inbox folder and no "
                    "partition. Check the name, or pass --create to register them.",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)


def _neo4j_or_exit(settings: Settings, verbose: bool, tenants: list[str]) -> dict[str, str]:
    """A graph that does not answer fails every run the same way: say so once, with the fix,
    instead of a Dagster traceback per tenant (``--verbose`` prints the driver's traceback too).
    On the same connection: the ``tenants`` an undo or restore left half done (:func:`_incomplete`)."""
    neo4j = Neo4jResource.from_settings(settings)
    try:
        with neo4j.session():
            pass
        return _incomplete(neo4j, tenants)
    except (DriverError, Neo4jError, ValueError) as exc:
        if verbose:
            typer.echo("".join(traceback.format_exception(exc)), err=True)
        fix = (f"check NEO4J_URI ({settings.neo4j_uri}) and that its server runs" if settings.neo4j_uri
               else "start the local server with `make neo4j-up`, or set NEO4J_URI to your server")
        if isinstance(exc, AuthError):
            problem, fix = "refused the credentials", "check NEO4J_USER and NEO4J_PASSWORD"
        elif isinstance(exc, ServiceUnavailable):
            problem = "does not answer"
        else:
            problem = f"failed ({type(exc).__name__}: {''.join(str(exc).strip().splitlines()[-1:])})"
        typer.secho(f"error: Neo4j at {neo4j.uri} {problem}.\n  Fix: {fix}.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    finally:
        neo4j.close()


def _incomplete(neo4j: Neo4jResource, tenants: list[str]) -> dict[str, str]:
    """Tenants an undo or restore left half done, with the refusal naming the command that
    finishes each: said in one line instead of a failed run's traceback (the run refuses too)."""
    from mem_resources.tenant_lock import TenantIncomplete, refuse_if_incomplete

    refused = {}
    for tenant in tenants:
        try:
            refuse_if_incomplete(neo4j, tenant)
        except TenantIncomplete as exc:
            refused[tenant] = str(exc)
    return refused


def _valid_tenants(names: list[str]) -> list[str]:
    try:
        return [validate_tenant(name) for name in names]
    except InvalidTenant as exc:
        raise typer.BadParameter(str(exc), param_hint="TENANTS") from exc


@app.command()
def tend(
    tenants: Annotated[list[str] | None, typer.Argument(help="Tenants to run; default: every inbox tenant.")] = None,
    create: Annotated[bool, typer.Option(help="Register tenants that have no inbox folder yet.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print Dagster's full event log.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes tending tenants side by side "
                                                     "(one per core suits a night of many tenants).")] = 1,
) -> None:
    """Run the main job (ingest, dedup, reorganize, schema check) for each tenant, recorded in
    $DAGSTER_HOME so the UI shows the runs."""
    from mem_assets.definitions import defs, settings

    inbox = defs.resources["inbox"]
    inbox_tenants = inbox.tenants()
    chosen = _valid_tenants(tenants or inbox_tenants)
    if not chosen:
        typer.secho(f"No tenant folders in {inbox.root}.", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    refused = _neo4j_or_exit(settings, verbose, chosen)
    instance = dg.DagsterInstance.get()
    for run_id in fail_dead_runs(instance):
        typer.echo(f"run {run_id}: its process died; marked failed", err=True)
    _known_or_exit(instance, chosen, inbox_tenants, create)
    for tenant, reason in refused.items():
        typer.secho(f"{tenant}: refused: {reason}", fg=typer.colors.RED, err=True)
    chosen = [t for t in chosen if t not in refused]
    missing = [t for t in chosen if not instance.has_dynamic_partition(tenant_partitions.name, t)]
    if missing:
        instance.add_dynamic_partitions(tenant_partitions.name, missing)
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=verbose) as progress:
        task = progress.add_task(f"tending {len(chosen)} tenants" if workers > 1 else "tending",
                                 total=len(chosen))

        def show(line: str) -> None:
            progress.update(task, description=f"tending · {line}")

        with listening(show):
            outcomes = tend_many(chosen, instance, workers=workers, verbose=verbose,
                                 on_done=lambda outcome: progress.advance(task))
    failed = [*refused, *(outcome.tenant for outcome in outcomes if not outcome.success)]
    for outcome in outcomes:
        checks = failed_error_checks(instance, outcome.run_id)
        status = "ok" if outcome.success and not checks else "FAILED"
        if checks and outcome.success:
            failed.append(outcome.tenant)
        typer.echo(f"{outcome.tenant}: {status} in {outcome.seconds:.1f} s (run {outcome.run_id})")
        for line in summary_lines(instance, outcome.run_id):
            typer.echo(line.render())
        if checks:
            typer.secho(f"  failed checks: {', '.join(checks)}", fg=typer.colors.RED, err=True)
    typer.echo(f"\nDetails per run and stage: `make ui`, then http://127.0.0.1:3000/runs ; "
               f"graph counts: `memtend inspect TENANT` ; quarantined lines: {settings.quarantine}/")
    if failed:
        typer.secho(f"failed: {', '.join(failed)} (rerun with --verbose for the event log)",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(1)


@app.command()
def plan(
    tenant: str,
    out: Annotated[Path | None, typer.Option(help="Folder for plan.json and plan.csv; default "
                                                  "$DAGSTER_HOME/plans/TENANT/TIME.")] = None,
    min_group_size: Annotated[int, typer.Option(min=1, help="As reorg_candidates' config.")] = 20,
) -> None:
    """Show what the next `memtend tend` would merge, supersede and place in TENANT's graph as it
    stands (inbox files not ingested yet are not read), changing no memory: a summary, and the
    table as JSON and CSV. The judgments it makes are cached, so the run then decides the same."""
    from mem_assets.planning import plan_folder, plan_tenant
    from mem_assets.reorg.assets import CandidatesConfig
    from mem_assets.resources import build_judge, build_topic_vectors
    from mem_resources.memory_model import utc_now
    from mem_resources.tenant_lock import refuse_if_incomplete

    [tenant] = _valid_tenants([tenant])
    settings = load_settings()
    embedder, judge = build_embedder(settings, in_dagster=False), build_judge(settings, in_dagster=False)
    now = utc_now()

    def step(neo4j: Neo4jResource) -> Any:
        with neo4j.lease(tenant, info="memtend plan (caches judgments only)"):
            refuse_if_incomplete(neo4j, tenant)
            return plan_tenant(neo4j, tenant, embedder, judge, build_topic_vectors(settings),
                               reorg=CandidatesConfig(min_group_size=min_group_size), now=now)

    made = _neo4j_step(step)
    home = Path(settings.dagster_home) if settings.dagster_home else Path.cwd()
    as_json, as_csv = made.write(out or plan_folder(home, tenant, now))
    typer.echo(made.summary())
    typer.echo(f"table: {as_json}\n       {as_csv}")


@app.command("create-pools")
def create_pools_command() -> None:
    """Create the project's pools on the Dagster instance ($DAGSTER_HOME) with its default limit.
    Run once after `dagster instance migrate`, before runs start."""
    with dg.DagsterInstance.get() as instance:
        created = create_pools(instance)
    typer.echo(", ".join(f"pool {pool}: limit {limit}" for pool, limit in created.items())
               or "pools already on the instance (or no default limit configured): nothing to do")


@app.command()
def inspect(tenant: str) -> None:
    """Print a tenant's memory counts by memory type, kind and status, and its edge counts."""
    [tenant] = _valid_tenants([tenant])
    neo4j = Neo4jResource.from_settings(load_settings())
    try:
        with neo4j.session() as session:
            counts = session.execute_read(memory_queries.count_by_type_and_status, tenant)
            edges = session.execute_read(memory_queries.relationship_counts, tenant)
    finally:
        neo4j.close()
    if not counts:
        typer.secho(f"error: no memories for tenant {tenant!r} in {neo4j.uri}", fg=typer.colors.RED,
                    err=True)
        raise typer.Exit(2)
    typer.echo(f"{tenant} ({neo4j.uri}):")
    for (memory_type, kind, status), n in sorted(counts.items()):
        typer.echo(f"  {memory_type:<16} {kind:<11} {status:<10} {n:>7}")
    typer.echo("  edges touching memories: "
               + ", ".join(f"{name} {n}" for name, n in sorted(edges.items())))


@app.command("eval-topics")
def eval_topics(
    items: Annotated[Path, typer.Argument(exists=True, dir_okay=False,
                                          help='JSONL of {"text", "topic", "batch"[, "tenant"]} lines; each tenant is placed on its own.')],
    embedder: Annotated[str, typer.Option(
        help="configured (MEMTEND_EMBEDDER and its settings), wordllama or hashing.")] = "configured",
    part: Annotated[str, typer.Option(help="all, or tune / held-out (every other label).")] = "all",
    e5_languages: Annotated[str, typer.Option(
        help="Languages placed in plain multilingual-e5 space: configured (MEMTEND_TOPIC_E5_LANGUAGES), "
             "or e.g. zh, zh,en, none.")] = "configured",
    combined_languages: Annotated[str, typer.Option(
        help="Languages placed in their topic encoder's space (e5 carried): configured "
             "(MEMTEND_TOPIC_COMBINED_LANGUAGES), or e.g. en,zh, en, none. A language is in one space.")] = "configured",
    cross_language: Annotated[str, typer.Option(
        help="Whether a memory may join the other language's topic: configured "
             "(MEMTEND_TOPIC_CROSS_LANGUAGE), on or off.")] = "configured",
    placement: Annotated[str, typer.Option(
        help='Thresholds per topic space over the configured ones (MEMTEND_TOPIC_THRESHOLDS), as JSON '
             'of that file\'s shape, e.g. {"e5": {"group_similarity": 0.2, "min_cluster_size": 2}}.')] = "{}",
    llm: Annotated[bool, typer.Option(
        help="With MEMTEND_LLM=openai: the LLM places the memories offline placement is unsure of "
             "(MEMTEND_TOPIC_LLM_*), as memory_clusters does; its spending is printed under \"llm\".")] = False,
) -> None:
    """Topic quality without Neo4j: batches go through placement in order; prints one JSON object
    (purity, ARI, NMI, share placed, topic count, near-duplicate topic pairs)."""
    from mem_assets.reorg.placement_thresholds import SHIPPED, PlacementThresholds

    settings = load_settings()
    chosen = {"configured": lambda: build_embedder(settings, in_dagster=False), "wordllama": WordLlamaEmbedder,
              "hashing": HashingEmbedder}
    parts = {"all": lambda rows: rows, "tune": lambda rows: holdout_split(rows)[0],
             "held-out": lambda rows: holdout_split(rows)[1]}
    across = {"configured": settings.topic_cross_language, "on": True, "off": False}
    if embedder not in chosen or part not in parts or cross_language not in across:
        typer.secho("error: --embedder is configured, wordllama or hashing; --part is all, tune or held-out; "
                    "--cross-language is configured, on or off", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    try:
        spaces = settings.with_topic_languages(*(None if value == "configured" else value
                                                 for value in (e5_languages, combined_languages)))
    except ValidationError as exc:
        typer.secho(f"error: --e5-languages / --combined-languages: {exc.errors()[0]['msg']}",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    try:
        thresholds = SHIPPED.with_file(settings.topic_thresholds).overridden_by(
            PlacementThresholds.model_validate_json(placement))
    except (ValueError, OSError) as exc:
        error = exc.errors()[0] if isinstance(exc, ValidationError) else None
        message = f"{'.'.join(map(str, error['loc']))}: {error['msg']}" if error else str(exc)
        typer.secho(f"error: --placement: {message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from exc
    if llm and settings.llm != "openai":
        typer.secho("error: --llm needs MEMTEND_LLM=openai (and OPENAI_BASE_URL)", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    advisor = build_topic_placer(settings, in_dagster=False).advisor() if llm else None
    report = evaluate_topics(parts[part](read_items(items)), chosen[embedder](), thresholds.embedder_params,
                             spaces.e5_languages, thresholds.e5_params,
                             combined_languages=spaces.combined_languages, combined_params=thresholds.combined_params,
                             cross=thresholds.cross_params if across[cross_language] else None,
                             advisor=advisor)
    if advisor is None:
        typer.echo(report_json(report))
    else:
        typer.echo(json.dumps({**json.loads(report_json(report)), "llm": advisor.metadata()}, ensure_ascii=False))


@app.command()
def reembed(
    tenants: Annotated[list[str] | None, typer.Argument(help="Tenants to re-embed.")] = None,
    all_tenants: Annotated[bool, typer.Option("--all", help="Every tenant in the graph.")] = False,
    recreate_index: Annotated[bool, typer.Option(
        help="First give the vector index the configured embedder's dimension (needed after "
             "switching to an embedder of another dimension).")] = False,
) -> None:
    """Re-embed a tenant's memories in place with the configured embedder (MEMTEND_EMBEDDER):
    the migration after switching embedders. Texts, statuses and lineage stay as they are."""
    from mem_assets.lifecycle.reembedding import reembed_tenant
    from mem_resources.constraints import VectorIndexMismatchError

    if not tenants and not all_tenants:
        typer.secho("error: name the tenants or pass --all", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    settings = load_settings()
    neo4j = Neo4jResource.from_settings(settings)
    embedder = build_embedder(settings, in_dagster=False)
    try:
        if recreate_index and neo4j.recreate_vector_index():
            typer.echo(f"vector index recreated with {neo4j.embedding_dimension} dimensions")
        try:
            with neo4j.session() as session:
                chosen = session.execute_read(memory_queries.memory_tenants) if all_tenants else tenants
        except VectorIndexMismatchError as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from exc
        for tenant in chosen or []:
            report = reembed_tenant(neo4j, embedder, tenant)
            typer.echo(f"{tenant}: {report.embedded} memories re-embedded "
                       f"({type(embedder).__name__}, {embedder.dimension} dims)"
                       + (f", {report.without_text} without text left as they were"
                          if report.without_text else ""))
    finally:
        neo4j.close()


@app.command("eval-judge")
def eval_judge(
    pairs: Annotated[Path | None, typer.Argument(exists=True, dir_okay=False,
                                                 help='JSONL of {"a": older, "b": newer, "label": …}.')] = None,
    reviewed: Annotated[str | None, typer.Option(
        help="Score on this tenant's reviewed pairs instead of a file: every answer of `memtend "
             "review` and every undo, read from the graph.")] = None,
    threshold: Annotated[float | None, typer.Option(
        help="Candidate cosine threshold; default: the configured embedder's.")] = None,
    top_k: Annotated[int, typer.Option(min=1, help="Neighbours compared per new memory.")] = 5,
) -> None:
    """Score the configured embedder + judge end to end, as the pipeline decides (candidate
    search, then the judge; a pair never a candidate counts as independent). Prints one JSON
    object. A file needs no Neo4j; with MEMTEND_LLM=openai the LLM judge answers."""
    from mem_assets.dedup.candidates import default_threshold
    from mem_assets.dedup.evaluation import evaluate, read_pairs
    from mem_assets.dedup.review_queue import labeled_pairs
    from mem_assets.resources import build_judge

    if (pairs is None) == (reviewed is None):
        typer.secho("error: name a pairs file or --reviewed TENANT", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    if reviewed is not None:
        [tenant] = _valid_tenants([reviewed])
        rows = _neo4j_step(lambda neo4j: labeled_pairs(neo4j, tenant))
        if not rows:
            typer.secho(f"error: tenant {tenant!r} has no reviewed pairs yet (`memtend review {tenant}` "
                        "lists those waiting)", fg=typer.colors.RED, err=True)
            raise typer.Exit(2)
    else:
        try:
            rows = read_pairs(pairs)
        except (ValueError, json.JSONDecodeError) as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from exc
    settings = load_settings()
    embedder = build_embedder(settings, in_dagster=False)
    judge = build_judge(settings, in_dagster=False)
    result = evaluate(rows, embedder, judge,
                      threshold if threshold is not None else default_threshold(embedder), top_k)
    typer.echo(json.dumps(result, ensure_ascii=False))


def _neo4j_step(step: Any) -> Any:
    """Run ``step(neo4j)``; expected refusals print one clear line and exit 1."""
    from mem_assets.dedup.undo import UndoError
    from mem_resources.tenant_lock import TenantBusy, TenantIncomplete

    neo4j = Neo4jResource.from_settings(load_settings())
    try:
        return step(neo4j)
    except (UndoError, TenantBusy, TenantIncomplete) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from exc
    finally:
        neo4j.close()


@app.command("undo")
def undo_command(
    tenant: str,
    run: Annotated[str | None, typer.Option("--run", help="Undo every resolution of this Dagster run.")] = None,
    resolution: Annotated[str | None, typer.Option("--resolution", help="Undo one resolution (id from "
                                                                         "`memtend history` or the run's metadata).")] = None,
) -> None:
    """Reverse what a run (or one resolution) merged or superseded: sources activated again,
    edges and topic memberships given back, a fused memory archived as undone. The pairs are
    remembered as reviewed independent, so the next run does not redo them."""
    from mem_assets.dedup.undo import undo

    [tenant] = _valid_tenants([tenant])
    report = _neo4j_step(lambda neo4j: undo(neo4j, tenant, run_id=run, resolution_id=resolution))
    for record in report.undone:
        typer.echo(f"undone {record['id']} ({record['kind']}): {' | '.join(record['source_texts'])} "
                   f"-> {record['text']}")
    typer.echo(f"{len(report.undone)} resolutions undone"
               + (f", {report.already_undone} were already undone" if report.already_undone else ""))


@app.command()
def review(
    tenant: str,
    accept: Annotated[str | None, typer.Option(help="Apply this pending pair: merge a suggested redundant "
                                                    "pair, else supersede (newer wins).")] = None,
    reject: Annotated[str | None, typer.Option(help="Dismiss this pending pair (kept both).")] = None,
    keep: Annotated[str | None, typer.Option(help="With --accept: the memory that survives, when "
                                                  "nothing says which is newer.")] = None,
    export: Annotated[Path | None, typer.Option(help="Write the answered pairs as `memtend eval-judge` "
                                                      "reads them (JSONL).")] = None,
) -> None:
    """List the pairs the runs left apart because they were unsure, or answer one. Every
    answer is kept as a labelled pair that later runs respect."""
    from mem_assets.dedup import queries as dedup_queries
    from mem_assets.dedup.review_queue import answer
    from mem_assets.dedup.review_queue import export as export_reviews

    [tenant] = _valid_tenants([tenant])
    if accept and reject:
        typer.secho("error: --accept or --reject, not both", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    if accept or reject:
        embedder = build_embedder(load_settings(), in_dagster=False) if accept else None
        done = _neo4j_step(lambda neo4j: answer(neo4j, tenant, accept or reject, accept=bool(accept), keep=keep,
                                                embedder=embedder))
        typer.echo(f"{done['id']}: {done['label']}"
                   + (f" (applied as {done['resolution_id']})" if done["resolution_id"] else ""))
        return
    if export is not None:
        count = _neo4j_step(lambda neo4j: export_reviews(neo4j, tenant, export))
        typer.echo(f"{count} answered pairs written to {export}")
        return

    def pending(neo4j: Neo4jResource) -> list[dict[str, Any]]:
        with neo4j.session() as session:
            return session.execute_read(dedup_queries.reviews, tenant, "pending")

    items = _neo4j_step(pending)
    for item in items:
        score = f"{item['score']:.3f}" if item["score"] is not None else "-"
        typer.echo(f"{item['id']}  score {score}  run {item['run_id']}"
                   + (f"  suggested {item['suggested']}" if item.get("suggested") else "") + "\n"
                   f"  {item['first_id']}: {item['first_text']}\n  {item['second_id']}: {item['second_text']}\n"
                   f"  why left apart: {item['reason']}")
    typer.echo(f"{len(items)} pairs waiting for review")


@app.command()
def history(
    memory_id: Annotated[str | None, typer.Argument(help="A memory id (mem:…).")] = None,
    tenant: Annotated[str | None, typer.Option(help="The tenant (needed with --search, or when the id "
                                                    "is in several tenants).")] = None,
    search: Annotated[str | None, typer.Option(help="Every memory of --tenant whose text contains this.")] = None,
) -> None:
    """Every version, merge, supersede, undo and review of a memory, with run ids and dates."""
    from mem_assets.dedup import queries as dedup_queries
    from mem_assets.dedup.history import memory_history, search_history

    if search is not None:
        if tenant is None:
            typer.secho("error: --search needs --tenant", fg=typer.colors.RED, err=True)
            raise typer.Exit(2)
        [tenant] = _valid_tenants([tenant])
        found = _neo4j_step(lambda neo4j: search_history(neo4j, tenant, search))
        for lines in found.values():
            typer.echo("\n".join(lines) + "\n")
        typer.echo(f"{len(found)} memories match")
        return
    if memory_id is None:
        typer.secho("error: name a memory id, or --tenant with --search", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)

    def lines(neo4j: Neo4jResource) -> list[str]:
        chosen = tenant
        if chosen is None:
            with neo4j.session() as session:
                tenants = session.execute_read(dedup_queries.memory_tenant_of, memory_id)
            if len(tenants) != 1:
                return [f"error: {memory_id} is in {len(tenants)} tenants; pass --tenant"]
            chosen = tenants[0]
        return memory_history(neo4j, chosen, memory_id) or [f"error: no memory {memory_id} in {chosen!r}"]

    out = _neo4j_step(lines)
    if out[0].startswith("error:"):
        typer.secho(out[0], fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    typer.echo("\n".join(out))


if __name__ == "__main__":
    app()
