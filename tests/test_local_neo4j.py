"""The project's own Neo4j launcher: reuse when running, clear errors when it cannot start."""

from __future__ import annotations

import dataclasses
import signal
import time
from pathlib import Path

import pytest

from mem_resources.local_servers import neo4j as local_neo4j
from mem_resources.local_servers.neo4j import LocalNeo4jError, LocalNeo4jSettings
from mem_resources.settings import load_settings
from tests.support.dagster_server import free_port


def test_up_reuses_the_running_server(neo4j_uri: str):
    if load_settings().neo4j_uri:
        pytest.skip("an external server is configured; the launcher is not used")
    settings = LocalNeo4jSettings.from_settings(load_settings())
    pid_before = settings.pid_file.read_text()
    assert local_neo4j.up(settings) == neo4j_uri
    assert settings.pid_file.read_text() == pid_before
    assert local_neo4j.bolt_answers(neo4j_uri)


def test_missing_java_fails_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = dataclasses.replace(LocalNeo4jSettings.from_settings(load_settings()), home=tmp_path, port=1)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalNeo4jError, match="`java` was not found on PATH"):
        local_neo4j.up(settings)


def test_external_uri_means_nothing_is_started(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEO4J_URI", "bolt://db.example.invalid:7687")
    monkeypatch.setenv("MEMTEND_NEO4J_HOME", "/nonexistent/never-created")
    assert local_neo4j.ensure_neo4j_uri(load_settings()) == "bolt://db.example.invalid:7687"
    assert not Path("/nonexistent/never-created").exists()


def test_a_server_started_where_sigterm_is_ignored_still_stops_cleanly(tmp_path: Path):
    """Dagster maps SIGTERM to SIGINT's handler, which a background job ignores; a JVM that inherits
    an ignored SIGTERM never runs its shutdown hook and `down` can only kill it."""
    if load_settings().neo4j_uri:
        pytest.skip("an external server is configured; the launcher is not used")
    settings = dataclasses.replace(LocalNeo4jSettings.from_settings(load_settings()), home=tmp_path / "neo4j",
                                   port=free_port(), heap="512m")
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        local_neo4j.up(settings)
    finally:
        signal.signal(signal.SIGTERM, previous)
    pid = int(settings.pid_file.read_text())
    started = time.monotonic()
    assert local_neo4j.down(settings, timeout_s=45)
    assert time.monotonic() - started < 45, "the server ignored SIGTERM and was killed"
    assert not local_neo4j.bolt_answers(settings.uri)
    debug_log = (settings.home / "dbms" / "logs" / "debug.log").read_text()
    assert "Stopped 'DatabaseId{00000000[system]}' successfully" in debug_log, f"pid {pid} was not shut down"
