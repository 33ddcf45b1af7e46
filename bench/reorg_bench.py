"""Reorganization of one tenant's orphan memories with the offline summarizer: time and memory.

Setup (untimed, in a child process so its memory does not count): N orphan memory nodes with
hashing embeddings in a fresh tenant. Then, timed in this process, the same plain functions the
assets call:
- ``read``: orphan counts and all orphans with their embeddings (``reorg_candidates``);
- ``cluster``: the topic plan, recursive MiniBatchKMeans (``memory_clusters``);
- ``summarize+write``: extractive summaries, parent embeddings, parents and PARENT edges
  written topic by topic (``summary_parents``);
- ``baseline``: a bare ``MATCH … RETURN m.embedding`` of the same nodes, the floor for ``read``.
Peak RSS is the growth over this process's start, sampled every 10 ms.

    python bench/reorg_bench.py [--nodes 100000] [--keep]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import time

import numpy as np
from measure import PeakRss

from mem_assets.reorg.clustering import ClusteringParams, cluster_table
from mem_assets.reorg.hierarchy import Reorganizer, load_candidates
from mem_assets.reorg.summarizers import ExtractiveSummarizer
from mem_resources.embedder import HashingEmbedder
from mem_resources.local_neo4j import ensure_neo4j_uri
from mem_resources.settings import load_settings
from mem_resources.memory_model import (
    MemoryItem,
    MemoryMetadata,
    memory_id,
    payload_hash,
    utc_now,
)
from mem_resources.neo4j_resource import Neo4jResource

SUBJECTS = ["I", "My sister", "My manager", "Our team", "My neighbour", "我", "我的朋友", "我们公司", "我妈妈"]
ACTIVITIES = {
    "food": ["cooked {x} risotto", "baked {x} bread", "tried a {x} curry recipe", "用{y}做了红烧肉",
             "包了{y}饺子", "ordered {x} noodles"],
    "travel": ["booked a flight to {place}", "planned a trip to {place}", "visited the harbour in {place}",
               "去{地}旅行", "订了去{地}的机票", "stayed in a hotel near {place}"],
    "work": ["fixed a bug in the {x} code", "reviewed the {x} database migration", "wrote Python tests for {x}",
             "重构了{y}模块", "修复了{y}接口超时", "deployed the {x} service"],
    "sport": ["ran {n} kilometres", "did {n} squats at the gym", "swam {n} laps", "跑了{n}公里",
              "在健身房练了{n}分钟", "cycled {n} km"],
    "music": ["practised {x} jazz piano", "went to a {x} folk concert", "learned a {x} guitar solo",
              "练习了{y}古筝", "听了{y}爵士音乐会", "bought a {x} violin"],
    "home": ["repaired the {x} kitchen sink", "painted the {x} bedroom", "planted {x} tomatoes",
             "打扫了{y}阳台", "修好了{y}洗衣机", "ordered a {x} sofa"],
    "health": ["saw the dentist about a {x} tooth", "started taking {x} vitamins", "slept {n} hours",
               "去医院检查了{y}", "开始吃{y}维生素", "booked a {x} eye test"],
    "family": ["called grandma about {x} plans", "helped my son with {x} homework", "celebrated a {x} birthday",
               "陪孩子做{y}作业", "给奶奶打电话聊{y}", "参加了表弟的{y}婚礼"],
}
FILLERS = {
    "x": ["new", "old", "cheap", "spicy", "quick", "big", "small", "weekend", "late", "early", "green", "red"],
    "y": ["新的", "旧的", "周末的", "便宜的", "很大的", "小小的", "早上的", "晚上的", "红色的", "绿色的"],
    "place": ["Kyoto", "Lisbon", "Vienna", "Cairo", "Peru", "Bali", "Oslo", "Seoul", "Quebec", "Porto"],
    "地": ["云南", "成都", "厦门", "桂林", "西藏", "杭州", "青岛", "西安"],
    "n": [str(n) for n in range(3, 60)],
}
TIMES = ["on Monday", "last weekend", "this morning", "yesterday", "in March", "after work",
         "昨天", "上周末", "今天早上", "下班后"]


def synthetic_texts(n: int, seed: int = 1) -> list[str]:
    """Varied memories on eight themes, English and Chinese, each text unique."""
    rng = random.Random(seed)
    topics = list(ACTIVITIES)
    texts = []
    for i in range(n):
        activity = rng.choice(ACTIVITIES[rng.choice(topics)])
        filled = activity.format(**{slot: rng.choice(values) for slot, values in FILLERS.items()})
        texts.append(f"{rng.choice(SUBJECTS)} {filled} {rng.choice(TIMES)} (#{i})")
    return texts


def _setup(uri: str, tenant: str, n: int) -> None:
    neo4j = Neo4jResource(uri=uri)
    embedder = HashingEmbedder()
    texts = synthetic_texts(n)
    now = utc_now()
    with neo4j.session() as session:
        for start in range(0, n, 5000):
            batch = texts[start:start + 5000]
            vectors = embedder.embed(batch)
            rows = []
            for text, vector in zip(batch, vectors, strict=True):
                digest = payload_hash(tenant, "LongTermMemory", text)
                rows.append(MemoryItem(id=memory_id(digest), memory=text, metadata=MemoryMetadata(
                    user_name=tenant, embedding=vector.astype(float).tolist(), created_at=now,
                    updated_at=now, payload_hash=digest)).to_properties())
            session.run("UNWIND $rows AS row CREATE (m:Node:MemoryItem) SET m = row", rows=rows).consume()
    neo4j.close()




def _drop(neo4j: Neo4jResource, tenant: str) -> None:
    with neo4j.session() as session:
        session.run("MATCH (m:MemoryItem {user_name: $tenant}) CALL (m) { DETACH DELETE m } "
                    "IN TRANSACTIONS OF 10000 ROWS", tenant=tenant).consume()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--keep", action="store_true", help="keep the bench tenant afterwards")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    uri = ensure_neo4j_uri(load_settings())
    neo4j = Neo4jResource(uri=uri)
    tenant = f"bench_reorg_{int(time.time())}"

    started = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(target=_setup, args=(uri, tenant, args.nodes))
    child.start()
    child.join()
    print(f"setup: {args.nodes} orphan nodes in {time.perf_counter() - started:.1f}s (untimed)")

    figures: dict[str, float] = {}
    try:
        with PeakRss() as rss:
            t0 = time.perf_counter()
            with neo4j.session() as session:
                rows = session.run("MATCH (m:MemoryItem {user_name: $tenant}) RETURN m.embedding AS e",
                                   tenant=tenant)
                baseline = [np.asarray(record["e"], dtype=np.float32) for record in rows]
            figures["baseline"] = time.perf_counter() - t0
            del baseline

            t0 = time.perf_counter()
            candidates, _, _ = load_candidates(neo4j, HashingEmbedder(), tenant, min_group_size=20)
            figures["read"] = time.perf_counter() - t0

            t0 = time.perf_counter()
            clusters = cluster_table(candidates, ClusteringParams())
            figures["cluster"] = time.perf_counter() - t0

            t0 = time.perf_counter()
            outcome = Reorganizer(tenant, neo4j, HashingEmbedder(), ExtractiveSummarizer(),
                                  logging.getLogger("bench")).run(candidates, clusters, time_budget_s=3600)
            figures["summarize+write"] = time.perf_counter() - t0
        kept = clusters[clusters["status"] == "kept"]
        total = figures["read"] + figures["cluster"] + figures["summarize+write"]
        print(f"nodes: {len(candidates)}  clusters: {len(kept)}  topics: {kept['topic'].nunique()}  "
              f"set aside: {int(clusters.loc[clusters['status'] == 'set_aside', 'size'].sum())}")
        print(f"parents created: {outcome.parents_created}  PARENT edges: {outcome.edges_created}")
        for name, seconds in figures.items():
            print(f"{name:>16}: {seconds:7.1f}s")
        print(f"{'total':>16}: {total:7.1f}s  (target < 60 s; read/baseline = "
              f"{figures['read'] / figures['baseline']:.2f})")
        print(f"{'peak RSS growth':>16}: {rss.growth_mib:7.0f} MiB")
    finally:
        if not args.keep:
            _drop(neo4j, tenant)
        neo4j.close()


if __name__ == "__main__":
    main()
