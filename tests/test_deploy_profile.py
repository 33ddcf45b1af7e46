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

from mem_resources import env_config, local_postgres
from mem_resources.local_postgres import LocalPostgres, LocalPostgresError

ROOT = Path(__file__).resolve().parents[1]
PER_TENANT = {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}


def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


def test_every_instance_profile_limits_each_tenant_to_one_run():
    local = _yaml("dagster.yaml")["concurrency"]["runs"]["tag_concurrency_limits"]
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


def test_set_variables_become_env_var_config_and_unset_ones_local_defaults():
    resource = env_config.neo4j_resource({"NEO4J_URI": "neo4j+s://db.example:7687",
                                          "NEO4J_PASSWORD": "s3cret", "NEO4J_USER": ""},
                                         default_uri="bolt://127.0.0.1:7687")
    assert isinstance(resource.uri, dg.EnvVar) and resource.uri.env_var_name == "NEO4J_URI"
    assert isinstance(resource.password, dg.EnvVar)
    assert resource.user == "" and resource.database == "neo4j"
    chat = env_config.chat_resource({"OPENAI_API_KEY": "sk-test"})
    assert isinstance(chat.api_key, dg.EnvVar) and chat.base_url is None
    assert chat.model == "gpt-4o-mini"


def test_local_postgres_refuses_a_port_held_by_something_else(tmp_path: Path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        cluster = LocalPostgres(home=tmp_path / "pg", port=squatter.getsockname()[1])
        with pytest.raises(LocalPostgresError, match="is taken by something that is not this cluster"):
            local_postgres.up(cluster)
    assert not (tmp_path / "pg" / "data").exists()
