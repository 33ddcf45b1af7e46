"""Schema export and diff on the real Neo4j: realtime and offline exports match the reference,
a broken writer is caught by the asset check, exports are tenant-scoped, the CLI works."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from typer.testing import CliRunner

from mem_assets.context_graph import queries
from mem_assets.context_graph import schema_export as schema_doc
from mem_assets.context_graph.assets import SCHEMA_CHECK, graph_schema
from mem_assets.context_graph.cli import app
from mem_resources.constraints import TENANT_SCOPED_LABELS
from tests.support.context_sample import load_sample
from tests.support.pipeline import base_resources, materialize_partition


def _check(neo4j, instance, tmp_path, tenant) -> dg.AssetCheckEvaluation:
    result = materialize_partition([graph_schema], tenant, instance,
                                   base_resources(neo4j, tmp_path / "inbox", tmp_path / "quarantine"))
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == SCHEMA_CHECK
    return evaluation


def test_realtime_and_offline_exports_match_the_reference(neo4j, instance, tmp_path, tenant):
    reference = schema_doc.load_document(schema_doc.REFERENCE_PATH)
    exports = {}
    for style in ("realtime", "offline"):
        name = f"{tenant}_{style}"
        assert load_sample(neo4j, name, instance, tmp_path / style, context_files=(f"{style}.jsonl",),
                           plain=False).success
        exports[style] = schema_doc.export_document(neo4j, name)
        differences = schema_doc.diff(reference, exports[style])
        assert schema_doc.breaking(differences) == [], style
        assert {d.kind for d in differences} <= {"count", "properties", "id format"}
        assert _check(neo4j, instance, tmp_path, name).passed

    assert set(exports["realtime"].node_type("Conversation").id_formats) == {"conv:<date>"}
    assert set(exports["offline"].node_type("Conversation").id_formats) == {"conv:ch<n>"}
    # seed 002's own procedure: diff the offline export against the realtime one
    differences = schema_doc.diff(exports["offline"], exports["realtime"])
    assert schema_doc.breaking(differences) == []
    assert ("id format", "Conversation") in {(d.kind, d.subject) for d in differences}

    assert load_sample(neo4j, tenant, instance, tmp_path / "both").success
    combined = schema_doc.export_document(neo4j, tenant)
    assert [d for d in schema_doc.diff(reference, combined) if d.kind != "count"] == []


@pytest.mark.parametrize(("defect", "breaking_kind"), [
    (("MATCH (c:Character {user_name: $t})-[r:OWNS_MEMORY]->(m) "
      "CREATE (m)-[:OWNS_MEMORY]->(c) DELETE r"), "direction"),
    (("MATCH (c:Character {user_name: $t, id: 'char:xnne'}) "
      "CREATE (:Character {user_name: $t, id: 'character:xnne', character_id: 'xnne', name: 'xnne', "
      "display: 'xnne'})"), "node type"),
])
def test_a_broken_writer_fails_the_check(neo4j, instance, tmp_path, tenant, defect, breaking_kind):
    load_sample(neo4j, tenant, instance, tmp_path, context_files=("realtime.jsonl",), plain=False)
    assert _check(neo4j, instance, tmp_path, tenant).passed
    with neo4j.session() as session:
        session.run(defect, t=tenant).consume()
    evaluation = _check(neo4j, instance, tmp_path, tenant)
    assert not evaluation.passed
    assert evaluation.metadata["breaking"].value >= 1
    assert f"| breaking | {breaking_kind} |" in evaluation.metadata["differences"].value


def test_export_is_scoped_to_one_tenant(neo4j, instance, tmp_path, tenant):
    other = f"{tenant}_other"
    load_sample(neo4j, tenant, instance, tmp_path / "a", context_files=("realtime.jsonl",), plain=False)
    load_sample(neo4j, other, instance, tmp_path / "b", context_files=("offline.jsonl",), plain=False)
    mine = schema_doc.export_document(neo4j, tenant)
    with neo4j.session() as session:
        total = session.run("MATCH (n {user_name: $t}) RETURN count(n) AS n", t=tenant).single()["n"]
    assert sum(n.count for n in mine.node_types) == total
    assert set(mine.node_type("Conversation").id_formats) == {"conv:<date>"}
    everyone = schema_doc.export_document(neo4j, None)
    assert everyone.node_type("Conversation").id_formats.keys() >= {"conv:<date>", "conv:ch<n>"}
    assert all(r.cross_tenant == 0 for r in everyone.relationship_types)


def _operators(plan: dict) -> list[tuple[str, str]]:
    return [(plan["operatorType"].split("@")[0], plan.get("args", {}).get("Details", "")),
            *(op for child in plan.get("children", []) for op in _operators(child))]


def test_a_tenant_export_reads_its_own_nodes_only(neo4j, instance, tmp_path, tenant):
    """A tenant's schema check costs its own size: memtend's labels are read through their
    user_name indexes, another writer's label by its label scan, never every node of the database;
    the writer's nodes of that tenant are still counted."""
    load_sample(neo4j, tenant, instance, tmp_path, context_files=("realtime.jsonl",), plain=False)
    with neo4j.session() as session:
        session.run("CREATE (:WriterNote {user_name: $t, id: 'note:1'}), (:WriterNote {user_name: $o, id: 'note:2'})",
                    t=tenant, o=f"{tenant}_other").consume()
        plan = session.execute_read(lambda tx: tx.run(
            "EXPLAIN " + queries.tenant_nodes(tx, tenant) + "RETURN count(n)", tenant=tenant).consume().plan)
    operators = _operators(plan)
    assert "AllNodesScan" not in {name for name, _ in operators}
    seeks = " ".join(details for name, details in operators if name == "NodeIndexSeek")
    assert all(f"n:{label}(user_name)" in seeks for label in (*TENANT_SCOPED_LABELS, "Node"))
    assert ("NodeByLabelScan", "n:Node") not in operators, "memtend's own seed label is read by tenant"
    assert ("NodeByLabelScan", "n:WriterNote") in operators
    [note] = [n for n in schema_doc.export_document(neo4j, tenant).node_types if ":WriterNote" in n.labels]
    assert note.count == 1


def test_cli_exports_and_diffs(neo4j, neo4j_uri, instance, tmp_path, tenant, monkeypatch):
    monkeypatch.setenv("NEO4J_URI", neo4j_uri)
    load_sample(neo4j, tenant, instance, tmp_path, context_files=("realtime.jsonl",), plain=False)
    runner = CliRunner()

    exported = tmp_path / "realtime.json"
    result = runner.invoke(app, ["export", "--tenant", tenant, "--format", "json", "--output", str(exported)])
    assert result.exit_code == 0, result.output
    assert json.loads(exported.read_text())["tenant"] == tenant

    markdown = runner.invoke(app, ["export", "--tenant", tenant])
    assert markdown.exit_code == 0 and "| OWNS_MEMORY | Character | → | MemoryItem |" in markdown.output

    assert runner.invoke(app, ["diff", "--candidate", str(exported)]).exit_code == 0
    live = runner.invoke(app, ["diff", "--tenant", tenant, "--format", "json"])
    assert live.exit_code == 0 and all(d["severity"] == "expected" for d in json.loads(live.output))

    broken = json.loads(exported.read_text())
    for rel in broken["relationship_types"]:
        if rel["type"] == "IN_SCENE":
            rel["source"], rel["target"] = rel["target"], rel["source"]
    broken_path = tmp_path / "broken.json"
    broken_path.write_text(json.dumps(broken))
    failed = runner.invoke(app, ["diff", "--candidate", str(broken_path)])
    assert failed.exit_code == 1 and "| breaking | direction | IN_SCENE (Scene → MemoryItem)" in failed.output
    assert runner.invoke(app, ["diff"]).exit_code != 0


def test_the_schema_check_keeps_one_status_per_tenant(neo4j, instance, tmp_path, tenant):
    broken, fine = f"{tenant}_broken", f"{tenant}_fine"
    for name in (broken, fine):
        load_sample(neo4j, name, instance, tmp_path / name, context_files=("realtime.jsonl",),
                    plain=False)
    with neo4j.session() as session:
        session.run("MATCH (c:Character {user_name: $t})-[r:OWNS_MEMORY]->(m) "
                    "CREATE (m)-[:OWNS_MEMORY]->(c) DELETE r", t=broken).consume()
    assert not _check(neo4j, instance, tmp_path, broken).passed
    assert _check(neo4j, instance, tmp_path, fine).passed

    key = dg.AssetCheckKey(dg.AssetKey("graph_schema"), SCHEMA_CHECK)
    infos = instance.event_log_storage.get_asset_check_partition_info([key], partition_keys=[broken, fine])
    status = {info.partition_key: info.latest_execution_status.value for info in infos}
    assert status == {broken: "FAILED", fine: "SUCCEEDED"}
