"""Schema documents of the memory graph (seed 002 "验证方法"): build, render, diff, classify.

A document lists node types (by id prefix) with labels, id formats, property keys and counts,
and relationship types with source and target types, direction and counts. ``diff`` compares a
candidate (a live export) with a reference and classifies every difference:

- expected (seed 002 "预期差异"): conversation id format (``conv:ch00`` vs ``conv:2026-02-27``),
  MemoryItem properties, counts (fewer Topics in realtime), types the candidate does not have
  (yet), extra properties;
- breaking (seed 002 "不应有的差异"): a node or relationship type the reference does not know,
  other labels, a relationship in another direction or between other types, another id format,
  a required property (the seed's identifying keys) missing on some nodes, edges across tenants.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mem_assets.context_graph import queries
from mem_assets.context_graph.records import (
    BASE_PROPERTIES,
    NODE_TYPE_BY_PREFIX,
    REQUIRED_PROPERTIES,
)
from mem_resources.neo4j_resource import Neo4jResource

FORMAT_VERSION = 1
REFERENCE_PATH = Path(__file__).with_name("reference_schema.json")

#: memtend's own node types beside seed 002's, by id prefix: type name and label (the ingest
#: ledger, dedup's judgment cache); the reference lists them as known even when its sample has none.
MEMTEND_NODE_TYPES = {"file:": ("IngestedFile", "IngestedFile"), "judgment:": ("DedupJudgment", "DedupJudgment"),
                      "resolution:": ("DedupResolution", "DedupResolution"),
                      "review:": ("DedupReview", "DedupReview")}
#: memtend's own relationships between memories (dedup lineage, reorganization tree); the
#: reference lists them as known even when its sample graph has none.
MEMTEND_RELATIONSHIPS = {
    "MERGED_TO": ("MemoryItem", "MemoryItem"),
    "SUPERSEDED_BY": ("MemoryItem", "MemoryItem"),
    "PARENT": ("MemoryItem", "MemoryItem"),
}
MAX_ID_FORMATS = 20

#: Conversation ids differ by pipeline (``conv:<date>`` realtime, ``conv:ch<n>`` offline).
EXPECTED_ID_FORMAT_TYPES = frozenset({"Conversation"})


class NodeType(BaseModel):
    type: str
    prefix: str
    count: int
    labels: dict[str, int] = Field(description="label set (':A:B') → node count")
    id_formats: dict[str, int] = Field(description="id format → node count")
    properties: dict[str, int] = Field(description="property key → nodes carrying it")
    required: list[str] = Field(default_factory=list,
                                description="keys every node must carry (set in the reference)")


class RelationshipType(BaseModel):
    type: str
    source: str
    target: str
    count: int
    cross_tenant: int = 0

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.type, self.source, self.target)


class SchemaDocument(BaseModel):
    format_version: int = FORMAT_VERSION
    tenant: str | None = Field(description="the tenant exported, or null for every tenant")
    generated_at: datetime
    node_types: list[NodeType]
    relationship_types: list[RelationshipType]

    def node_type(self, name: str) -> NodeType | None:
        return next((n for n in self.node_types if n.type == name), None)


def label_set(labels: Iterable[str]) -> str:
    return "".join(f":{label}" for label in sorted(labels))


def node_type_name(labels: Iterable[str], prefix: str) -> str:
    """The seed's type for a known prefix; otherwise the prefix itself, or the label set."""
    if prefix in NODE_TYPE_BY_PREFIX:
        return NODE_TYPE_BY_PREFIX[prefix]
    if prefix in MEMTEND_NODE_TYPES:
        return MEMTEND_NODE_TYPES[prefix][0]
    return prefix or label_set(labels) or "(no label)"


def build_document(tenant: str | None, groups: list[dict[str, Any]],
                   properties: list[dict[str, Any]], relationships: list[dict[str, Any]],
                   generated_at: datetime | None = None) -> SchemaDocument:
    """Fold the aggregated Cypher rows (``queries.schema_rows``) into a document."""
    counts: dict[str, int] = defaultdict(int)
    prefixes: dict[str, str] = {}
    labels: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    formats: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    keys: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in groups:
        name = node_type_name(row["labels"], row["prefix"])
        prefixes[name] = row["prefix"]
        counts[name] += row["count"]
        labels[name][label_set(row["labels"])] += row["count"]
        formats[name][f"{row['prefix']}{row['id_format']}"] += row["count"]
    for row in properties:
        keys[node_type_name(row["labels"], row["prefix"])][row["key"]] += row["count"]
    edges: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in relationships:
        key = (row["type"], node_type_name(row["source_labels"], row["source_prefix"]),
               node_type_name(row["target_labels"], row["target_prefix"]))
        edges[key][0] += row["count"]
        edges[key][1] += row["cross_tenant"]

    def top(values: dict[str, int]) -> dict[str, int]:
        ranked = sorted(values.items(), key=lambda item: (-item[1], item[0]))[:MAX_ID_FORMATS]
        return dict(sorted(ranked))

    node_types = [
        NodeType(type=name, prefix=prefixes[name], count=counts[name], labels=dict(sorted(labels[name].items())),
                 id_formats=top(formats[name]), properties=dict(sorted(keys[name].items())))
        for name in sorted(counts)
    ]
    relationship_types = [
        RelationshipType(type=t, source=s, target=g, count=c, cross_tenant=x)
        for (t, s, g), (c, x) in sorted(edges.items())
    ]
    return SchemaDocument(tenant=tenant, generated_at=generated_at or datetime.now(UTC),
                          node_types=node_types, relationship_types=relationship_types)


def export_document(neo4j: Neo4jResource, tenant: str | None) -> SchemaDocument:
    """The live graph's schema, for one tenant or (``None``) all of them."""
    with neo4j.session() as session:
        groups, properties, relationships = session.execute_read(queries.schema_rows, tenant)
    return build_document(tenant, groups, properties, relationships)


def as_reference(document: SchemaDocument) -> SchemaDocument:
    """A document to ship as the reference: memtend's own node and relationship types added as
    known types (count 0) when the sample graph has none of them."""
    known_edges = {rel.key for rel in document.relationship_types}
    edges = [RelationshipType(type=t, source=s, target=g, count=0)
             for t, (s, g) in MEMTEND_RELATIONSHIPS.items() if (t, s, g) not in known_edges]
    nodes = [NodeType(type=name, prefix=prefix, count=0, labels={f":{label}": 0},
                      id_formats={f"{prefix}<x>": 0}, properties={})
             for prefix, (name, label) in MEMTEND_NODE_TYPES.items() if document.node_type(name) is None]
    typed = [node.model_copy(update={"required": list(REQUIRED_PROPERTIES.get(node.type, BASE_PROPERTIES))})
             for node in [*document.node_types, *nodes]]
    return document.model_copy(update={
        "tenant": None,
        "node_types": sorted(typed, key=lambda n: n.type),
        "relationship_types": sorted([*document.relationship_types, *edges], key=lambda r: r.key),
    })


def load_document(path: Path | str) -> SchemaDocument:
    return SchemaDocument.model_validate_json(Path(path).read_text(encoding="utf-8"))


class Severity(StrEnum):
    EXPECTED = "expected"
    BREAKING = "breaking"


class Difference(BaseModel):
    severity: Severity
    kind: str
    subject: str
    detail: str


def _node_differences(reference: SchemaDocument, candidate: SchemaDocument) -> Iterable[Difference]:
    def diff(severity: Severity, kind: str, subject: str, detail: str) -> Difference:
        return Difference(severity=severity, kind=kind, subject=subject, detail=detail)

    for node in candidate.node_types:
        ref = reference.node_type(node.type)
        if ref is None:
            yield diff(Severity.BREAKING, "node type", node.type,
                       f"unknown node type (prefix `{node.prefix or '-'}`, labels "
                       f"{', '.join(node.labels)}, {node.count} nodes)")
            continue
        for labels in sorted(set(node.labels) - set(ref.labels)):
            yield diff(Severity.BREAKING, "labels", node.type,
                       f"labels `{labels}` on {node.labels[labels]} nodes; reference: {', '.join(ref.labels)}")
        new_formats = sorted(set(node.id_formats) - set(ref.id_formats))
        if new_formats:
            severity = Severity.EXPECTED if node.type in EXPECTED_ID_FORMAT_TYPES else Severity.BREAKING
            yield diff(severity, "id format", node.type,
                       f"{', '.join(f'`{f}`' for f in new_formats)}; reference: "
                       f"{', '.join(f'`{f}`' for f in ref.id_formats)}")
        if node.count != ref.count:
            yield diff(Severity.EXPECTED, "count", node.type, f"{ref.count} → {node.count} nodes")
        added = sorted(set(node.properties) - set(ref.properties))
        if added:
            yield diff(Severity.EXPECTED, "properties", node.type, f"additional: {', '.join(added)}")
        missing = sorted(key for key in ref.required if node.properties.get(key, 0) < node.count)
        if missing:
            yield diff(Severity.BREAKING, "properties", node.type,
                       f"required, missing on some nodes: {', '.join(missing)}")
        absent = sorted(set(ref.properties) - set(node.properties) - set(missing))
        if absent:
            yield diff(Severity.EXPECTED, "properties", node.type, f"fewer: {', '.join(absent)}")
    for ref in reference.node_types:
        if candidate.node_type(ref.type) is None and ref.count:
            yield diff(Severity.EXPECTED, "count", ref.type, f"{ref.count} → 0 nodes (absent)")


def _relationship_differences(reference: SchemaDocument,
                              candidate: SchemaDocument) -> Iterable[Difference]:
    ref_edges = {rel.key: rel for rel in reference.relationship_types}
    ref_types = {rel.type for rel in reference.relationship_types}
    cand_edges = {rel.key: rel for rel in candidate.relationship_types}
    for key, rel in cand_edges.items():
        subject = f"{rel.type} ({rel.source} → {rel.target})"
        if rel.cross_tenant:
            yield Difference(severity=Severity.BREAKING, kind="tenant isolation", subject=subject,
                             detail=f"{rel.cross_tenant} edges join two tenants")
        if key in ref_edges:
            if ref_edges[key].count != rel.count:
                yield Difference(severity=Severity.EXPECTED, kind="count", subject=subject,
                                 detail=f"{ref_edges[key].count} → {rel.count} edges")
            continue
        if rel.type not in ref_types:
            kind, detail = "relationship type", "unknown relationship type"
        elif (rel.type, rel.target, rel.source) in ref_edges:
            kind, detail = "direction", f"reversed: the reference has {rel.target} → {rel.source}"
        else:
            known = ", ".join(f"{s} → {t}" for (t0, s, t) in ref_edges if t0 == rel.type)
            kind, detail = "endpoints", f"the reference has {known}"
        yield Difference(severity=Severity.BREAKING, kind=kind, subject=subject,
                         detail=f"{detail} ({rel.count} edges)")
    for key, rel in ref_edges.items():
        if key not in cand_edges and rel.count:
            yield Difference(severity=Severity.EXPECTED, kind="count",
                             subject=f"{rel.type} ({rel.source} → {rel.target})",
                             detail=f"{rel.count} → 0 edges (absent)")


def diff(reference: SchemaDocument, candidate: SchemaDocument) -> list[Difference]:
    """Every difference of ``candidate`` from ``reference``, breaking ones first."""
    found = [*_node_differences(reference, candidate), *_relationship_differences(reference, candidate)]
    return sorted(found, key=lambda d: (d.severity != Severity.BREAKING, d.kind, d.subject))


def breaking(differences: Iterable[Difference]) -> list[Difference]:
    return [d for d in differences if d.severity == Severity.BREAKING]


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: Iterable[Iterable[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def render_markdown(document: SchemaDocument) -> str:
    scope = f"tenant `{document.tenant}`" if document.tenant else "all tenants"
    lines = [f"# Graph schema — {scope}", "",
             f"Generated {document.generated_at.isoformat(timespec='seconds')}.", "", "## Node types", ""]
    lines += _table(
        ["Type", "ID prefix", "Labels", "Count", "ID formats"],
        ([n.type, f"`{n.prefix}`" if n.prefix else "-", " ".join(n.labels), n.count,
          ", ".join(f"`{f}`" for f in n.id_formats)] for n in document.node_types))
    lines += ["", "## Node properties", "", "Property key (nodes carrying it).", ""]
    lines += _table(["Type", "Properties"],
                    ([n.type, ", ".join(f"{k} ({c})" for k, c in n.properties.items())]
                     for n in document.node_types))
    lines += ["", "## Relationship types", ""]
    lines += _table(["Type", "Source", "Direction", "Target", "Count"],
                    ([r.type, r.source, "→", r.target, r.count] for r in document.relationship_types))
    return "\n".join(lines) + "\n"


def render_diff_markdown(differences: list[Difference], reference: str, candidate: str) -> str:
    broken = breaking(differences)
    lines = [f"# Schema diff: {reference} → {candidate}", "",
             f"**{len(broken)} breaking, {len(differences) - len(broken)} expected.**", ""]
    if differences:
        lines += _table(["Severity", "Kind", "Subject", "Detail"],
                        ([d.severity.value, d.kind, d.subject, d.detail] for d in differences))
    else:
        lines.append("No differences.")
    return "\n".join(lines) + "\n"

