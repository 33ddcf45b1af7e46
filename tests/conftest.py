"""Shared fixtures: a real Neo4j, started by the project unless NEO4J_URI names one."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from filelock import FileLock

from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.evaluation import evaluate, read_pairs
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_resources.embedder import WordLlamaEmbedder
from mem_resources.local_servers import neo4j as local_neo4j
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings
from tests.support.fake_openai import FakeOpenAI, fake_openai_server

JUDGE_HELDOUT = Path(__file__).resolve().parents[1] / "research" / "data" / "judge" / "heldout.jsonl"


def pytest_configure(config: pytest.Config) -> None:
    """The process that owns the session (pytest alone, or the xdist controller) stops, at its end,
    the local server its tests started; workers only start it or reuse it (``local_neo4j.up``)."""
    settings = load_settings()
    if hasattr(config, "workerinput") or settings.neo4j_uri:
        return
    local = local_neo4j.LocalNeo4jSettings.from_settings(settings)
    if not local_neo4j.bolt_answers(local.uri):
        config.add_cleanup(lambda: local_neo4j.down(local))


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    """The server under test: ``NEO4J_URI``, else the project's local server (started once)."""
    settings = load_settings()
    return settings.neo4j_uri or local_neo4j.up(local_neo4j.LocalNeo4jSettings.from_settings(settings))


@pytest.fixture(scope="session")
def neo4j(neo4j_uri: str) -> Iterator[Neo4jResource]:
    resource = Neo4jResource.from_settings(load_settings().model_copy(update={"neo4j_uri": neo4j_uri}))
    yield resource
    resource.close()


@pytest.fixture
def tenant() -> str:
    """A tenant name no other test uses, so tests never see each other's data."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """A throwaway Dagster instance (its own temp storage) per test."""
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture(scope="session")
def judge_heldout_score(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict:
    """The default embedder and offline judge scored on the hand-written held-out pairs, once per
    test run (~25 s; xdist workers share the first one's result through a file): the floors read
    it and `memtend eval-judge` must print the same."""
    def compute() -> dict:
        return evaluate(read_pairs(JUDGE_HELDOUT), WordLlamaEmbedder(), OfflineJudge(), WORDLLAMA_THRESHOLD,
                        top_k=5)

    if worker_id == "master":
        return compute()
    shared = tmp_path_factory.getbasetemp().parent / "judge_heldout_score.json"
    with FileLock(f"{shared}.lock"):
        if not shared.is_file():
            shared.write_text(json.dumps(compute()), "utf-8")
        return json.loads(shared.read_text("utf-8"))


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    """A local OpenAI-compatible server for one test; the test scripts its answers over HTTP."""
    with fake_openai_server() as server:
        yield server
