"""Export the live graph's schema, and diff two schema documents or a live graph against the reference.

    memtend schema export [--tenant T] [--format md|json] [--output F]
    memtend schema diff [--reference R] (--candidate C | --tenant T | --all-tenants)
    memtend schema reference --tenant T [--output F]

``diff`` exits with status 1 when a difference is breaking. The server is ``$NEO4J_URI`` or the
local one (``make neo4j-up``).
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from mem_assets.context_graph import schema_export as schema_doc
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Export the live graph's schema; diff it against the reference.")


class OutputFormat(StrEnum):
    MD = "md"
    JSON = "json"


Tenant = Annotated[str | None, typer.Option(help="One tenant (user_name); default: every tenant.")]
Output = Annotated[Path | None, typer.Option(help="Write here instead of stdout.")]
Format = Annotated[OutputFormat, typer.Option("--format", help="Markdown or JSON.")]


def _neo4j() -> Neo4jResource:
    return Neo4jResource.from_settings(load_settings())


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)


def _export(tenant: str | None) -> schema_doc.SchemaDocument:
    neo4j = _neo4j()
    try:
        return schema_doc.export_document(neo4j, tenant)
    finally:
        neo4j.close()


def _render(document: schema_doc.SchemaDocument, fmt: OutputFormat) -> str:
    if fmt is OutputFormat.JSON:
        return document.model_dump_json(indent=2) + "\n"
    return schema_doc.render_markdown(document)


@app.command()
def export(tenant: Tenant = None, fmt: Format = OutputFormat.MD, output: Output = None) -> None:
    """Introspect the live graph into a schema document."""
    _emit(_render(_export(tenant), fmt), output)


@app.command()
def diff(
    reference: Annotated[Path, typer.Option(help="Reference schema JSON.")] = schema_doc.REFERENCE_PATH,
    candidate: Annotated[Path | None, typer.Option(help="A schema JSON to compare.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Compare this tenant's live graph.")] = None,
    all_tenants: Annotated[bool, typer.Option("--all-tenants", help="Compare the whole live graph.")] = False,
    fmt: Format = OutputFormat.MD,
    output: Output = None,
) -> None:
    """Classify every difference as expected or breaking; exit 1 on a breaking one."""
    if sum([candidate is not None, tenant is not None, all_tenants]) != 1:
        raise typer.BadParameter("give exactly one of --candidate, --tenant, --all-tenants")
    base = schema_doc.load_document(reference)
    if candidate is not None:
        other, label = schema_doc.load_document(candidate), str(candidate)
    else:
        other = _export(tenant)
        label = f"tenant {tenant}" if tenant else "all tenants"
    differences = schema_doc.diff(base, other)
    if fmt is OutputFormat.JSON:
        text = json.dumps([d.model_dump(mode="json") for d in differences], ensure_ascii=False, indent=2) + "\n"
    else:
        text = schema_doc.render_diff_markdown(differences, str(reference), label)
    _emit(text, output)
    if schema_doc.breaking(differences):
        raise typer.Exit(code=1)


@app.command()
def reference(
    tenant: Annotated[str, typer.Option(help="A tenant holding the sample context data.")],
    output: Annotated[Path, typer.Option(help="Where to write the reference JSON.")] = schema_doc.REFERENCE_PATH,
) -> None:
    """Write a tenant's export as the reference schema (plus memtend's own relationship types)."""
    document = schema_doc.as_reference(_export(tenant))
    _emit(document.model_dump_json(indent=2) + "\n", output)


if __name__ == "__main__":
    app()
