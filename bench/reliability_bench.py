"""Reliability under concurrent writers and kill -9 (prints figures; not a test).

Two tenants with a planted inbox (tests/support/planted_corpus.py: repeats and conflicts), through
the real `memtend` CLI against the real Neo4j:

1. baseline: one `memtend tend A B` on empty tenants; the graph of each tenant is recorded
   (node ids, labels, status, text, evolve_to; every edge; the judgment cache left out); then a
   control: the same again on empty tenants, to show how far two clean runs differ (exactly
   tied candidate neighbours can resolve differently, and topic trees follow);
2. concurrent: the tenants wiped, then `memtend tend A B` and `memtend tend B A` at once, and a
   moment later `memtend backup A` and `memtend backup B`, all four as separate processes;
   counted: exit codes, memories lost (an inbox text with no node), nodes with more than one
   lineage edge, cross-tenant edges, difference from the baseline, and whether each backup
   restores (drop, restore it, its checksum back, a new tend converges to the baseline);
3. kill -9: a `memtend tend A` killed in the middle of its run, then a rerun: equal to the baseline?
   A `memtend backup A` killed in the middle: only complete backups listed, the next one restores?

Targets (DESIGN.md, docs/reliability.md): no memory lost, no node with two lineage edges, no
cross-tenant edge, every backup restores exactly, and concurrency or a kill adds no difference of
its own: differences from the baseline within 10 % of the control's (two clean runs). The
same-run baselines are the clean baseline run's own counts and the control's differences.

    python -m bench.reliability_bench [--items 5000] [--kill-after 6]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import Result, bench_tenant, drop_bench_tenant, report
from mem_assets.ingest.text_input import clean_text
from mem_assets.lifecycle import backup_files as archive
from mem_assets.lifecycle.operations import open_verified
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings
from tests.support.planted_corpus import planted_items, write_planted_inbox

ROOT = Path(__file__).resolve().parents[1]
MEMTEND = str(Path(sys.executable).parent / "memtend")
TENANTS = (bench_tenant("bench_rel_a"), bench_tenant("bench_rel_b"))
SEEDS = dict(zip(TENANTS, (13, 14), strict=True))


def graph(neo4j: Neo4jResource, tenant: str) -> tuple[list, list]:
    with neo4j.session() as session:
        nodes = sorted(tuple(map(repr, r.values())) for r in session.run(
            "MATCH (n {user_name: $t}) WHERE NOT n:DedupJudgment "
            "RETURN n.id, labels(n), n.status, coalesce(n.memory, n.name), n.evolve_to", t=tenant))
        edges = sorted(tuple(r.values()) for r in session.run(
            "MATCH (a {user_name: $t})-[r]->(b) RETURN a.id, type(r), b.id", t=tenant))
    return nodes, edges


def differences(now: tuple[list, list], baseline: tuple[list, list]) -> int:
    return len(set(now[0]) ^ set(baseline[0])) + len(set(now[1]) ^ set(baseline[1]))


def memory_differences(now: tuple[list, list], baseline: tuple[list, list]) -> int:
    """Differences among facts (not topic parents) and lineage edges only."""
    def facts(g: tuple[list, list]) -> set:
        return {n for n in g[0] if "'topic:" not in n[0] and "MemoryItem" in n[1]} | \
            {e for e in g[1] if e[1] in ("MERGED_TO", "SUPERSEDED_BY")}
    return len(facts(now) ^ facts(baseline))


def difference_counts(neo4j: Neo4jResource, baseline: dict[str, tuple[list, list]],
                      tenants=TENANTS) -> tuple[int, int]:
    """Differences from the baseline in facts and lineage, and in the whole graph."""
    now = {t: graph(neo4j, t) for t in tenants}
    return (sum(memory_differences(now[t], baseline[t]) for t in tenants),
            sum(differences(now[t], baseline[t]) for t in tenants))


def compare(neo4j: Neo4jResource, baseline: dict[str, tuple[list, list]], tenants=TENANTS) -> str:
    facts, whole = difference_counts(neo4j, baseline, tenants)
    return f"{facts} in facts and lineage, {whole} in the whole graph"


def within_control(differences: int, control: int) -> bool:
    return differences <= control * 1.1


def lost_memories(neo4j: Neo4jResource, tenant: str, items: int) -> int:
    expected = {" ".join(clean_text(item["memory"]).split()) for item in planted_items(items, SEEDS[tenant])}
    with neo4j.session() as session:
        present = {" ".join(r["m"].split()) for r in session.run(
            "MATCH (m:MemoryItem {user_name: $t}) RETURN m.memory AS m", t=tenant)}
    return len(expected - present)


def multi_lineage(neo4j: Neo4jResource, tenant: str) -> int:
    with neo4j.session() as session:
        return session.run(
            "MATCH (n:MemoryItem {user_name: $t})-[r:MERGED_TO|SUPERSEDED_BY]->() "
            "WITH n, count(r) AS edges WHERE edges > 1 RETURN count(n) AS n", t=tenant).single()["n"]


def cross_tenant_edges(neo4j: Neo4jResource) -> int:
    with neo4j.session() as session:
        return session.run(
            "MATCH (a)-[r]-(b) WHERE a.user_name IN $ts AND b.user_name IS NOT NULL "
            "AND b.user_name <> a.user_name RETURN count(r) AS n", ts=list(TENANTS)).single()["n"]


def wipe(neo4j: Neo4jResource) -> None:
    for tenant in TENANTS:
        drop_bench_tenant(neo4j, tenant)


def start(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([MEMTEND, *args], env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


def finish(process: subprocess.Popen, timeout: float = 1800) -> tuple[int, str]:
    output = process.communicate(timeout=timeout)[0]
    return process.returncode, output


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5000, help="inbox items, split over the two tenants")
    parser.add_argument("--kill-after", type=float, default=6.0, help="seconds into a run before kill -9")
    args = parser.parse_args()
    per_tenant = args.items // len(TENANTS)
    settings = load_settings()
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(settings), user=settings.neo4j_user,
                          password=settings.neo4j_password.get_secret_value(),
                          database=settings.neo4j_database)
    work = Path(tempfile.mkdtemp(prefix="memtend-reliability-"))
    (work / "home").mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", work / "home" / "dagster.yaml")
    for tenant in TENANTS:
        write_planted_inbox(work / "inbox" / tenant, per_tenant, SEEDS[tenant], files=4)
    env = {**os.environ, "DAGSTER_HOME": str(work / "home"), "NEO4J_URI": neo4j.uri,
           "MEMTEND_AUTOMATION": "off", "MEMTEND_INBOX": str(work / "inbox"),
           "MEMTEND_QUARANTINE": str(work / "q"), "MEMTEND_BACKUP_DIR": str(work / "backups")}
    rows: list[tuple[str, str]] = []
    try:
        wipe(neo4j)
        began = time.monotonic()
        code, output = finish(start(env, "tend", *TENANTS))
        assert code == 0, output[-3000:]
        rows.append(("baseline `memtend tend A B`", f"{time.monotonic() - began:.0f} s"))
        baseline = {tenant: graph(neo4j, tenant) for tenant in TENANTS}
        rows.append(("baseline graph", ", ".join(f"{t}: {len(baseline[t][0])} nodes, {len(baseline[t][1])} edges"
                                                 for t in TENANTS)))
        clean = {"lost": sum(lost_memories(neo4j, t, per_tenant) for t in TENANTS),
                 "lineage": sum(multi_lineage(neo4j, t) for t in TENANTS), "cross": cross_tenant_edges(neo4j)}
        wipe(neo4j)
        code, output = finish(start(env, "tend", *TENANTS))
        control_of = {t: difference_counts(neo4j, baseline, (t,))[0] for t in TENANTS}
        control = sum(control_of.values())
        rows.append(("control: the same tend again on empty tenants, differences", compare(neo4j, baseline)))

        wipe(neo4j)
        began = time.monotonic()
        tends = [start(env, "tend", *TENANTS), start(env, "tend", *reversed(TENANTS))]
        time.sleep(5)
        backups = [start(env, "backup", tenant) for tenant in TENANTS]
        results = [finish(process) for process in [*tends, *backups]]
        rows.append(("2 tends + 2 backups at once: wall time", f"{time.monotonic() - began:.0f} s"))
        rows.append(("exit codes (tend, tend, backup, backup)", ", ".join(str(c) for c, _ in results)))
        for (code, output), name in zip(results, ["tend A B", "tend B A", "backup A", "backup B"], strict=True):
            if code:
                print(f"--- {name} failed:\n{output[-3000:]}")
        lost = sum(lost_memories(neo4j, t, per_tenant) for t in TENANTS)
        lineage = sum(multi_lineage(neo4j, t) for t in TENANTS)
        cross = cross_tenant_edges(neo4j)
        concurrent = difference_counts(neo4j, baseline)[0]
        rows.append(("memories lost", str(lost)))
        rows.append(("nodes with more than one lineage edge", str(lineage)))
        rows.append(("cross-tenant edges", str(cross)))
        rows.append(("differences from the baseline", compare(neo4j, baseline)))
        clean_is = "the same count after the clean baseline run"
        summary = [
            Result("memories lost, 2 tends + 2 backups at once", lost, "memories", clean["lost"], clean_is,
                   target="0", met=lost == 0),
            Result("nodes with more than one lineage edge, same runs", lineage, "nodes", clean["lineage"], clean_is,
                   target="0", met=lineage == 0),
            Result("cross-tenant edges, same runs", cross, "edges", clean["cross"], clean_is, target="0",
                   met=cross == 0),
            Result("differences in facts and lineage from the baseline, same runs", concurrent, "differences",
                   control, "the control: a second clean run's", target="within 10 % of the control's",
                   met=within_control(concurrent, control))]

        restorable = []
        for tenant in TENANTS:
            backup = archive.list_backups(work / "backups", tenant)[-1]
            expected = open_verified(work / "backups", tenant, backup.name).manifest.checksum
            code, output = finish(start(env, "drop", tenant, "--yes", "--backup-dir", str(work / "dropped")))
            assert code == 0, output[-3000:]
            code, output = finish(start(env, "restore", tenant, "--backup-id", backup.name))
            assert code == 0, output[-3000:]
            code, output = finish(start(env, "backup", tenant, "--backup-dir", str(work / "after")))
            assert code == 0, output[-3000:]
            again = open_verified(work / "after", tenant, None).manifest.checksum
            restorable.append(again == expected)
        rows.append(("backups taken during the runs that restore exactly", f"{sum(restorable)}/{len(TENANTS)}"))
        summary.append(Result("backups taken during the runs that restore exactly", sum(restorable), "backups",
                              None, "no bare version", target=f"all {len(TENANTS)}",
                              met=sum(restorable) == len(TENANTS)))
        code, output = finish(start(env, "tend", *TENANTS))
        rows.append(("tend after the restores: differences from the baseline",
                     compare(neo4j, baseline) + f" (exit {code})"))

        wipe(neo4j)
        tenant = TENANTS[0]
        victim = start(env, "tend", tenant)
        time.sleep(args.kill_after)
        kill(victim)
        partial = differences(graph(neo4j, tenant), baseline[tenant])
        began = time.monotonic()
        code, output = finish(start(env, "tend", tenant))
        rerun = difference_counts(neo4j, baseline, (tenant,))[0]
        rows.append((f"tend killed after {args.kill_after:.0f} s ({partial} differences), rerun",
                     f"exit {code}, {compare(neo4j, baseline, (tenant,))}, {time.monotonic() - began:.0f} s"))
        summary.append(Result(f"differences in facts and lineage after a tend killed at {args.kill_after:.0f} s "
                              "and rerun", rerun, "differences", control_of[tenant],
                              "the control: a second clean run's, same tenant", target="within 10 % of the control's",
                              met=code == 0 and within_control(rerun, control_of[tenant])))

        victim = start(env, "backup", tenant, "--backup-dir", str(work / "killed"))
        time.sleep(1.0)
        kill(victim)
        listed = len(archive.list_backups(work / "killed", tenant))
        code, output = finish(start(env, "backup", tenant, "--backup-dir", str(work / "killed")))
        backup = archive.list_backups(work / "killed", tenant)[-1]
        open_verified(work / "killed", tenant, backup.name)
        rows.append(("backup killed after 1 s, then another",
                     f"{listed} listed after the kill; next exit {code}, verifies"))
    finally:
        wipe(neo4j)
        neo4j.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n## Reliability: {args.items} planted items over {len(TENANTS)} tenants\n")
    print("| probe | result |\n|---|---|")
    for probe, result in rows:
        print(f"| {probe} | {result} |")
    report("reliability_bench", summary)


if __name__ == "__main__":
    main()
