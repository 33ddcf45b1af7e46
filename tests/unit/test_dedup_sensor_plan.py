"""Which tenants the dedup sensor asks for."""

from __future__ import annotations

from mem_assets.dedup.sensors import plan_requests


def test_only_tenants_whose_pending_set_changed_are_requested():
    to_run, cursor = plan_requests({"a": ["1"], "b": ["2", "3"]}, {})
    assert to_run == ["a", "b"]
    again, cursor = plan_requests({"a": ["1"], "b": ["2", "3", "4"]}, cursor)
    assert again == ["b"]
    done, cursor = plan_requests({}, cursor)
    assert done == [] and cursor == {}

