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
    limits = yaml.safe_load((ROOT / "dagster_home" / "dagster.yaml").read_text())["concurrency"]["runs"][
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


def _check_specs() -> list[dg.AssetCheckSpec]:
    """Every check of the code location: those of the checks steps and those an asset yields."""
    return [*(spec for checks in defs.asset_checks or [] for spec in checks.check_specs),
            *(spec for asset in defs.assets or [] if isinstance(asset, dg.AssetsDefinition)
              for spec in asset.check_specs)]


def test_every_check_reports_per_tenant_under_a_name_of_its_own():
    specs = _check_specs()
    names = [spec.name for spec in specs]
    assert "judge_failures" in names and len(names) == len(set(names))
    assert all(spec.partitions_def == tenant_partitions for spec in specs), \
        [spec.name for spec in specs if spec.partitions_def != tenant_partitions]


def test_every_sensor_and_schedule_says_what_it_does():
    automations = [*(defs.sensors or []), *(defs.schedules or [])]
    assert len(automations) == 5
    assert all(a.description and "\n" not in a.description for a in automations)


def test_loading_the_definitions_prints_nothing_and_leaves_logging_alone():
    """The code server and each run process load them: no preview warning, and wordllama's
    ``logging.basicConfig(level=INFO)`` undone (else alembic prints dozens of lines per run)."""
    probe = ("import logging, mem_assets.definitions; root = logging.getLogger(); "
             "print(len(root.handlers), logging.getLevelName(root.level))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True,
                          text=True)
    assert done.stderr == ""
    assert done.stdout.split() == ["0", "WARNING"]
