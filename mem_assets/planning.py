"""A dry run of one tenant (`memtend plan`, the `plan_tenant` job): the merges, supersedes and
topic placements the next `tend_memory` run would make, written to no memory.

One code path with the run, not a copy of it: the candidate search (``write=False``: vectors a
node lacks are made in memory, nothing marked checked), the judge through its cache, the
resolution plan (``plan_judgments``) and the placement plan (``load_candidates`` /
``plan_table``) are the functions the assets call. The placement is planned on the graph as the
planned dedup will leave it: merged sources and superseded memories gone, their topic places
taken by their successors (``placement_plan.tidied``), merged memories new orphans.

What the plan writes: the judgments it made, into the judgment cache (``DedupJudgment`` nodes,
not memories), so the run that follows reads them back instead of asking the judge again and
makes exactly the planned decisions even with an LLM judge that would answer differently twice.
That is why it holds the tenant's write lease, and refuses a tenant an undo or restore left
incomplete.

Chosen scope: what is already in the graph and unchecked or unplaced. Inbox files not ingested
yet are not read (ingest has no dry run); a rebuild is not planned. Not exact, and said so in the
plan's notes: thin topics hygiene dissolves after the merges (their members are placed again),
a resolver (LLM fuse) answering differently in the run, judgments that failed (not cached), and
the vector-index search for nodes that had no vector.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field

from mem_assets.dedup.apply_resolutions import plan_judgments
from mem_assets.dedup.assets import DedupConfig
from mem_assets.dedup.candidate_search import search_candidates
from mem_assets.dedup.candidates import default_threshold
from mem_assets.dedup.judgment_cache import judge_tenant
from mem_assets.dedup.pair_judge import JudgeResource, budgeted_fuse
from mem_assets.dedup.resolution_plan import Plan
from mem_assets.dedup.review_queue import unsure_pairs
from mem_assets.reorg.assets import CandidatesConfig
from mem_assets.reorg.placement_plan import SET_ASIDE, TOPIC, plan_table, successor_topics
from mem_assets.reorg.queries import Orphan
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_assets.reorg.topic_writer import AfterDedup, load_candidates
from mem_resources.embedder import EmbedderResource
from mem_resources.memory_model import MemoryItem, utc_now
from mem_resources.metadata import preview_table
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.partitions import tenant_of, tenant_partitions
from mem_resources.run_policy import OWNERS

#: One row per decision. ``ids``: the memories it takes (" | "), ``result``: the merged memory,
#: the surviving one or the topic; ``score``: the candidate cosine (dedup) or the similarity to
#: the nearest topic (unplaced).
PLAN_COLUMNS = ["kind", "memory_type", "ids", "result", "text", "source_texts", "score", "reason", "action"]


@dataclass
class TenantPlan:
    tenant: str
    table: pd.DataFrame
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.counts.items())
        return "\n".join([f"plan of {self.tenant}: {counts}", *(f"  note: {n}" for n in self.notes)])

    def write(self, folder: Path) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        as_json, as_csv = folder / "plan.json", folder / "plan.csv"
        as_json.write_text(json.dumps({"tenant": self.tenant, "counts": self.counts, "notes": self.notes,
                                       "rows": self.table.to_dict("records")}, ensure_ascii=False, indent=1,
                                      default=str), "utf-8")
        self.table.to_csv(as_csv, index=False)
        return as_json, as_csv


def _score(scores: dict[frozenset[str], float], ids: tuple[str, ...]) -> float | None:
    found = [scores[frozenset(p)] for p in combinations(ids, 2) if frozenset(p) in scores]
    return max(found) if found else None


def _dedup_rows(plan: Plan, nodes: dict[str, MemoryItem], scores: dict[frozenset[str], float],
                queue: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def kind(i: str) -> str:
        return nodes[i].metadata.memory_type.value

    rows = [{"kind": "merge", "memory_type": kind(m.sources[0]), "ids": " | ".join(m.sources),
             "result": m.merged_id, "text": m.text, "source_texts": " | ".join(nodes[i].memory for i in m.sources),
             "score": _score(scores, m.sources), "reason": m.reason, "action": m.update_type.value}
            for m in plan.merges]
    rows += [{"kind": "supersede", "memory_type": kind(s.newer) if s.newer in nodes else None,
              "ids": f"{s.older} | {s.newer}", "result": s.newer,
              "text": nodes[s.newer].memory if s.newer in nodes else "",
              "source_texts": f"{nodes[s.older].memory} | " + (nodes[s.newer].memory if s.newer in nodes else ""),
              "score": _score(scores, (s.older, s.newer)), "reason": s.reason, "action": "newer wins"}
             for s in plan.supersedes]
    rows += [{"kind": "review", "memory_type": None, "ids": f"{q['first_id']} | {q['second_id']}", "result": None,
              "text": None, "source_texts": f"{q['first_text']} | {q['second_text']}", "score": q["score"],
              "reason": q["reason"], "action": q.get("suggested") or "unresolved"} for q in queue]
    return rows


def _placement_rows(placements: pd.DataFrame, texts: dict[str, str], given: dict[str, str]) -> list[dict[str, Any]]:
    rows = [{"kind": "placement", "memory_type": None, "ids": heir, "result": topic, "text": texts.get(heir),
             "source_texts": None, "score": None, "reason": "takes the topic place of the memory it replaces",
             "action": "hygiene"} for heir, topic in sorted(given.items())]
    for topic in placements[(placements["kind"] == TOPIC) & (placements["level"] == 1)].itertuples():
        rows += [{"kind": "placement", "memory_type": topic.memory_type, "ids": member, "result": topic.id,
                  "text": texts.get(member), "source_texts": None, "score": None,
                  "reason": f"topic {topic.action}", "action": topic.action} for member in topic.added]
    rows += [{"kind": "unplaced", "memory_type": row.memory_type, "ids": row.id, "result": row.nearest,
              "text": texts.get(row.id), "source_texts": None, "score": row.similarity, "reason": row.reason,
              "action": "left unplaced"} for row in placements[placements["kind"] == SET_ASIDE].itertuples()]
    return rows


def plan_tenant(neo4j: Neo4jResource, tenant: str, embedder: EmbedderResource, judge: JudgeResource,
                topic_vectors: TopicVectorsResource, dedup: DedupConfig | None = None,
                reorg: CandidatesConfig | None = None, now: datetime | None = None) -> TenantPlan:
    """The plan of ``tenant`` as the run with these configs would decide it. The caller holds
    the tenant's lease (the CLI takes it; a Dagster run's Neo4j resource holds it)."""
    dedup, reorg, now = dedup or DedupConfig(), reorg or CandidatesConfig(), now or utc_now()
    threshold = dedup.threshold if dedup.threshold is not None else default_threshold(embedder)
    found = search_candidates(neo4j, tenant, embedder, threshold, dedup.top_k, dedup.search, dedup.max_nodes_per_run,
                              now, write=False)
    judged = judge_tenant(neo4j, tenant, found.pairs, judge, now, keep_vectors=False)
    judgments = judged.judgments
    frame = judgments.merge(found.pairs[["left_id", "right_id", "left_text", "right_text", "score"]],
                            on=["left_id", "right_id"], how="left") if len(judgments) else judgments
    plan, nodes = plan_judgments(neo4j, tenant, judgments, budgeted_fuse(judge)[0], judge.run_deadline_s(), now)
    scores = {frozenset((a, b)): float(s) for a, b, s in zip(
        found.pairs["left_id"], found.pairs["right_id"], found.pairs["score"], strict=True)} if len(found.pairs) else {}
    texts = {**{i: n.memory for i, n in nodes.items()}, **{m.merged_id: m.text for m in plan.merges}}
    queue = [{"first_id": a, "second_id": b, "first_text": texts[a], "second_text": texts[b],
              "score": scores.get(frozenset((a, b))), "reason": item.reason}
             for item in plan.unresolved for a, b in [item.ids]] + unsure_pairs(frame, None)

    successors = {**{s: m.merged_id for m in plan.merges for s in m.sources},
                  **{s.older: s.newer for s in plan.supersedes}}
    types = sorted({nodes[i].metadata.memory_type.value for i in successors})
    given, thin = successor_topics(neo4j, tenant, types, successors)
    vectors = embedder.embed([m.text for m in plan.merges])
    added = tuple(Orphan(m.merged_id, nodes[m.sources[0]].metadata.memory_type.value, m.text, vector, False)
                  for m, vector in zip(plan.merges, vectors, strict=True) if m.merged_id not in given)
    load = load_candidates(neo4j, embedder, topic_vectors, tenant, reorg.min_group_size, False, reorg.e5_max_per_run,
                           write=False, after=AfterDedup(frozenset(successors) | frozenset(given), added))
    candidates = load.frame
    placements = plan_table(neo4j, embedder, topic_vectors, tenant, candidates, topic_vectors.space_params(),
                            False, "", topic_vectors.cross_params(), successors, cascade=topic_vectors.cascade_params())
    texts.update(zip(candidates["id"], candidates["memory"], strict=True))
    table = pd.DataFrame(_dedup_rows(plan, nodes, scores, queue) + _placement_rows(placements, texts, given),
                         columns=PLAN_COLUMNS)
    notes = []
    if thin:
        notes.append(f"{len(thin)} topics will have fewer than two members after the merges; the run "
                     "dissolves them and places their last member again, which this plan does not show")
    if plan.failed or (len(judgments) and judgments["failed"].astype(bool).any()):
        notes.append("some judge or resolver calls failed: those pairs are judged again by the run")
    if plan.left_out:
        notes.append(f"{len(plan.left_out)} memories are left out of a merge (redundant with a member, "
                     "not judged redundant with its survivor): they stay apart, checked by the run")
    if load.vectors_deferred:
        notes.append(f"{load.vectors_deferred} memories wait for their kept vector until a later run")
    kinds = table["kind"].value_counts()
    counts = {"unchecked": found.unchecked, "candidate_pairs": len(found.pairs),
              "judged_now": int((~judgments["cached"].astype(bool)).sum()) if len(judgments) else 0,
              **{k: int(kinds.get(k, 0)) for k in ("merge", "supersede", "review", "placement", "unplaced")},
              "new_topics": int(((placements["kind"] == TOPIC) & (placements["action"] == "created")).sum())}
    return TenantPlan(tenant, table, counts, notes)


def plan_folder(base: Path, tenant: str, now: datetime) -> Path:
    return base / "plans" / tenant / now.strftime("%Y%m%dT%H%M%SZ")


class PlanConfig(dg.Config):
    """The configs of the run to plan (as given to `tend_memory`'s dedup_candidates and
    reorg_candidates), and where the table goes."""

    dedup: DedupConfig = DedupConfig()
    reorg: CandidatesConfig = CandidatesConfig()
    out: str = Field(default="", description="Folder of the plan's JSON and CSV; default "
                                             "<DAGSTER_HOME>/plans/<tenant>/<time>.")


@dg.asset(partitions_def=tenant_partitions, kinds={"neo4j", "pandas"}, group_name="plan", owners=OWNERS,
          code_version="1")
def tenant_plan(context: dg.AssetExecutionContext, config: PlanConfig, neo4j: Neo4jResource,
                embedder: EmbedderResource, judge: JudgeResource,
                topic_vectors: TopicVectorsResource) -> dg.MaterializeResult:
    """What the next `tend_memory` run would merge, supersede and place, changing no memory (see ``plan_tenant``); the table in metadata and as JSON and CSV."""
    tenant, now = tenant_of(context), utc_now()
    plan = plan_tenant(neo4j, tenant, embedder, judge, topic_vectors, config.dedup, config.reorg, now)
    base = Path(config.out) if config.out else plan_folder(Path(context.instance.root_directory), tenant, now)
    as_json, as_csv = plan.write(base)
    return dg.MaterializeResult(metadata={
        **plan.counts, "notes": "; ".join(plan.notes) or "none",
        "json": dg.MetadataValue.path(str(as_json)), "csv": dg.MetadataValue.path(str(as_csv)),
        "plan": preview_table(plan.table, PLAN_COLUMNS, limit=50)})


plan_job = dg.define_asset_job(
    "plan_tenant", selection=dg.AssetSelection.assets(tenant_plan),
    description="Dry run of one tenant: what tend_memory would merge, supersede and place; changes no memory.")
