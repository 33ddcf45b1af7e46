"""Which tenants the dedup sensor asks for, and the shipped per-tenant run limit."""

from __future__ import annotations

from pathlib import Path

import yaml

from mem_assets.dedup.sensors import plan_requests


def test_only_tenants_whose_pending_set_changed_are_requested():
    to_run, cursor = plan_requests({"a": ["1"], "b": ["2", "3"]}, {})
    assert to_run == ["a", "b"]
    again, cursor = plan_requests({"a": ["1"], "b": ["2", "3", "4"]}, cursor)
    assert again == ["b"]
    done, cursor = plan_requests({}, cursor)
    assert done == [] and cursor == {}


def test_dagster_yaml_limits_runs_to_one_per_tenant():
    config = yaml.safe_load((Path(__file__).parents[2] / "dagster.yaml").read_text())
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    assert {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
