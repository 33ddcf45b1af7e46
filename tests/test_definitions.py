"""The code location loads, and workspace.yaml, pyproject and dagster.yaml agree with it."""

import subprocess
import sys
import tomllib
from pathlib import Path

import dagster as dg
import yaml

from mem_assets.definitions import defs, tenant_pipeline
from mem_resources.partitions import tenant_partitions

ROOT = Path(__file__).resolve().parents[1]


def test_definitions_load_and_name_the_code_location_consistently():
    dg.Definitions.validate_loadable(defs)
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]
    [entry] = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    assert entry["python_module"] == {"module_name": tool["module_name"],
                                      "location_name": tool["code_location_name"]}
    assert tool["module_name"] == "mem_assets.definitions"


def test_every_tenant_stage_is_partitioned_by_tenant():
    assert all(asset.partitions_def == tenant_partitions for asset in tenant_pipeline)
    job = defs.resolve_job_def("tend_memory")
    assert job.partitions_def == tenant_partitions


def test_instance_config_limits_each_tenant_to_one_run_at_a_time():
    limits = yaml.safe_load((ROOT / "dagster.yaml").read_text())["concurrency"]["runs"][
        "tag_concurrency_limits"]
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True},
            "limit": 1} in limits


def test_loading_the_definitions_leaves_the_heavy_libraries_to_the_runs_that_use_them():
    """Every run, sensor tick and CLI command loads the definitions (and `memtend` its commands)
    first: scikit-learn, SciPy's clustering and jieba (~2.5 s of imports) wait until a step
    clusters, scores topics or reads Chinese."""
    probe = ("import sys, mem_assets.definitions, mem_assets.cli; "
             "print(sorted(m for m in ('sklearn', 'scipy.cluster', 'jieba') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-W", "ignore", "-c", probe], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    assert loaded == "[]"
