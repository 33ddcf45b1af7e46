"""Judging candidate pairs through a content-hash cache, so no pair is ever judged twice.

Uncached pairs are grouped by their new node: one judge request per new memory with all its
candidates, each candidate placed before, after or at the same time as the new memory. A judge
that embeds texts (the accurate offline model) gets the vectors kept on the pairs' nodes from
earlier runs and hands back the ones it made, so a memory is embedded once in its life, not
once per run it is a candidate in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import get_args

import numpy as np
import pandas as pd

from mem_assets.dedup import queries
from mem_assets.dedup.llm_judge_prompt import JudgeRequest, MemoryRef
from mem_assets.dedup.pair_judge import DeepVectors, JudgeResource, Judgment
from mem_assets.dedup.relations import CascadeStage, Stage
from mem_assets.dedup.resolution_guards import guarded_fingerprint, guarded_requests
from mem_assets.dedup.review_queue import apply_answers, candidate_keys
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import normalize_text
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.progress import Sink, tracked

JUDGMENT_COLUMNS = ["left_id", "right_id", "label", "reason", "cached", "failed", "deferred", "pair_key",
                    "near", "near_probability", "stage", "routed", "over_budget"]


def pair_key(judge_fingerprint: str, text_a: str, text_b: str) -> str:
    """Order-free hash of the two normalised texts and the judge that labels them."""
    first, second = sorted((normalize_text(text_a), normalize_text(text_b)))
    payload = f"{judge_fingerprint}\x1f{first}\x1f{second}"
    return "judgment:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class JudgingReport:
    judgments: pd.DataFrame
    to_cache: list[dict] = field(default_factory=list)
    usage: ChatUsage = field(default_factory=ChatUsage)
    cache_hits: int = 0
    requests: int = 0
    vectors_reused: int = 0
    vectors_made: int = 0
    vectors_skipped: int = 0
    """Texts of judged pairs no e5 pass was needed for: only pairs the judge's gate closed read them."""
    pairs_gated: int = 0
    """Pairs a cheaper stage of the offline judge's cascade answered (fast or middle: clearly independent,
    repeat or contradiction)."""
    pairs_guarded: int = 0
    """Distinct pairs whose merge or supersede a resolution guard turned independent."""
    cascade: dict[str, int] = field(default_factory=dict)
    """Distinct pairs judged this run by the offline cascade's stage that answered (exact / fast / middle / accurate)."""
    middle_changed: int = 0
    """Pairs the middle stage answered otherwise than the fast model alone would have."""
    accurate_changed: int = 0
    """Pairs the accurate stage decided otherwise than the stage before it alone would have (the
    middle model; the fast one without a middle stage)."""
    cross_encoded: int = 0
    """Pair orders (older, newer and back) the accurate judge's Chinese cross-encoder read."""
    vectors_to_store: list[tuple[str, str, np.ndarray]] = field(default_factory=list)
    """(node id, text, vector) the judge made this run."""
    decided: dict[str, int] = field(default_factory=dict)
    """Distinct pairs judged this run and decided, by the stage that decided (offline / llm)."""
    pairs_routed: int = 0
    """Distinct pairs the offline judge was unsure of and sent to the LLM (``RoutedJudge``)."""
    llm_changed: int = 0
    """Routed pairs the LLM decided otherwise than the offline judge (a repeat or contradiction where
    it left them independent; independent where it was in doubt about its decision)."""
    llm_overruled: int = 0
    """Routed pairs whose LLM answer the offline evidence did not support: left apart."""
    llm_restated: int = 0
    """Routed pairs the offline judge read as a change and the LLM as a repeat, merged as one."""
    pairs_carried: int = 0
    """Routed pairs left independent offline, sent because one memory carries most of the other's words."""
    over_budget_pairs: int = 0
    over_budget_nodes: int = 0
    """New memories with a pair the LLM budget left for the next run (they stay unchecked)."""


def _date(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def build_requests(pairs: pd.DataFrame) -> tuple[list[JudgeRequest], list[list[int]]]:
    """One request per new node (column ``new_id``) with its pairs' other sides as candidates;
    also the row positions each request covers. Without ``new_id``, the right side is new."""
    groups: dict[str, list[int]] = {}
    new_ids = pairs["new_id"] if "new_id" in pairs else pairs["right_id"]
    for position, new_id in enumerate(new_ids):
        groups.setdefault(new_id, []).append(position)
    columns = {name: pairs[name].tolist() for name in pairs.columns}

    def cell(name: str, position: int, default: object = None) -> object:
        return columns[name][position] if name in columns else default

    requests = []
    for new_id, positions in groups.items():
        candidates, when = [], []
        new = None
        for position in positions:
            mine, other = ("left", "right") if columns["left_id"][position] == new_id else ("right", "left")
            new = MemoryRef(columns[f"{mine}_text"][position], _date(cell(f"{mine}_at", position)))
            candidates.append(MemoryRef(columns[f"{other}_text"][position], _date(cell(f"{other}_at", position))))
            when.append(cell("other_when", position, "older"))
        requests.append(JudgeRequest(new, tuple(candidates), tuple(when)))
    return requests, list(groups.values())


def judge_pairs(pairs: pd.DataFrame, judge: JudgeResource,
                lookup: Callable[[Sequence[str]], dict[str, dict]],
                sink: Sink | None = None, label: str = "judge",
                stored_vectors: Callable[[Sequence[str]], dict[str, np.ndarray]] | None = None) -> JudgingReport:
    """Label each pair (columns left_id, right_id, left_text, right_text; optionally new_id,
    left_at, right_at, other_when). ``near``/``near_probability``: the label an independent pair
    nearly got (``Judgment.near``), cached with the label, as are ``stage`` (who decided; None for
    judgments cached before stages were recorded) and ``routed``.

    Identical text pairs share one judgment; ``lookup`` returns cached judgments by key. Failed
    and deferred judgments are returned (label independent) but never offered for caching.
    Progress over the uncached pairs goes to ``sink``. ``stored_vectors``: by node ids, the
    judge's vectors kept on those nodes, by text (read only when something is judged).
    """
    if pairs.empty:
        return JudgingReport(pd.DataFrame(columns=JUDGMENT_COLUMNS))
    pairs = pairs.reset_index(drop=True)
    fingerprint = guarded_fingerprint(judge.fingerprint)
    keys = [pair_key(fingerprint, a, b)
            for a, b in zip(pairs["left_text"], pairs["right_text"], strict=True)]
    cached = lookup(sorted(set(keys)))
    first_of_key: dict[str, int] = {}
    for position, key in enumerate(keys):
        if key not in cached:
            first_of_key.setdefault(key, position)
    todo = pairs.iloc[sorted(first_of_key.values())].reset_index(drop=True)
    fresh: dict[str, Judgment] = {}
    usage = ChatUsage()
    requests: list[JudgeRequest] = []
    results: list[list[Judgment]] = []
    vectors: DeepVectors | None = None
    report_guarded = 0
    if not todo.empty:
        requests, covered = build_requests(todo)
        if stored_vectors is not None and judge.deep_vector_space:
            vectors = DeepVectors(known=stored_vectors(sorted(set(todo["left_id"]) | set(todo["right_id"]))))
        with tracked(label, sink, total=len(todo), unit="pairs") as progress:
            results, usage = judge.judge_requests(requests, progress.advance, vectors)
        results, report_guarded = guarded_requests(requests, results)
        todo_keys = [keys[position] for position in sorted(first_of_key.values())]
        for positions, judgments in zip(covered, results, strict=True):
            for position, judgment in zip(positions, judgments, strict=True):
                fresh[todo_keys[position]] = judgment
    rows = []
    for key, left, right in zip(keys, pairs["left_id"], pairs["right_id"], strict=True):
        if key in cached:
            hit = cached[key]
            rows.append((left, right, hit["label"], hit["reason"], True, False, False, key,
                         hit.get("near"), hit.get("near_probability"), hit.get("stage"),
                         bool(hit.get("routed")), False))
        else:
            verdict = fresh[key]
            rows.append((left, right, verdict.label, verdict.reason, False, verdict.failed,
                         verdict.deferred, key, verdict.near, verdict.near_probability, verdict.stage,
                         verdict.routed, verdict.over_budget))
    done = {key: verdict for key, verdict in fresh.items() if not verdict.failed and not verdict.deferred}
    to_cache = [{"key": key, "label": verdict.label, "reason": verdict.reason, "judge": fingerprint,
                 "stage": verdict.stage, "routed": verdict.routed,
                 **({"near": verdict.near, "near_probability": verdict.near_probability} if verdict.near else {})}
                for key, verdict in done.items()]
    over = [verdict for verdict in fresh.values() if verdict.over_budget]
    report = JudgingReport(pd.DataFrame(rows, columns=JUDGMENT_COLUMNS), to_cache, usage,
                           cache_hits=sum(key in cached for key in set(keys)), requests=len(requests),
                           pairs_gated=sum(verdict.gated for verdict in fresh.values()),
                           pairs_guarded=report_guarded,
                           cascade={stage: sum(v.cascade == stage for v in fresh.values())
                                    for stage in get_args(CascadeStage)},
                           middle_changed=sum(v.cascade == "middle" and v.changed for v in fresh.values()),
                           accurate_changed=sum(v.cascade == "accurate" and v.changed for v in fresh.values()),
                           decided={stage: sum(v.stage == stage for v in done.values()) for stage in get_args(Stage)},
                           pairs_routed=sum(verdict.routed for verdict in fresh.values()),
                           llm_changed=sum(v.routed and v.stage == "llm"
                                           and (v.restated or (v.label != "independent") != v.doubtful)
                                           for v in done.values()),
                           llm_restated=sum(v.restated for v in done.values()),
                           pairs_carried=sum(v.routed_carried for v in fresh.values()),
                           llm_overruled=sum(v.routed and v.stage == "offline" for v in done.values()),
                           over_budget_pairs=len(over),
                           over_budget_nodes=sum(any(j.over_budget for j in judged) for judged in results))
    if vectors is not None:
        sides = {node: text for side in ("left", "right")
                 for node, text in zip(todo[f"{side}_id"], todo[f"{side}_text"], strict=True)}
        report.vectors_reused = sum(1 for text in set(sides.values()) if text in vectors.known)
        report.vectors_made = len(vectors.made)
        report.vectors_skipped = vectors.skipped
        report.cross_encoded = vectors.cross_encoded
        report.vectors_to_store = [(node, text, vectors.made[text]) for node, text in sorted(sides.items())
                                   if text in vectors.made]
    return report


@dataclass(frozen=True)
class TenantJudging:
    """``judge_pairs`` of one tenant's candidates, with the user's answers in place of the judge's
    labels (``judgments``) and the answers found (``answered``, by review key)."""

    report: JudgingReport
    judgments: pd.DataFrame
    answered: dict[str, str]


def judge_tenant(neo4j: Neo4jResource, tenant: str, pairs: pd.DataFrame, judge: JudgeResource, now: datetime,
                 sink: Sink | None = None, keep_vectors: bool = True) -> TenantJudging:
    """Judge a tenant's candidate pairs through its cache, store the new judgments in the cache
    (``DedupJudgment`` nodes, not memories) and, with ``keep_vectors``, the judge's text vectors
    on the memory nodes. ``memtend plan`` passes ``keep_vectors=False``: it writes no memory,
    only judgments, so the run that follows reads them back instead of judging again and makes
    exactly the planned decisions even with a judge that would answer differently twice."""
    space = judge.deep_vector_space
    with neo4j.session() as session:
        report = judge_pairs(pairs, judge, lambda keys: session.execute_read(queries.cached_judgments, tenant, keys),
                             sink=sink, label=f"judge {tenant}",
                             stored_vectors=(lambda ids: session.execute_read(
                                 queries.judge_vectors, tenant, ids, space)) if space else None)
        if keep_vectors and report.vectors_to_store:
            session.execute_write(queries.store_judge_vectors, tenant, report.vectors_to_store, space)
        if report.to_cache:
            session.execute_write(queries.store_judgments, tenant,
                                  [{**row, "judged_at": now} for row in report.to_cache])
        answered = session.execute_read(queries.answered_labels, tenant, candidate_keys(pairs))
    return TenantJudging(report, apply_answers(report.judgments, pairs, answered), answered)
