"""LLM judge cost per ingested item on the bundled multi-session sample.

Each sample tenant (tests/data/multisession) receives its sessions one file at a time, as a real
inbox would, and every session runs ingest + dedup with the configured embedder (default the
offline WordLlama) and the LLM judge pointed at the local fake OpenAI server, which answers as an
oracle from labels.jsonl. Prints, per tenant and in total: items ingested, judge calls (one per
new memory that has candidates), resolver calls (fusing a redundant group, or asking whether a
contradiction can be reconciled), calls per ingested item, and the calls a judge asking once per
candidate pair would have made.

Target (README, "Cost per item with an LLM"): at most one judge call per ingested item (one per
new memory with candidates, none for a pair already judged), against the same run's baseline: the
calls a judge asking once per candidate pair would have made. Resolver calls come on top (no
stated target).

    python -m bench.judge_cost_bench
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dagster as dg

from bench.measure import Result, bench_tenant, drop_bench_tenant, report
from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.dedup.assets import dedup_candidates, merged_nodes, relation_judgments
from mem_assets.dedup.pair_judge import OpenAIJudge
from mem_assets.ingest.assets import memory_items
from mem_assets.ingest.inbox import InboxResource
from mem_assets.resources import build_embedder
from mem_resources.llm import OpenAIChatResource
from mem_resources.local_servers.neo4j import ensure_neo4j_uri
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import load_settings
from tests.support.fake_openai import chat_answer, fake_openai_server, verdicts

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "multisession"


def oracle(labels: dict[frozenset[str], str]):
    """Answers every judge request from the labels; fuses a redundant group into its newest text."""
    def answer(body: dict) -> tuple[int, Any]:
        system, data = body["messages"][0]["content"], json.loads(body["messages"][1]["content"])
        if "reconcilable" in system:
            redundant = data["relation"] == "redundant"
            return 200, chat_answer(json.dumps({"reason": "oracle", "reconcilable": redundant,
                                                "merged": data["memories"][-1]["text"] if redundant else None}))
        return 200, chat_answer(verdicts(
            body, lambda new, c: labels.get(frozenset((new, c["text"])), "independent"), "oracle"))
    return answer


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(asset)]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def main() -> None:
    settings = load_settings()
    neo4j = Neo4jResource(uri=ensure_neo4j_uri(settings), embedding_dimension=settings.dimension)
    embedder = build_embedder(settings, in_dagster=False)
    labels: dict[str, dict[frozenset[str], str]] = {}
    for line in (SAMPLE / "labels.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        labels.setdefault(row["tenant"], {})[frozenset((row["a"], row["b"]))] = row["label"]
    print(f"embedder {type(embedder).__name__}, LLM judge: local fake server answering from labels")
    print(f"{'tenant':<8} {'sessions':>8} {'items':>6} {'pairs':>6} {'judge':>6} {'resolver':>8} "
          f"{'calls/item':>10} {'per-pair calls/item':>19} {'merges':>6} {'supersedes':>10}")
    totals = dict.fromkeys(("items", "pairs", "judge", "resolver"), 0)
    with fake_openai_server() as server, tempfile.TemporaryDirectory() as folder, \
            dg.instance_for_test() as instance:
        judge = OpenAIJudge(chat=OpenAIChatResource(base_url=server.base_url, max_retries=0))
        for sample in ("rosa", "wei"):
            tenant = bench_tenant(f"bench_judge_cost_{sample}")
            drop_bench_tenant(neo4j, tenant)
            server.chat = oracle(labels[sample])
            inbox = Path(folder) / "inbox"
            resources = {"neo4j": neo4j, "embedder": embedder, "judge": judge,
                         "context_profiles": ContextProfiles(),
                         "inbox": InboxResource(root=str(inbox), quarantine_dir=str(Path(folder) / "q"))}
            instance.add_dynamic_partitions("tenants", [tenant])
            row = dict.fromkeys(("items", "pairs", "judge", "resolver", "merges", "supersedes"), 0)
            sessions = sorted((SAMPLE / "inbox" / sample).glob("*.jsonl"))
            for session in sessions:
                (inbox / tenant).mkdir(parents=True, exist_ok=True)
                shutil.copy(session, inbox / tenant / session.name)
                result = dg.materialize([memory_items, dedup_candidates, relation_judgments, merged_nodes],
                                        partition_key=tenant, instance=instance, resources=resources)
                assert result.success
                row["items"] += metadata(result, "memory_items")["accepted"]
                row["pairs"] += metadata(result, "relation_judgments")["pairs"]
                row["judge"] += metadata(result, "relation_judgments")["judge_calls"]
                merged = metadata(result, "merged_nodes")
                row["resolver"] += merged["resolver_calls"]
                row["merges"] += merged["merges"]
                row["supersedes"] += merged["supersedes"]
            drop_bench_tenant(neo4j, tenant)
            for key in totals:
                totals[key] += row[key]
            print(f"{sample:<8} {len(sessions):>8} {row['items']:>6} {row['pairs']:>6} {row['judge']:>6} "
                  f"{row['resolver']:>8} {(row['judge'] + row['resolver']) / row['items']:>10.2f} "
                  f"{(row['pairs'] + row['resolver']) / row['items']:>19.2f} {row['merges']:>6} "
                  f"{row['supersedes']:>10}")
    print(f"{'total':<8} {'':>8} {totals['items']:>6} {totals['pairs']:>6} {totals['judge']:>6} "
          f"{totals['resolver']:>8} {(totals['judge'] + totals['resolver']) / totals['items']:>10.2f} "
          f"{(totals['pairs'] + totals['resolver']) / totals['items']:>19.2f}")
    neo4j.close()
    items = totals["items"]
    report("judge_cost_bench", [
        Result(f"judge calls per ingested item, {items} items", totals["judge"] / items, "calls/item",
               totals["pairs"] / items, "one call per candidate pair", target="<= 1 (one per new memory)",
               met=totals["judge"] <= items),
        Result(f"LLM calls (judge + resolver) per ingested item, {items} items",
               (totals["judge"] + totals["resolver"]) / items, "calls/item",
               (totals["pairs"] + totals["resolver"]) / items, "one judge call per candidate pair + the resolver's")])


if __name__ == "__main__":
    main()
