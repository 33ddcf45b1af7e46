"""The built wheel, installed (not editable) into a fresh venv, carries everything it needs."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import sys
    import dagster as dg
    import mem_assets
    from mem_assets.context_graph.assets import graph_schema, SCHEMA_CHECK
    from mem_resources.neo4j_resource import Neo4jResource

    assert mem_assets.__file__.startswith(sys.prefix), mem_assets.__file__
    tenant = sys.argv[2]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", [tenant])
        result = dg.materialize([graph_schema], partition_key=tenant, instance=instance,
                                resources={"neo4j": Neo4jResource(uri=sys.argv[1])})
    [check] = result.get_asset_check_evaluations()
    print("materialized", result.success, check.check_name, check.passed)
""")


def test_wheel_installed_elsewhere_materializes_graph_schema(tmp_path: Path, neo4j_uri: str,
                                                             tenant: str):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    [wheel] = wheels.glob("memtend-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--quiet", str(wheel)],
                   check=True, cwd=tmp_path)
    # Dependencies come from the project's venv through PYTHONPATH (no .pth files run, so its
    # editable memtend stays invisible); memtend itself only from the fresh venv.
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(python), "-c", SCRIPT, neo4j_uri, tenant], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "materialized True matches_reference_schema" in done.stdout
