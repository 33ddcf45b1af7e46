"""Runs whose process died are marked failed, so they stop holding their tenant's run slot.

``memtend tend`` executes runs inside its own process. Killed there, a run stayed STARTED forever
and the per-tenant limit kept every queued run of that tenant waiting. Such runs carry the pid,
host and start time of their process in tags; Dagster's run monitoring (enabled in dagster.yaml)
asks the run launcher below whether the process still lives, and the CLI reaps dead ones itself
before it starts, so this also works where no daemon runs.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import psutil
from dagster import DagsterInstance, DagsterRunStatus, DefaultRunLauncher, RunsFilter
from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus
from dagster._core.storage.dagster_run import DagsterRun

PID_TAG = "memtend/pid"
HOST_TAG = "memtend/host"
STARTED_TAG = "memtend/process_started"
_START_TIME_SLACK_S = 0.05


def process_tags() -> dict[str, str]:
    """Tags naming the current process, for a run it executes in-process."""
    me = psutil.Process()
    return {PID_TAG: str(me.pid), HOST_TAG: socket.gethostname(), STARTED_TAG: repr(me.create_time())}


def process_alive(tags: Mapping[str, str]) -> bool | None:
    """Whether the process named by a run's tags is still running: None when the run has no such
    tags or ran on another host (nothing can be said from here)."""
    if PID_TAG not in tags:
        return None
    try:
        pid, started = int(tags[PID_TAG]), float(tags[STARTED_TAG]) if STARTED_TAG in tags else None
    except ValueError:
        return None
    return pid_alive(pid, tags.get(HOST_TAG, ""), started)


def pid_alive(pid: int, host: str, started: float | None) -> bool | None:
    """Whether process ``pid`` of ``host``, started at ``started`` (epoch seconds), still runs:
    None for another host. A pid reused by a newer process counts as dead: its start time differs."""
    if host != socket.gethostname():
        return None
    try:
        process = psutil.Process(pid)
        created = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    return started is None or abs(created - started) <= _START_TIME_SLACK_S


def _death_notice(run: DagsterRun) -> str:
    return (f"The process that executed this run in-process (pid {run.tags.get(PID_TAG)} on "
            f"{run.tags.get(HOST_TAG)}) is gone; marked failed so the tenant's runs can go on.")


def fail_dead_runs(instance: DagsterInstance) -> list[str]:
    """Mark failed every started in-process run of this host whose process died; returns their ids."""
    failed = []
    for record in instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTED])):
        run = record.dagster_run
        if process_alive(run.tags) is False:
            instance.report_run_failed(run, _death_notice(run))
            failed.append(run.run_id)
    return failed


class LivenessCheckingRunLauncher(DefaultRunLauncher):
    """Dagster's default launcher, plus a health check run monitoring can call: a run executed
    in-process by a memtend CLI is failed once its process is gone; other runs report running
    (the default launcher has no health check for them)."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: DagsterRun) -> CheckRunHealthResult:
        if process_alive(run.tags) is False:
            return CheckRunHealthResult(WorkerStatus.FAILED, _death_notice(run))
        return CheckRunHealthResult(WorkerStatus.RUNNING)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Mapping[str, Any]) -> LivenessCheckingRunLauncher:
        return cls(inst_data=inst_data)
