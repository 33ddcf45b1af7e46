"""`memtend tend`, run as a user runs it (a subprocess, its own Dagster home, the real Neo4j):
a healthy tenant exits 0 with "ok"; a tenant whose graph an error-severity check rejects (an
archived memory planted with two lineage edges, the state a half-finished restore left in issue
45) exits non-zero, says FAILED and names the failed check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_resolution import _item

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ("Rosa lives in Lisbon.", "Rosa is allergic to cats.", "Rosa plays the cello on Sundays.")


def _tend(tenant: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mem_assets.cli", "tend", tenant], check=False, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def test_tend_exits_non_zero_naming_the_failed_error_checks(neo4j, neo4j_uri, tenant, tmp_path):
    home, inbox = tmp_path / "home", tmp_path / "inbox"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    (inbox / tenant).mkdir(parents=True)
    (inbox / tenant / "day1.jsonl").write_text(
        "".join(json.dumps(_item(text)) + "\n" for text in TEXTS), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home), "NEO4J_URI": neo4j_uri,
           "MEMTEND_INBOX": str(inbox), "MEMTEND_QUARANTINE": str(tmp_path / "quarantine"),
           "MEMTEND_EMBEDDER": "hashing", "MEMTEND_EMBEDDING_DIM": str(neo4j.embedding_dimension),
           "MEMTEND_OFFLINE_JUDGE": "fast", "MEMTEND_TOPIC_COMBINED_LANGUAGES": "none", "MEMTEND_LLM": "offline"}

    healthy = _tend(tenant, env, tmp_path)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert f"{tenant}: ok" in healthy.stdout and "failed checks" not in healthy.stderr

    with neo4j.session() as session:  # one memory archived twice: MERGED_TO two successors
        planted = session.run(
            """
            MATCH (n:MemoryItem {user_name: $t, memory: $first, memory_type: 'LongTermMemory'})
            MATCH (a:MemoryItem {user_name: $t, memory: $second, memory_type: 'LongTermMemory'})
            MATCH (b:MemoryItem {user_name: $t, memory: $third, memory_type: 'LongTermMemory'})
            SET n.status = 'archived', n.evolve_to = [a.id], n.archived_reason = 'merged'
            CREATE (n)-[:MERGED_TO]->(a), (n)-[:MERGED_TO]->(b)
            RETURN count(*) AS planted
            """, t=tenant, first=TEXTS[0], second=TEXTS[1], third=TEXTS[2]).single()["planted"]
    assert planted == 1

    broken = _tend(tenant, env, tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert f"{tenant}: FAILED" in broken.stdout
    [named] = [line for line in broken.stderr.splitlines() if "failed checks:" in line]
    assert "merged_nodes:lineage_edges_unique" in named
    assert f"failed: {tenant}" in broken.stderr
