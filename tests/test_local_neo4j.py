"""The project's own Neo4j launcher: reuse when running, clear errors when it cannot start."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from mem_resources import local_neo4j
from mem_resources.local_neo4j import LocalNeo4jError, LocalNeo4jSettings


def test_up_reuses_the_running_server(neo4j_uri: str):
    if os.environ.get("NEO4J_URI"):
        pytest.skip("an external server is configured; the launcher is not used")
    settings = LocalNeo4jSettings.from_env()
    pid_before = settings.pid_file.read_text()
    assert local_neo4j.up(settings) == neo4j_uri
    assert settings.pid_file.read_text() == pid_before
    assert local_neo4j.bolt_answers(neo4j_uri)


def test_missing_java_fails_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = dataclasses.replace(LocalNeo4jSettings.from_env(), home=tmp_path, port=1)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalNeo4jError, match="`java` was not found on PATH"):
        local_neo4j.up(settings)


def test_external_uri_means_nothing_is_started(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEO4J_URI", "bolt://db.example.invalid:7687")
    assert local_neo4j.ensure_neo4j_uri() == "bolt://db.example.invalid:7687"
