"""Study: the whole LLM bill of real `memtend tend` runs, per new memory (a measurement; it chooses nothing).

Each stage's LLM calls per new memory had been measured apart, on different files (the judge on
pair files, topic placement through ``memtend eval-topics``). This runs the product's real path —
the ``memtend tend`` command, as a subprocess, with ``MEMTEND_LLM=openai`` pointed over HTTP at the
research oracle (research/oracle/server.py, perfect: ``wrong=0``) and otherwise the shipped
defaults (budgets, bands, judge, topic spaces; nothing in the environment overridden but where the
graph's files go) — on fresh tenants made from a labeled topic file, batch by batch (the file's
``batch`` field: 1 ingested and tended, then 2, then 3), then once more with nothing new (the
rerun, which must call no LLM).

Sets: ``fresh5`` (research/data/eval/fresh5/topics.jsonl, one tenant, the oracle answering topics
from its labels; no pair file, so the judge oracle answers every pair independent) and ``locomo``
(research/data/eval/locomo/topics_heldout.jsonl, whose ``tenant`` field makes four tenants, one per
speaker as the file intends; the oracle also answers judge pairs from
research/data/judge/locomo/heldout.jsonl). A batch of ``locomo`` is one ``memtend tend`` of its
four tenants; its figures are the four runs summed. ``fresh6`` (research/data/eval/fresh6/, six
speakers, sessions in thirds as batches; judge pairs from research/data/judge/fresh6/heldout.jsonl)
is read the same way (research/studies/fresh6_rule.md), and ``fresh7`` to ``fresh9`` too (fresh7_rule.md, fresh8_rule.md, llm_route_rule.md round 5).

The figures are the product's own report: each run's asset materialization metadata in the Dagster
instance the command records into (a fresh ``DAGSTER_HOME`` per set): ``memory_items.new``,
``relation_judgments.llm_calls`` / ``prompt_tokens`` / ``completion_tokens`` (judge),
``merged_nodes.resolver_calls`` / ``resolver_tokens`` (fusion: a fourth stage that calls the LLM),
``memory_clusters.llm_placement_*`` (placement), ``summary_parents.llm_*`` (topic names and
summaries). The command's printed summary shows only the judge's calls, so it is not used. The
oracle's own tally of the requests it answered, by kind, is printed beside them as a check.

    nice -n 10 python -m research.studies.llm_bill_study [--sets fresh5 locomo] [--keep]
        [--max-minutes 20] [--json results.jsonl] [--offline] [--sample N]

``--offline`` is the control (``MEMTEND_LLM=offline``: the oracle must answer nothing); ``--sample N``
a smoke test on the first N memories of each tenant and batch. Each run's failed error-severity
checks (those that make the command print FAILED) are printed with their first offenders.
Results of 2026-12-05: research/studies/llm_bill_results.md.

Tenants are named ``bill-<set>-<UTC time>[-<file tenant>]`` and dropped at the end through
``memtend drop --yes`` (backed up first into the set's temporary folder, removed with it);
``--keep`` leaves them in the graph. Needs the local Neo4j (bolt://127.0.0.1:7687) answering.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from mem_resources.local_servers.neo4j import bolt_answers
from research.oracle.server import OracleServer, oracle_server

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "research" / "data"
SETS: dict[str, dict[str, Any]] = {
    "fresh5": {"topics": DATA / "eval" / "fresh5" / "topics.jsonl", "pairs": []},
    "locomo": {"topics": DATA / "eval" / "locomo" / "topics_heldout.jsonl",
               "pairs": [DATA / "judge" / "locomo" / "heldout.jsonl"]},
    **{name: {"topics": DATA / "eval" / name / "topics.jsonl", "pairs": [DATA / "judge" / name / "heldout.jsonl"]}
       for name in ("fresh6", "fresh7", "fresh8", "fresh9", "fresh10", "fresh11")},
}
LLM_ENV = {"MEMTEND_LLM": "openai", "OPENAI_API_KEY": "oracle", "MEMTEND_LLM_MODEL": "oracle"}
NEO4J = "bolt://127.0.0.1:7687"
#: The command's line per tenant: ``TENANT: ok in 12.3 s (run RUN_ID)``.
OUTCOME = re.compile(r"^(?P<tenant>\S+): (?P<status>ok|FAILED) in (?P<seconds>[\d.]+) s \(run (?P<run>[\w-]+)\)$")
#: (figure, asset, metadata key): what each run's materializations say it spent.
FIGURES = (
    ("new", "memory_items", "new"),
    ("judge", "relation_judgments", "llm_calls"),
    ("judge_prompt", "relation_judgments", "prompt_tokens"),
    ("judge_completion", "relation_judgments", "completion_tokens"),
    ("judge_routed_pairs", "relation_judgments", "pairs_routed_to_llm"),
    ("judge_over_budget_nodes", "relation_judgments", "over_budget_nodes"),
    ("fuse", "merged_nodes", "resolver_calls"),
    ("fuse_tokens", "merged_nodes", "resolver_tokens"),
    ("placement", "memory_clusters", "llm_placement_calls"),
    ("placement_prompt", "memory_clusters", "llm_placement_prompt_tokens"),
    ("placement_completion", "memory_clusters", "llm_placement_completion_tokens"),
    ("placement_routed", "memory_clusters", "llm_placement_routed"),
    ("placement_over_budget", "memory_clusters", "llm_placement_over_budget"),
    ("summaries", "summary_parents", "llm_calls"),
    ("summaries_prompt", "summary_parents", "llm_prompt_tokens"),
    ("summaries_completion", "summary_parents", "llm_completion_tokens"),
    ("summaries_over_budget", "summary_parents", "summaries_over_budget"),
    ("topics_created", "summary_parents", "topics_created"),
    ("topics_grown", "summary_parents", "topics_grown"),
)
STAGES = ("judge", "fuse", "placement", "summaries")
#: The oracle's request kinds, by stage.
ORACLE_KIND = {"judge": "judge", "fuse": "fuse", "placement": "place", "summaries": "summarize"}


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


@dataclass
class Step:
    """One ``memtend tend`` of a set's tenants (one batch, or the rerun): the product's figures
    summed over the tenants' runs, the oracle's tally, and the wall times."""

    set_name: str
    batch: str
    figures: Counter[str] = field(default_factory=Counter)
    oracle_calls: Counter[str] = field(default_factory=Counter)
    oracle_tokens: int = 0
    run_seconds: float = 0.0
    command_seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed_checks: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(self.figures[stage] for stage in STAGES)

    @property
    def tokens(self) -> int:
        f = self.figures
        return (f["judge_prompt"] + f["judge_completion"] + f["fuse_tokens"] + f["placement_prompt"]
                + f["placement_completion"] + f["summaries_prompt"] + f["summaries_completion"])

    def per_new(self, calls: int) -> str:
        return f"{calls / self.figures['new']:.3f}" if self.figures["new"] else "-"

    def record(self) -> dict[str, Any]:
        return {"set": self.set_name, "batch": self.batch, **self.figures, "calls": self.calls,
                "tokens": self.tokens, "oracle_calls": dict(self.oracle_calls), "oracle_tokens": self.oracle_tokens,
                "run_seconds": round(self.run_seconds, 1), "command_seconds": round(self.command_seconds, 1),
                "failed": self.failed, "missing_metadata": self.missing, "failed_checks": self.failed_checks}


def run_metadata(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict[str, Any]]:
    """Each asset's materialization metadata in a run, as plain values."""
    out: dict[str, dict[str, Any]] = {}
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is not None:
            out[materialization.asset_key.to_user_string()] = {k: v.value for k, v in materialization.metadata.items()}
    return out


def failed_checks(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The run's failed error-severity checks (the ones that make `memtend tend` say FAILED), with
    their description and first offenders."""
    out = []
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        if not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR:
            examples = evaluation.metadata.get("examples")
            out.append(f"{evaluation.check_name}: {evaluation.description}"
                       + (f" e.g. {json.dumps(examples.value, ensure_ascii=False)[:600]}" if examples else ""))
    return out


def tend(env: dict[str, str], tenants: Sequence[str]) -> tuple[float, str, int]:
    """``memtend tend TENANTS --create``: its wall seconds, stdout and exit code."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mem_assets.cli", "tend", *tenants, "--create"], check=False,
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr, flush=True)
    return time.monotonic() - started, done.stdout, done.returncode


def step(set_name: str, batch: str, env: dict[str, str], home: Path, tenants: Sequence[str],
         oracle: OracleServer) -> Step:
    calls_before, tokens_before = Counter(oracle.oracle.calls), oracle.oracle.prompt_tokens + oracle.oracle.completion_tokens
    out = Step(set_name, batch)
    out.command_seconds, stdout, code = tend(env, tenants)
    out.oracle_calls = Counter(oracle.oracle.calls) - calls_before
    out.oracle_tokens = oracle.oracle.prompt_tokens + oracle.oracle.completion_tokens - tokens_before
    outcomes = [m.groupdict() for m in map(OUTCOME.match, stdout.splitlines()) if m]
    out.failed = [o["tenant"] for o in outcomes if o["status"] != "ok"] + [t for t in tenants if t not in
                                                                         {o["tenant"] for o in outcomes}]
    if code and not out.failed:
        out.failed = [f"(the command exited {code})"]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for outcome in outcomes:
            out.run_seconds += float(outcome["seconds"])
            metadata = run_metadata(instance, outcome["run"])
            out.failed_checks += [f"{outcome['tenant']}: {check}" for check in failed_checks(instance, outcome["run"])]
            for name, asset, key in FIGURES:
                value = metadata.get(asset, {}).get(key)
                if isinstance(value, int | float):
                    out.figures[name] += int(value)
                elif asset in metadata and name in STAGES:
                    out.missing.append(f"{outcome['tenant']}:{asset}.{key}")
    return out


def write_batch(inbox: Path, tenant: str, batch: int, texts: Sequence[str]) -> None:
    folder = inbox / tenant
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"batch{batch}.jsonl").write_text(
        "".join(json.dumps({"memory": text}, ensure_ascii=False) + "\n" for text in texts), "utf-8")


def run_set(set_name: str, stamp: str, keep: bool, max_minutes: float, sample: int | None = None,
            offline: bool = False) -> list[Step]:
    spec = SETS[set_name]
    rows = read_rows(spec["topics"])
    by_tenant: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        suffix = f"-{row['tenant']}" if "tenant" in row else ""
        texts = by_tenant[f"bill-{set_name}{'-offline' if offline else ''}-{stamp}{suffix}"][int(row.get("batch", 1))]
        if sample is None or len(texts) < sample:
            texts.append(row["text"])
    rows = [text for per in by_tenant.values() for texts in per.values() for text in texts]
    tenants = sorted(by_tenant)
    batches = sorted({b for per in by_tenant.values() for b in per})
    work = Path(tempfile.mkdtemp(prefix=f"memtend-bill-{set_name}-"))
    home = work / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith(("MEMTEND_", "OPENAI_", "NEO4J_", "DAGSTER_"))}
    env.update(PYTHONPATH=str(ROOT), DAGSTER_HOME=str(home), MEMTEND_INBOX=str(work / "inbox"),
               MEMTEND_QUARANTINE=str(work / "quarantine"), MEMTEND_IO_BASE=str(work / "io"),
               MEMTEND_BACKUP_DIR=str(work / "backups"), **({"MEMTEND_LLM": "offline"} if offline else LLM_ENV))
    os.environ["DAGSTER_HOME"] = str(home)  # the instance's SQLite storage reads it
    print(f"{set_name}: {len(rows)} memories, {len(tenants)} tenant(s) {', '.join(tenants)}, batches "
          + ", ".join(f"{b}: {sum(len(per.get(b, [])) for per in by_tenant.values())}" for b in batches), flush=True)
    steps: list[Step] = []
    started = time.monotonic()
    try:
        with oracle_server(pairs=spec["pairs"], topics=[spec["topics"]], wrong=0.0) as oracle:
            if not offline:
                env["OPENAI_BASE_URL"] = oracle.base_url
            plan = [str(b) for b in batches] + [f"{batches[-1]} again (rerun)"]
            for number, batch in enumerate(plan):
                if (time.monotonic() - started) / 60 > max_minutes:
                    print(f"{set_name}: over {max_minutes} min, batch {batch} and later not run", flush=True)
                    break
                if number < len(batches):
                    for tenant in tenants:
                        write_batch(work / "inbox", tenant, batches[number], by_tenant[tenant].get(batches[number], []))
                steps.append(step(set_name, batch, env, home, tenants, oracle))
                show(steps[-1])
    finally:
        if not keep:
            for tenant in tenants:
                dropped = subprocess.run([sys.executable, "-m", "mem_assets.cli", "drop", tenant, "--yes"],
                                         check=False, cwd=ROOT, env=env, capture_output=True, text=True)
                print(f"  drop {tenant}: " + (dropped.stdout.strip() or dropped.stderr.strip()[-500:]), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return steps


def show(s: Step) -> None:
    f = s.figures
    print(f"  {s.set_name} batch {s.batch}: {f['new']} new memories; calls judge {f['judge']} "
          f"(pairs routed {f['judge_routed_pairs']}), fuse {f['fuse']}, placement {f['placement']} "
          f"(memories routed {f['placement_routed']}), summaries {f['summaries']} (topics created "
          f"{f['topics_created']}, grown {f['topics_grown']}); {s.calls} calls, {s.per_new(s.calls)} per new memory; "
          f"tokens {s.tokens} (judge {f['judge_prompt']}+{f['judge_completion']}, fuse {f['fuse_tokens']}, placement "
          f"{f['placement_prompt']}+{f['placement_completion']}, summaries {f['summaries_prompt']}+"
          f"{f['summaries_completion']}); over budget: judge nodes {f['judge_over_budget_nodes']}, placement "
          f"{f['placement_over_budget']}, summaries {f['summaries_over_budget']}; oracle answered "
          f"{dict(s.oracle_calls)} ({s.oracle_tokens} tokens); runs {s.run_seconds:.1f} s, command "
          f"{s.command_seconds:.1f} s" + (f"; FAILED {s.failed}" if s.failed else "")
          + (f"; missing metadata {s.missing}" if s.missing else ""), flush=True)
    for check in s.failed_checks:
        print(f"    failed check {check}", flush=True)


def total(steps: Sequence[Step], set_name: str, batch: str) -> Step:
    out = Step(set_name, batch)
    for s in steps:
        out.figures.update(s.figures)
        out.oracle_calls.update(s.oracle_calls)
        out.oracle_tokens += s.oracle_tokens
        out.run_seconds += s.run_seconds
        out.command_seconds += s.command_seconds
        out.failed += s.failed
    return out


def table(steps: Sequence[Step]) -> str:
    head = ("| set | batch | new memories | calls judge / fuse / placement / summaries | per new memory: judge / "
            "fuse / placement / summaries | per new memory, summed | tokens (per new memory) | oracle answered | "
            "wall s (runs / command) |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for s in steps:
        f = s.figures
        oracle = " / ".join(str(s.oracle_calls[ORACLE_KIND[stage]]) for stage in STAGES)
        tokens = f"{s.tokens:,} ({s.tokens / f['new']:.0f})" if f["new"] else f"{s.tokens:,}"
        lines.append(f"| {s.set_name} | {s.batch} | {f['new']} | {' / '.join(str(f[x]) for x in STAGES)} | "
                     f"{' / '.join(s.per_new(f[x]) for x in STAGES)} | {s.per_new(s.calls)} | {tokens} | "
                     f"{oracle} | {s.run_seconds:.0f} / {s.command_seconds:.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=["fresh5", "locomo"])
    parser.add_argument("--keep", action="store_true", help="leave the tenants in the graph")
    parser.add_argument("--max-minutes", type=float, default=20.0,
                        help="no new batch starts once a set has run this long")
    parser.add_argument("--json", type=Path, help="also write one JSON line per step here")
    parser.add_argument("--offline", action="store_true",
                        help="a control: MEMTEND_LLM=offline (the oracle still listens; it must answer nothing)")
    parser.add_argument("--sample", type=int, help="a smoke test: the first N memories of each tenant and batch")
    args = parser.parse_args(argv)
    if not bolt_answers(NEO4J):
        sys.exit(f"Neo4j at {NEO4J} does not answer: start it with "
                 "`PYTHONPATH=$PWD .venv/bin/python -m mem_resources.local_servers.neo4j up`")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    rows: list[Step] = []
    for set_name in args.sets:
        steps = run_set(set_name, stamp, args.keep, args.max_minutes, args.sample, args.offline)
        batches = [s for s in steps if "rerun" not in s.batch]
        rows += batches + ([total(batches, set_name, "all batches")] if batches else [])
        rows += [s for s in steps if "rerun" in s.batch]
    print("\n" + table(rows), flush=True)
    if args.json:
        args.json.write_text("".join(json.dumps(s.record()) + "\n" for s in rows), "utf-8")


if __name__ == "__main__":
    main()
