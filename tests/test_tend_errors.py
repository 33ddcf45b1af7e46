"""`memtend tend` against a graph that does not answer: a few lines naming the problem and the fix,
not a Dagster traceback per tenant."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(("variable", "fix"), [("NEO4J_URI", "check NEO4J_URI"),
                                               ("MEMTEND_NEO4J_PORT", "make neo4j-up")])
def test_tend_without_neo4j_says_what_to_do_in_a_few_lines(tmp_path, variable, fix):
    port = _closed_port()
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items() if k != "NEO4J_URI"}
    env.update({"DAGSTER_HOME": str(home), "MEMTEND_INBOX": str(ROOT / "data" / "sample" / "inbox"),
                "MEMTEND_QUARANTINE": str(tmp_path / "quarantine"),
                variable: f"bolt://127.0.0.1:{port}" if variable == "NEO4J_URI" else str(port)})
    done = subprocess.run([sys.executable, "-m", "mem_assets.cli", "tend", "alice"], check=False,
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode != 0
    assert len(output) <= 10, output
    assert f"Neo4j at bolt://127.0.0.1:{port} does not answer" in output[0]
    assert fix in "\n".join(output)
    assert "Traceback" not in "\n".join(output)
