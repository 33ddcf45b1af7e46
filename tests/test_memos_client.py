"""MemOS itself as the client (issue 46): MemOS 2.x, installed apart by `make memos-venv`, writes
two users' memories into the test Neo4j through its own API; memtend tends them in place; MemOS's
own read API then shows the fused memory and not its archived sources, the topic parents, nothing
of the other user, and logs no warning or error."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import PROJECT_ROOT
from tests.support.memos_graph import (
    CATS,
    EMBEDDER,
    HOME,
    OTHERS,
    T0,
    TOPICAL,
    checks_pass,
    memos_edges,
    memos_nodes,
    memos_resource,
    run_dedup,
)
from tests.support.reorg_graph import run_reorg

MEMOS_PYTHON = PROJECT_ROOT / ".memos-venv" / "bin" / "python"
CLIENT = PROJECT_ROOT / "tests" / "support" / "memos_client.py"

pytestmark = pytest.mark.skipif(not MEMOS_PYTHON.exists(),
                                reason="MemOS is installed apart: run `make memos-venv` first")


@pytest.fixture
def memos(neo4j: Neo4jResource) -> Iterator[Neo4jResource]:
    resource = memos_resource(neo4j)
    yield resource
    resource.close()


def memos_client(neo4j: Neo4jResource, command: str, users: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One call of MemOS's own code, in its own environment (run in ``workdir``: MemOS writes its
    log folder where it runs)."""
    request = {"uri": neo4j.uri, "user": neo4j.user, "password": neo4j.password, "database": neo4j.database,
               "dimension": neo4j.embedding_dimension, "users": users}
    done = subprocess.run([str(MEMOS_PYTHON), str(CLIENT), command], input=json.dumps(request),
                          capture_output=True, text=True, timeout=600, cwd=workdir, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def memories(texts: list[str]) -> list[dict[str, Any]]:
    """Pre-embedded with the embedder memtend is configured with (so MemOS's embedding is shared)."""
    vectors = EMBEDDER.embed(texts)
    return [{"memory": text, "key": text[:30], "tags": ["chat"], "embedding": vector.astype(float).tolist(),
             "at": (T0 + timedelta(minutes=i)).isoformat()} for i, (text, vector) in enumerate(zip(texts, vectors))]


def test_memos_reads_back_what_memtend_tended(memos, instance, tenant, tmp_path):
    other = tenant + "_b"
    mine = [CATS[0], CATS[1], CATS[0], *HOME, *OTHERS, *TOPICAL]  # a repeat, an exact repeat, a contradiction
    written = memos_client(memos, "write", {tenant: memories(mine), other: memories([CATS[0], OTHERS[0]])},
                           tmp_path)
    assert written["problems"] == []
    ids, theirs = written["ids"][tenant], written["ids"][other]
    assert len(ids) == len(mine) and len(theirs) == 2

    dedup = run_dedup(memos, tenant, instance)
    reorg = run_reorg(memos, tenant, instance)

    assert dedup.success and reorg.success and checks_pass(dedup) and checks_pass(reorg)
    graph, rels = memos_nodes(memos, tenant), memos_edges(memos, tenant)
    cats = ids[:3]
    [fused] = {target for source, kind, target in rels if source in cats and kind == "MERGED_TO"}
    older, newer = ids[3], ids[4]
    topics = sorted(i for i, n in graph.items() if n.get("type") == "topic")
    assert topics and graph[older]["status"] == "archived"

    query = EMBEDDER.embed([CATS[1]])[0].astype(float).tolist()
    seen = memos_client(memos, "read", {
        tenant: {"ids": sorted(graph), "query": query, "top_k": 5},
        other: {"ids": [*theirs, *ids, fused], "query": query, "top_k": 5}}, tmp_path)

    assert seen["problems"] == []
    mine_seen, theirs_seen = seen[tenant], seen[other]
    assert mine_seen["nodes"][fused]["status"] == "activated" and mine_seen["nodes"][fused]["memory"] in CATS
    assert all(mine_seen["nodes"][i]["status"] == "archived" for i in [*cats, older])  # kept, not deleted
    listed = {n["id"] for n in mine_seen["listed"]}
    assert fused in listed and newer in listed and set(topics) <= listed
    assert not listed & {*cats, older}
    assert mine_seen["search"][0] == fused and not set(mine_seen["search"]) & {*cats, older}
    # MemOS names an INCOMING edge from the asked node ("from": the member) to the other ("to": its topic)
    shown_parents = [(e["to"], e["from"]) for edges in mine_seen["parents"].values() for e in edges]
    assert shown_parents and all(parent in topics and graph[member]["status"] == "activated"
                                 for parent, member in shown_parents)
    assert set(shown_parents) == {(p, c) for p, kind, c in rels if kind == "PARENT"}
    assert all(theirs_seen["nodes"][i] is None for i in [*ids, fused])  # nothing of the other user
    assert {n["id"] for n in theirs_seen["listed"]} == set(theirs)
    assert set(theirs_seen["search"]) <= set(theirs)
    assert all(theirs_seen["nodes"][i]["status"] == "activated" for i in theirs)
