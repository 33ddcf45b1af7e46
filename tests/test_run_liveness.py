"""A `memtend tend` killed with SIGKILL leaves no run holding its tenant's slot."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
from dagster._core.storage.dagster_run import IN_PROGRESS_RUN_STATUSES
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

from mem_resources.run_liveness import fail_dead_runs
from tests.support.dagster_server import ROOT
from tests.support.pipeline import write_inbox_file

BIN = Path(sys.executable).parent


def _started_run(instance: dg.DagsterInstance, tenant: str, process: subprocess.Popen,
                 timeout_s: float = 120) -> dg.RunRecord:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, "memtend tend ended before its run started"
        records = instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": tenant}))
        if records and records[0].dagster_run.status == dg.DagsterRunStatus.STARTED:
            return records[0]
        time.sleep(0.1)
    raise TimeoutError("no run started")


def _in_progress(instance: dg.DagsterInstance, tenant: str) -> list[dg.RunRecord]:
    return list(instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS_RUN_STATUSES,
                                                       tags={"dagster/partition": tenant})))


def test_a_killed_cli_run_is_failed_by_run_monitoring_and_by_the_next_cli(neo4j_uri, tenant, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    write_inbox_file(tmp_path / "inbox", tenant, "many.jsonl",
                     [{"memory": f"Fact {i} about the user's garden, plant {i % 97}."} for i in range(3000)])
    env = {**os.environ, "DAGSTER_HOME": str(home), "NEO4J_URI": neo4j_uri,
           "MEMTEND_INBOX": str(tmp_path / "inbox"), "MEMTEND_QUARANTINE": str(tmp_path / "q")}
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the instance's storage lives in $DAGSTER_HOME
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_launcher.supports_check_run_worker_health
        logger = logging.getLogger("test_run_liveness")

        cli = subprocess.Popen([str(BIN / "memtend"), "tend", tenant], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            record = _started_run(instance, tenant, cli)
            monitor_started_run(instance, None, record, logger)  # alive: left alone
            assert instance.get_run_by_id(record.dagster_run.run_id).status == dg.DagsterRunStatus.STARTED
        finally:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait(timeout=30)

        assert [r.dagster_run.run_id for r in _in_progress(instance, tenant)] == [record.dagster_run.run_id]
        monitor_started_run(instance, None, instance.get_run_records(
            dg.RunsFilter(run_ids=[record.dagster_run.run_id]))[0], logger)
        assert instance.get_run_by_id(record.dagster_run.run_id).status == dg.DagsterRunStatus.FAILURE
        assert _in_progress(instance, tenant) == []

        second = subprocess.Popen([str(BIN / "memtend"), "tend", tenant], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            orphan = _started_run(instance, tenant, second)
        finally:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(timeout=30)
        idle = subprocess.run([str(BIN / "memtend"), "tend", "--create", tenant + "_idle"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300, check=False)
        assert idle.returncode == 0, idle.stderr[-2000:]
        assert f"run {orphan.dagster_run.run_id}: its process died; marked failed" in idle.stderr
        assert _in_progress(instance, tenant) == []
        assert fail_dead_runs(instance) == []
