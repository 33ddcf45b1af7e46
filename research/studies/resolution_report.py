"""Resolutions a reader would sign (issue 44 item 7): run the whole pipeline as the product does
and list every supersede and every merge of three or more memories, with their texts, for review.

One command (from the repository root, the shared Neo4j up):

    PYTHONPATH=$PWD .venv/bin/python -m research.studies.resolution_report

What it does:

1. Lays out a workload in a temporary inbox, one tenant per user, all named ``rr<8 hex>_<user>``
   so they never meet another tenant: the bundled sample (``data/sample/inbox``: alice,
   wang_lei, sam, their files as shipped) and the memory items of the LoCoMo *tuning*
   conversations 26, 30 and 41 (``research/data/eval/locomo/topics_tune.jsonl``, one tenant per
   speaker, written as three inbox files by the set's batches, each item stated one hour after the
   one before it in conversation order). No other LoCoMo conversation is read.
2. Runs ``memtend tend`` on those tenants (ingest, dedup, reorganization, schema check: the
   product's run path and default configuration, its own Dagster instance in the temporary
   folder) against the Neo4j the environment names (``NEO4J_URI``, else the local server).
3. Reads every applied resolution (``DedupResolution``) of those tenants and writes
   ``research/resolutions_report.md``: every supersede (older text → newer text) and every merge
   of three or more memories (the sources and the kept text), each with the verdict a reviewer
   gave it in ``research/studies/resolution_report_reviews.json`` (keyed by the texts; "right" /
   "wrong" and a note) or "unreviewed", and the counts judged wrong at the top.
4. Drops the tenants through the product's path (``memtend drop --yes``, backups into the
   temporary folder), whatever happened.

The resolutions found are also kept in ``research/resolutions_report.json``; ``--render`` writes
the report again from it with the reviews as they are now, without running anything. Re-running
after other changes lists what the pipeline decides then; a resolution nobody has reviewed yet
shows as "unreviewed" (add its verdict to the reviews file and ``--render``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mem_resources.local_servers import neo4j as local_neo4j
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "inbox"
SAMPLE_USERS = ("alice", "wang_lei", "sam")
LOCOMO_TUNE = ROOT / "research" / "data" / "eval" / "locomo" / "topics_tune.jsonl"
LOCOMO_ALLOWED = ("locomo-26-", "locomo-30-", "locomo-41-")
REPORT = ROOT / "research" / "resolutions_report.md"
REVIEWS = Path(__file__).with_name("resolution_report_reviews.json")
RAW = ROOT / "research" / "resolutions_report.json"
MEMTEND = Path(sys.executable).with_name("memtend")
"""The product's command from the environment running this script."""


def review_key(kind: str, texts: list[str], result: str) -> str:
    """A resolution's identity across runs: its kind, its source texts (sorted) and the kept text."""
    payload = json.dumps([kind, sorted(texts), result], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def lay_out(inbox: Path, prefix: str) -> list[str]:
    """Write the workload's inbox; the tenants' names."""
    tenants = []
    for user in SAMPLE_USERS:
        tenant = f"{prefix}_{user}"
        shutil.copytree(SAMPLE / user, inbox / tenant, ignore=shutil.ignore_patterns("*.md"))
        tenants.append(tenant)
    by_tenant: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in LOCOMO_TUNE.read_text("utf-8").splitlines():
        row = json.loads(line)
        if not row["tenant"].startswith(LOCOMO_ALLOWED):
            raise ValueError(f"{row['tenant']}: only LoCoMo conversations 26, 30 and 41 are tuning data")
        by_tenant[row["tenant"]].append(row)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    for source, rows in sorted(by_tenant.items()):
        tenant = f"{prefix}_{source.removeprefix('locomo-').replace('-', '_')}"
        folder = inbox / tenant
        folder.mkdir(parents=True)
        for n, row in enumerate(rows):
            at = (start + timedelta(hours=n)).isoformat().replace("+00:00", "Z")
            with (folder / f"batch{row['batch']}.jsonl").open("a", encoding="utf-8") as out:
                out.write(json.dumps({"memory": row["text"], "created_at": at}, ensure_ascii=False) + "\n")
        tenants.append(tenant)
    return tenants


def neo4j_uri() -> str:
    settings = load_settings()
    return settings.neo4j_uri or local_neo4j.up(local_neo4j.LocalNeo4jSettings.from_settings(settings))


def memtend(args: list[str], env: dict[str, str], check: bool = True) -> int:
    print("$ memtend", " ".join(args), flush=True)
    return subprocess.run([str(MEMTEND), *args], env=env, check=check, cwd=ROOT).returncode


def resolutions(uri: str, tenants: list[str]) -> list[dict[str, Any]]:
    """Every applied, not undone resolution of ``tenants`` (research reads the product's records)."""
    resource = Neo4jResource.from_settings(load_settings().model_copy(update={"neo4j_uri": uri}))
    try:
        with resource.session() as session:
            return [record.data() for record in session.run(
                "UNWIND $tenants AS tenant MATCH (r:DedupResolution {user_name: tenant}) "
                "WHERE r.undone_at IS NULL "
                "RETURN tenant, r.kind AS kind, r.update_type AS update_type, r.sources AS sources, "
                "r.source_texts AS source_texts, r.result AS result, r.text AS text, r.reason AS reason "
                "ORDER BY tenant, r.applied_at, r.id", tenants=tenants)]
    finally:
        resource.close()


def entries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The resolutions to review: every supersede, every merge of three or more."""
    out = []
    for row in rows:
        texts = list(row["source_texts"] or [])
        supersede = row["kind"] == "supersede"
        if not supersede and len(texts) < 3:
            continue
        kind = "supersede" if supersede else f"merge of {len(texts)}"
        out.append({**row, "label": kind, "texts": texts,
                    "key": review_key("supersede" if supersede else "merge", texts, row["text"] or "")})
    return out


def write_report(found: list[dict[str, Any]], tenants: list[str], prefix: str, status: int = 0) -> dict[str, int]:
    reviews = json.loads(REVIEWS.read_text("utf-8")) if REVIEWS.is_file() else {}
    counts: dict[str, int] = defaultdict(int)
    for entry in found:
        verdict = reviews.get(entry["key"], {}).get("verdict", "unreviewed")
        entry["verdict"] = verdict
        counts[f"{entry['label'].split(' ')[0]}:{verdict}"] += 1
    supersedes = [e for e in found if e["label"] == "supersede"]
    merges = [e for e in found if e["label"] != "supersede"]

    def count(kind: str, verdict: str) -> int:
        return counts.get(f"{kind}:{verdict}", 0)

    lines = [
        "# Resolutions of a whole-pipeline run, reviewed (issue 44 item 7)",
        "",
        *([(f"**`memtend tend` exited with {status}** (a step failed; the resolutions below are those dedup "
           "applied)."), ""] if status else []),
        (f"Written by `python -m research.studies.resolution_report` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC "
        f"(tenants `{prefix}_*`, dropped after the run). Workload: the bundled sample (alice, wang_lei, sam) "
        "and the memory items of the LoCoMo tuning conversations 26, 30, 41 (one tenant per speaker)."),
        "",
        (f"**Judged wrong: {count('supersede', 'wrong')} of {len(supersedes)} supersedes, "
        f"{count('merge', 'wrong')} of {len(merges)} merges of three or more.** "
        f"Right: {count('supersede', 'right')} supersedes, {count('merge', 'right')} merges. "
        f"Unreviewed: {count('supersede', 'unreviewed')} supersedes, {count('merge', 'unreviewed')} merges "
        "(verdicts live in `research/studies/resolution_report_reviews.json`, keyed by the texts)."),
        "",
        ("A supersede is right when the newer memory states another value of what the older one states "
        "(so the older is no longer true); a merge is right when every source says what the kept text says, "
        "with the same people in the same roles."),
        "",
    ]
    for title, group in (("Supersedes (older → newer)", supersedes), ("Merges of three or more", merges)):
        lines += [f"## {title}", ""]
        if not group:
            lines += ["None.", ""]
        for n, entry in enumerate(group, start=1):
            note = reviews.get(entry["key"], {}).get("note", "")
            lines.append(f"{n}. **{entry['verdict']}** — `{entry['tenant'].removeprefix(prefix + '_')}`, "
                         f"{entry['label']} (review key `{entry['key']}`){': ' + note if note else ''}")
            if entry["label"] == "supersede":
                newer = entry["text"] or ""
                older = [t for t in entry["texts"] if t != newer] or entry["texts"]
                lines.append(f"   - older: {' / '.join(older)}")
                lines.append(f"   - newer (kept): {newer}")
            else:
                for text in entry["texts"]:
                    lines.append(f"   - {text}")
                lines.append(f"   - kept: {entry['text']}")
            lines.append(f"   - reason: {entry['reason']}")
        lines.append("")
    REPORT.write_text("\n".join(lines), "utf-8")
    return dict(counts)


def main() -> None:
    if sys.argv[1:] == ["--render"]:  # the last run's resolutions again, with the reviews as they are now
        raw = json.loads(RAW.read_text("utf-8"))
        counts = write_report(raw["found"], raw["tenants"], raw["prefix"], raw.get("status", 0))
        print(f"{REPORT.relative_to(ROOT)}: {len(raw['found'])} resolutions listed; {json.dumps(counts)}")
        return
    prefix = f"rr{uuid.uuid4().hex[:8]}"
    uri = neo4j_uri()
    with tempfile.TemporaryDirectory(prefix="resolution_report_") as tmp:
        work = Path(tmp)
        (work / "dagster_home").mkdir()
        shutil.copy(ROOT / "dagster_home" / "dagster.yaml", work / "dagster_home" / "dagster.yaml")
        tenants = lay_out(work / "inbox", prefix)
        env = {**os.environ, "NEO4J_URI": uri, "MEMTEND_INBOX": str(work / "inbox"),
               "MEMTEND_QUARANTINE": str(work / "quarantine"), "MEMTEND_BACKUP_DIR": str(work / "backups"),
               "DAGSTER_HOME": str(work / "dagster_home"), "MEMTEND_AUTOMATION": "off",
               "PYTHONPATH": str(ROOT)}
        try:
            status = memtend(["tend", *tenants], env, check=False)  # a failed step elsewhere still leaves
            found = entries(resolutions(uri, tenants))                # the resolutions dedup applied
        finally:
            for tenant in tenants:
                try:
                    memtend(["drop", tenant, "--yes", "--backup-dir", str(work / "backups")], env)
                except subprocess.CalledProcessError as exc:
                    print(f"could not drop {tenant}: {exc}", file=sys.stderr)
    RAW.write_text(json.dumps({"prefix": prefix, "tenants": tenants, "status": status, "found": found},
                              ensure_ascii=False, indent=1), "utf-8")
    counts = write_report(found, tenants, prefix, status)
    print(f"{REPORT.relative_to(ROOT)}: {len(found)} resolutions listed; {json.dumps(counts)}")


if __name__ == "__main__":
    main()
