"""`memtend tend --workers 2`: a night of several tenants shared by two worker processes, each run
recorded on the instance and each tenant's graph tended as a lone `memtend tend` would."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.run_liveness import PID_TAG
from tests.support.dagster_server import BIN, MODEL_FREE_ENV, ROOT
from tests.support.pipeline import node_count

SAMPLE = ROOT / "data" / "sample" / "inbox"
LINES_PER_FILE = 20


def test_two_workers_tend_every_tenant_once_and_report_each_run(
        neo4j: Neo4jResource, neo4j_uri: str, tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tenants = [f"{tenant}_{name}" for name in ("alice", "sam", "wang_lei")]
    for name, chosen in zip(("alice", "sam", "wang_lei"), tenants, strict=True):
        (tmp_path / "inbox" / chosen).mkdir(parents=True)
        for sample in (SAMPLE / name).glob("*.jsonl"):
            lines = sample.read_bytes().splitlines(keepends=True)[:LINES_PER_FILE]
            (tmp_path / "inbox" / chosen / sample.name).write_bytes(b"".join(lines))
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, **MODEL_FREE_ENV, "DAGSTER_HOME": str(home), "NEO4J_URI": neo4j_uri,
           "MEMTEND_AUTOMATION": "off", "MEMTEND_INBOX": str(tmp_path / "inbox"),
           "MEMTEND_QUARANTINE": str(tmp_path / "q")}

    cli = subprocess.Popen([str(BIN / "memtend"), "tend", "--workers", "2", *tenants], env=env, cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = cli.communicate(timeout=600)

    assert cli.returncode == 0, stdout[-3000:] + stderr[-3000:]
    for chosen in tenants:
        assert f"{chosen}: ok in " in stdout
        assert node_count(neo4j, chosen) > 0
    assert stdout.count("  ingest ") == len(tenants), stdout
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the instance's storage lives in $DAGSTER_HOME
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
    assert sorted(run.tags["dagster/partition"] for run in runs) == sorted(tenants)
    assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    workers = {int(run.tags[PID_TAG]) for run in runs}
    assert 1 <= len(workers) <= 2 and cli.pid not in workers, "the runs did not execute in worker processes"
