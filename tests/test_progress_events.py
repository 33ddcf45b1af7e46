"""Long work is visible in the run's event log: progress lines from the assets, and warnings from
the project's own loggers when the instance routes them (``python_logs`` in dagster.yaml)."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import yaml

from mem_assets.dedup.assets import dedup_candidates, relation_judgments
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.ingest.assets import memory_items
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.lifecycle.jobs import backup_tenant_job
from mem_resources import progress
from mem_resources.llm import OpenAIChatResource
from tests.support.fake_openai import chat_answer, fake_openai_server
from tests.support.pipeline import (
    base_resources,
    materialize_partition,
    write_inbox_file,
)

ROOT = Path(__file__).resolve().parents[1]


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(run_id)]


def _routed_instance_overrides() -> dict:
    """The ``python_logs`` block of the production instance config, as it is in the repo."""
    return {"python_logs": yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())["python_logs"]}


def test_ingest_and_backup_report_progress_lines_in_the_event_log(neo4j, tenant, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "DEFAULT_INTERVAL_S", 0.02)
    lines = [{"memory": f"Note {uuid.uuid4().hex} number {i}.", "created_at": "2026-11-01T08:00:00Z"}
             for i in range(3000)]
    write_inbox_file(tmp_path / "inbox", tenant, "big.jsonl", lines)
    resources = base_resources(neo4j, tmp_path / "inbox", tmp_path / "q")
    with dg.instance_for_test() as instance:
        result = materialize_partition([memory_items], tenant, instance, resources, run_config={
            "ops": {"memory_items": {"config": {"batch_size": 100}}}})
        assert result.success
        ingest_lines = [m for m in _messages(instance, result.run_id)
                        if m.startswith(f"ingest {tenant}/big.jsonl: ")]
        backup = backup_tenant_job.execute_in_process(
            instance=instance,
            resources={"neo4j": neo4j, "backups": BackupStorage(root=str(tmp_path / "backups"))},
            run_config={"ops": {"backup_tenant_op": {"config": {"tenant": tenant, "page_size": 50}}}})
        assert backup.success
        backup_lines = [m for m in _messages(instance, backup.run_id) if m.startswith(f"backup {tenant}: ")]

    assert len(ingest_lines) >= 2, ingest_lines
    assert "lines/s" in ingest_lines[0] and "/3,000 lines (" in ingest_lines[0]
    assert ingest_lines[-1].startswith(f"ingest {tenant}/big.jsonl: 3,000/3,000 lines (100%)")
    assert ingest_lines[-1].endswith("(done)")
    assert backup_lines and backup_lines[-1].endswith("(done)")
    assert " nodes (100%)" in backup_lines[-1]


def test_warnings_of_project_loggers_reach_the_event_log(neo4j, tenant, tmp_path):
    write_inbox_file(tmp_path / "inbox", tenant, "cats.jsonl", [
        {"memory": "The user has two cats.", "created_at": "2026-11-01T08:00:00Z"},
        {"memory": "The user has two cats, Luna and Milo.", "created_at": "2026-11-01T09:00:00Z"}])
    with (fake_openai_server() as server,
          dg.instance_for_test(overrides=_routed_instance_overrides()) as instance):
        server.chat = lambda body: (200, chat_answer("I think they are kind of the same?"))
        judge = OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0))
        resources = {**base_resources(neo4j, tmp_path / "inbox", tmp_path / "q"), "judge": judge}
        result = materialize_partition([memory_items, dedup_candidates, relation_judgments], tenant,
                                       instance, resources)
        assert result.success
        records = [entry for entry in instance.all_logs(result.run_id)
                   if entry.user_message.startswith("Judge failed on")]
    assert records, "the judge's warning (logger mem_assets.dedup.pair_judge) is not in the event log"
    assert records[0].step_key == "relation_judgments"
