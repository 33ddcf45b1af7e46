"""The deployment profile agrees with itself and with the code: one run per tenant everywhere,
the code location the Helm chart serves is the one the repo defines, secrets stay env vars."""

from __future__ import annotations

import re
import socket
import tomllib
from pathlib import Path

import dagster as dg
import pytest
import yaml

from mem_assets.resources import build_chat, build_embedder, build_neo4j
from mem_resources import bge
from mem_resources.local_servers import postgres as local_postgres
from mem_resources.local_servers.postgres import LocalPostgres, LocalPostgresError
from mem_resources.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
PER_TENANT = {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}


def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def test_every_instance_profile_limits_each_tenant_to_one_run():
    local = _yaml("dagster_home/dagster.yaml")["concurrency"]["runs"]["tag_concurrency_limits"]
    production = _yaml("deploy/dagster.yaml")["concurrency"]["runs"]["tag_concurrency_limits"]
    helm = _yaml("deploy/helm/values.yaml")["dagsterDaemon"]["runCoordinator"]["config"][
        "queuedRunCoordinator"]["tagConcurrencyLimits"]
    assert PER_TENANT in local and PER_TENANT in production and PER_TENANT in helm


def test_production_instance_keeps_state_in_postgres_from_env_vars_only():
    postgres_db = _yaml("deploy/dagster.yaml")["storage"]["postgres"]["postgres_db"]
    for field in ("hostname", "port", "username", "password", "db_name"):
        assert set(postgres_db[field]) == {"env"}, field


def test_helm_and_docker_serve_the_code_location_the_repo_defines():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    [deployment] = _yaml("deploy/helm/values.yaml")["dagster-user-deployments"]["deployments"]
    assert deployment["name"] == tool["code_location_name"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", tool["module_name"]]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert f'"-m", "{tool["module_name"]}", "--location-name", "{tool["code_location_name"]}"' in dockerfile
    copied = {source for line in re.findall(r"^COPY (.+)$", dockerfile, flags=re.MULTILINE)
              for source in line.split()[:-1]}
    assert {"mem_assets", "mem_resources", "requirements.lock"} <= copied


def test_dg_finds_the_project_definitions():
    dg_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]
    assert dg_config["directory_type"] == "project"
    assert dg_config["project"]["code_location_target_module"] == "mem_assets.definitions"


def test_connection_settings_from_the_environment_reach_dagster_as_env_vars(monkeypatch):
    for name in ("NEO4J_USER", "NEO4J_DATABASE", "OPENAI_BASE_URL", "MEMTEND_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NEO4J_URI", "neo4j+s://db.example:7687")
    monkeypatch.setenv("NEO4J_PASSWORD", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = load_settings()
    neo4j, chat = build_neo4j(settings), build_chat(settings)
    assert isinstance(neo4j.uri, dg.EnvVar) and neo4j.uri.env_var_name == "NEO4J_URI"
    assert isinstance(neo4j.password, dg.EnvVar) and neo4j.password.env_var_name == "NEO4J_PASSWORD"
    assert neo4j.user == "" and neo4j.database == "neo4j"
    assert isinstance(chat.api_key, dg.EnvVar) and chat.base_url is None
    assert chat.model == "gpt-4o-mini"


def test_outside_dagster_the_cli_gets_the_values_not_the_variable_names(monkeypatch):
    """``reembed``, ``eval-judge`` and ``eval-topics`` call the OpenAI client directly: nothing
    resolves an ``EnvVar`` there, and its string is the variable's name."""
    monkeypatch.setenv("MEMTEND_EMBEDDER", "openai")
    monkeypatch.setenv("MEMTEND_EMBEDDING_MODEL", "text-embedding-3-small")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = load_settings()
    direct = build_embedder(settings, in_dagster=False)
    assert (direct.model, direct.base_url, direct.api_key) == ("text-embedding-3-small", "http://127.0.0.1:9/v1",
                                                              "sk-test")
    assert not isinstance(direct.model, dg.EnvVar) and not isinstance(direct.base_url, dg.EnvVar)
    in_dagster = build_embedder(settings)
    assert isinstance(in_dagster.model, dg.EnvVar) and in_dagster.model.env_var_name == "MEMTEND_EMBEDDING_MODEL"


def test_values_set_in_code_stay_values_even_when_the_environment_differs(monkeypatch):
    monkeypatch.setenv("NEO4J_URI", "bolt://from-the-environment:7687")
    neo4j = build_neo4j(Settings(neo4j_uri="bolt://set-in-code:7687"))
    assert neo4j.uri == "bolt://set-in-code:7687" and not isinstance(neo4j.uri, dg.EnvVar)


def test_local_postgres_refuses_a_port_held_by_something_else(tmp_path: Path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        cluster = LocalPostgres(home=tmp_path / "pg", port=squatter.getsockname()[1])
        with pytest.raises(LocalPostgresError, match="is taken by something that is not this cluster"):
            local_postgres.up(cluster)
    assert not (tmp_path / "pg" / "data").exists()


def test_runs_share_one_process_unless_configured_and_llm_steps_are_pooled_and_retried():
    from mem_assets.definitions import build_definitions

    defs = build_definitions(Settings())
    assert defs.resolve_job_def("tend_memory").executor_def.name == "in_process"
    multi = build_definitions(Settings(executor="multiprocess")).resolve_job_def("tend_memory")
    assert multi.executor_def.name == "multiprocess"
    ops = {node.name: node.definition for node in defs.resolve_job_def("tend_memory").graph.nodes}
    for name in ("relation_judgments", "merged_nodes", "summary_parents"):
        assert ops[name].pool == "llm", name
        assert ops[name].retry_policy.max_retries == 3 and ops[name].retry_policy.backoff is not None
    assert {ops[name].pool for name in ("memory_items", "context_graph", "dedup_candidates")} == {
        "neo4j_write"}
    assert ops["graph_schema"].pool is None
    assert defs.resolve_assets_def("graph_schema").group_names_by_key[dg.AssetKey("graph_schema")] == "schema"
    assert all(spec.owners == ["team:memory-platform"] and spec.code_version
               for spec in defs.resolve_all_asset_specs())


def test_the_image_carries_the_judge_models_it_is_pinned_to():
    """The accurate judge reads bge-small jars from MEMTEND_MODELS_DIR; the image fetches them at
    build time (a pod downloads nothing), so its coordinates must be the ones bge.py pins."""
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert set(re.findall(r"-Dartifact=(\S+)", dockerfile)) == {jar.coordinates for jar in bge.JARS.values()}
    models_dir = re.search(r"MEMTEND_MODELS_DIR=(\S+)", dockerfile).group(1)
    assert f"COPY --from=models /models {models_dir}" in dockerfile
