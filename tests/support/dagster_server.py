"""Start the Dagster webserver and daemon from workspace.yaml, and talk GraphQL to them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

#: For tests of how runs are launched, queued, leased and monitored: the model-free judge and
#: topic spaces. What those tests check does not depend on the models, which cost about three
#: quarters of a run's time; the dedup, topic and end-to-end tests run the defaults.
MODEL_FREE_ENV = {"MEMTEND_OFFLINE_JUDGE": "fast", "MEMTEND_TOPIC_E5_LANGUAGES": "none",
                  "MEMTEND_TOPIC_COMBINED_LANGUAGES": "none"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class DagsterServer:
    url: str
    home: Path
    env: dict[str, str]

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.load(response)
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the process we started, and the children in its own process group, by its pid."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _wait_until_up(server: DagsterServer, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited with {process.returncode}; see {server.home}")
        try:
            data = server.graphql('{ repositoryOrError(repositorySelector: {repositoryLocationName: '
                                  '"memtend", repositoryName: "__repository__"}) { __typename } }')
            if data["repositoryOrError"]["__typename"] == "Repository":
                return
        except (urllib.error.URLError, ConnectionError, AssertionError):
            pass
        time.sleep(1)
    log = (server.home / "webserver.log").read_text(errors="replace")[-3000:]
    raise TimeoutError(f"the webserver did not load the memtend location within {timeout_s:.0f}s:\n{log}")


@contextmanager
def dagster_webserver_and_daemon(home: Path, env: dict[str, str], timeout_s: float = 300,
                                 instance_yaml: Path = ROOT / "dagster_home" / "dagster.yaml") -> Iterator[DagsterServer]:
    """``dagster-webserver -w workspace.yaml`` on a free port plus ``dagster-daemon run``.

    DAGSTER_HOME is ``home`` with ``instance_yaml`` (default: the repo's dagster.yaml, with the
    per-tenant run limit) copied in.
    """
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(instance_yaml, home / "dagster.yaml")
    port = free_port()
    full_env = {**os.environ, **env, "DAGSTER_HOME": str(home),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    workspace = str(ROOT / "workspace.yaml")
    # The deploy steps: create the instance's storage and pools once, before processes race to.
    for setup in ([str(BIN / "dagster"), "instance", "migrate"], [str(BIN / "memtend"), "create-pools"]):
        subprocess.run(setup, cwd=ROOT, env=full_env, check=True, capture_output=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in [
            ("webserver", [str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1",
                           "-p", str(port)]),
            ("daemon", [str(BIN / "dagster-daemon"), "run", "-w", workspace]),
        ]:
            log = (home / f"{name}.log").open("wb")
            processes.append(subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        server = DagsterServer(url=f"http://127.0.0.1:{port}", home=home, env=full_env)
        _wait_until_up(server, processes[0], timeout_s)
        yield server
    finally:
        for process in reversed(processes):
            _stop(process)
