"""One settings object drives the Definitions and every CLI."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from mem_assets.cli import app
from mem_assets.definitions import build_definitions
from mem_resources import constraints
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import Settings
from tests.support.lifecycle import seed_tenant

#: Changes the database's indexes, which every other test relies on: runs alone (Makefile).
pytestmark = pytest.mark.serial


def _statuses(defs: dg.Definitions) -> set[str]:
    repository = defs.get_repository_def()
    return ({s.default_status.value for s in repository.sensor_defs}
            | {s.default_status.value for s in repository.schedule_defs
               if s.name != "nightly_backups"})


def test_automation_off_stops_every_sensor_and_schedule():
    assert _statuses(build_definitions(Settings(automation="off"))) == {"STOPPED"}
    assert _statuses(build_definitions(Settings(automation="ON"))) == {"RUNNING"}


def test_reorg_cron_comes_from_settings():
    defs = build_definitions(Settings(reorg_cron="15 1 * * *"))
    assert defs.get_schedule_def("reorg_schedule").cron_schedule == "15 1 * * *"


def test_settings_read_the_documented_variables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMTEND_SENSORS", "off")
    monkeypatch.setenv("MEMTEND_EMBEDDING_DIM", "256")
    monkeypatch.setenv("NEO4J_PASSWORD", "s3cret")
    settings = Settings()
    assert (settings.automation, settings.embedding_dim) == ("off", 256)
    assert settings.neo4j_password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)


def test_lifecycle_cli_uses_the_configured_embedding_dimension(
        neo4j: Neo4jResource, neo4j_uri: str, tenant: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch):
    """With another dimension, the CLI's resource must agree with the live vector index."""
    other = 384 if neo4j.embedding_dimension != 384 else 256
    seed_tenant(neo4j, tenant, 5)
    with neo4j.session() as session:
        session.run(f"DROP INDEX {constraints.VECTOR_INDEX}").consume()
        constraints.ensure(session, other)
    try:
        monkeypatch.setenv("NEO4J_URI", neo4j_uri)
        monkeypatch.setenv("MEMTEND_EMBEDDER", "hashing")
        monkeypatch.setenv("MEMTEND_EMBEDDING_DIM", str(other))
        result = CliRunner().invoke(app, ["backup", tenant, "--backup-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert "nodes" in result.output
    finally:
        with neo4j.session() as session:
            session.run(f"DROP INDEX {constraints.VECTOR_INDEX}").consume()
            constraints.ensure(session, neo4j.embedding_dimension)
