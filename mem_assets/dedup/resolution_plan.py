"""Turn judged pairs into resolutions: what to merge, what to supersede, what to leave (seed 000
§4.2, §5.2).

Redundant pairs are grouped so a node repeated three times becomes one merged node in one step,
but a memory joins a group only when it was judged redundant with the group's survivor itself
(``redundant_stars``): a chain A≈B, B≈C with A≉C never folds C into A; C stays apart, decided by
the same run (precision first: a later memory can still match it). Contradictions are then
resolved between the groups' results: the judge's resolver either fuses them (a merge with
update_type "conflict") or the newer one wins (supersede); one nothing orders, or one the
judgments themselves make doubtful, stays unresolved. What a merge writes is in ``merging``;
which memory is newer, and what a supersede writes, in ``superseding``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from mem_assets.dedup.merging import MergePlan, informativeness, merged_id
from mem_assets.dedup.pair_judge import Fusion, Label
from mem_assets.dedup.superseding import Recency, SupersedePlan, compare, recency
from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import MemoryItem, MemoryStatus, UpdateType


@dataclass(frozen=True)
class Unresolved:
    """A contradiction left as it is: both memories stay activated (and are marked checked)."""

    ids: tuple[str, str]
    reason: str


@dataclass
class Plan:
    merges: list[MergePlan] = field(default_factory=list)
    supersedes: list[SupersedePlan] = field(default_factory=list)
    #: contradictions nothing orders (same moment, same source) or the judgments make doubtful:
    #: both memories kept, with the reason
    unresolved: list[Unresolved] = field(default_factory=list)
    #: groups whose resolver failed or ran out of time: left as they are, unchecked
    failed: list[tuple[str, ...]] = field(default_factory=list)
    unsupported_fusions: int = 0
    #: groups called redundant that no text carries whole: not merged, both kept
    kept_apart: int = 0
    #: memories judged redundant with a merged group's member but not with its survivor: left
    #: activated and apart, and checked like the rest of the run
    left_out: list[str] = field(default_factory=list)
    usage: ChatUsage = field(default_factory=ChatUsage)


@dataclass(frozen=True)
class _Side:
    """What a node stands for after this run's merges: itself, or the merged node of its group."""

    id: str
    text: str
    at: Recency


def _components(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, ...]]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return sorted(tuple(sorted(group)) for group in groups.values())


def redundant_stars(pairs: Sequence[tuple[str, str]], texts: dict[str, str],
                    recencies: dict[str, Recency]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Merge groups of the redundant ``pairs`` in which every member was judged redundant with
    the survivor, and the members left out of every group.

    Greedy per connected component: the survivor is the most informative remaining member
    (``merging.informativeness``; on a tie the older, then the smaller id — the text the offline
    fusion keeps, since it takes the first most informative text in order of recency); it takes
    its direct redundant neighbours among the remaining members, and the rest is grouped again
    the same way. A chain A≈B, B≈C with A≉C (or A, C never compared) whose survivor is A merges
    A and B and leaves C out; a star A≈B, A≈C merges all three. A member whose turn comes with no
    remaining neighbour is left out. Groups are (survivor, members...) sorted by id after the
    survivor; left-out ids are sorted."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    groups: list[tuple[str, ...]] = []
    left_out: list[str] = []
    for component in _components(pairs):
        remaining = sorted(component, key=lambda n: (tuple(-x for x in informativeness(texts[n])),
                                                     recencies[n], n))
        while remaining:
            survivor, *rest = remaining
            members = [n for n in rest if n in neighbours[survivor]]
            if members:
                groups.append((survivor, *sorted(members)))
            else:
                left_out.append(survivor)
            remaining = [n for n in rest if n not in neighbours[survivor]]
    return groups, sorted(left_out)


def _usable(judgments: pd.DataFrame) -> pd.DataFrame:
    if judgments.empty:
        return judgments
    held = judgments["failed"].astype(bool)
    if "deferred" in judgments:
        held |= judgments["deferred"].astype(bool)
    return judgments[~held]


def final_survivors(newer_than: dict[str, list[_Side]]) -> dict[str, tuple[str, str]]:
    """For each superseded node: (its direct successor, the end of its chain). The direct
    successor is the newest node that supersedes it; edges always point to newer nodes, so every
    chain ends."""
    def direct(node: str) -> str:
        return max(newer_than[node], key=lambda side: (side.at, side.id)).id

    ends: dict[str, tuple[str, str]] = {}
    for node in newer_than:
        step = direct(node)
        end = step
        while end in newer_than:
            end = direct(end)
        ends[node] = (step, end)
    return ends


def inconsistent_contradictions(edges: Sequence[tuple[str, str]],
                                related: set[frozenset[str]]) -> dict[tuple[str, str], str]:
    """Contradictions (older, newer) the judgments themselves make doubtful, with the reason.

    A fact is replaced by one newer fact, and a new fact replaces one older fact (or a group of
    redundant ones). When a memory is judged contradicted by several memories that are not
    related to each other (no redundant or contradictory judgment between them), at most one of
    those judgments can be right and nothing says which: precision first, none is applied."""
    newer_of: dict[str, set[str]] = defaultdict(set)
    older_of: dict[str, set[str]] = defaultdict(set)
    for older, newer in edges:
        newer_of[older].add(newer)
        older_of[newer].add(older)

    def unrelated(group: set[str]) -> bool:
        return any(frozenset(pair) not in related for pair in combinations(sorted(group), 2))

    doubtful: dict[tuple[str, str], str] = {}
    for older, newers in newer_of.items():
        if len(newers) > 1 and unrelated(newers):
            for newer in newers:
                doubtful[(older, newer)] = (f"judged contradicted by {len(newers)} newer memories "
                                            "that are unrelated to each other: too unsure to apply")
    for newer, olders in older_of.items():
        if len(olders) > 1 and unrelated(olders):
            for older in olders:
                doubtful.setdefault((older, newer), f"judged to contradict {len(olders)} older "
                                                    "memories that are unrelated to each other: too "
                                                    "unsure to apply")
    return doubtful


def plan_resolutions(tenant: str, judgments: pd.DataFrame, nodes: dict[str, MemoryItem],
                     fuse: Callable[..., tuple[Fusion, ChatUsage]],
                     deadline: float | None = None, dialect: GraphDialect = SEED_DIALECT) -> Plan:
    """Plan merges and supersedes from judged pairs (columns left_id, right_id, label, failed).

    Redundant pairs form groups (one merged node each) of a survivor and the members judged
    redundant with it (``redundant_stars``); a member left out of every group stays activated
    and apart (``Plan.left_out`` when a memory it was judged redundant with merged): it was never
    compared with the survivor, so this run decides to keep it. Contradictions between what the nodes
    stand for after those merges go from older to newer (``recency``); one the recency cannot
    order, or one the judgments make doubtful (``inconsistent_contradictions``), is left
    unresolved. Each contradiction is offered to ``fuse`` (an LLM may reconcile
    it); the rest supersede, and a chain A < B < C makes A and B both point at C. Pairs whose
    nodes are missing or no longer activated are skipped: their nodes stay unchecked and the next
    run compares them with whatever is active then. After ``deadline`` (time.monotonic) no
    resolver is asked; those groups wait for the next run.
    """
    plan = Plan()
    usable = _usable(judgments)

    def active(node_id: str) -> bool:
        node = nodes.get(node_id)
        return node is not None and node.metadata.status == MemoryStatus.ACTIVATED

    def pairs_of(label: str) -> list[tuple[str, str]]:
        rows = usable[usable["label"] == label] if not usable.empty else usable
        return [(a, b) for a, b in zip(rows.get("left_id", []), rows.get("right_id", []), strict=True)
                if active(a) and active(b)]

    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    def ask(sides: Sequence[_Side], label: Label) -> Fusion | None:
        if late():
            plan.failed.append(tuple(side.id for side in sides))
            return None
        fusion, usage = fuse([s.text for s in sides], label,
                             dates=[s.at.stated_at.isoformat() for s in sides])
        plan.usage.add(usage)
        plan.unsupported_fusions += fusion.unsupported
        plan.kept_apart += fusion.apart
        if fusion.failed:
            plan.failed.append(tuple(side.id for side in sides))
            return None
        return fusion

    recencies = {node_id: recency(node) for node_id, node in nodes.items()}
    representative: dict[str, _Side] = {}
    redundant = pairs_of("redundant")
    stars, left_out = redundant_stars(redundant, {n: nodes[n].memory for n in nodes}, recencies)
    for star in stars:
        group = tuple(sorted(star))
        members = sorted((_Side(n, nodes[n].memory, recencies[n]) for n in group),
                         key=lambda side: (side.at, side.id))
        fusion = ask(members, "redundant")
        if fusion is None or fusion.text is None:
            continue
        merge = MergePlan(merged_id(tenant, group, dialect), group, fusion.text, UpdateType.DUPLICATE, fusion.reason)
        plan.merges.append(merge)
        for node in group:
            representative[node] = _Side(merge.merged_id, merge.text, members[-1].at)

    plan.left_out = [node for node in left_out if any(
        (a == node and b in representative) or (b == node and a in representative) for a, b in redundant)]

    def current(node_id: str) -> _Side:
        return representative.get(node_id, _Side(node_id, nodes[node_id].memory, recencies[node_id]))

    seen: set[frozenset[str]] = set()
    ordered: list[tuple[_Side, _Side]] = []
    for a, b in pairs_of("contradictory"):
        side_a, side_b = current(a), current(b)
        if side_a.id == side_b.id or frozenset((side_a.id, side_b.id)) in seen:
            continue
        seen.add(frozenset((side_a.id, side_b.id)))
        order = compare(side_a.at, side_b.at)
        if order is None:
            plan.unresolved.append(Unresolved(
                tuple(sorted((side_a.id, side_b.id))),
                f"contradictory, but both were stated at the same moment ({side_a.at.describe()}): "
                "nothing says which is newer, so both stay"))
            continue
        ordered.append((side_a, side_b) if order < 0 else (side_b, side_a))

    related = {frozenset((current(a).id, current(b).id))
               for a, b in redundant + pairs_of("contradictory")}
    doubtful = inconsistent_contradictions([(o.id, n.id) for o, n in ordered], related)
    newer_than: dict[str, list[_Side]] = {}
    reasons: dict[tuple[str, str], str] = {}
    for older, newer in sorted(ordered, key=lambda edge: (edge[1].at, edge[1].id, edge[0].at, edge[0].id)):
        if (older.id, newer.id) in doubtful:
            plan.unresolved.append(Unresolved((older.id, newer.id), doubtful[(older.id, newer.id)]))
            continue
        fusion = ask([older, newer], "contradictory")
        if fusion is None:
            continue
        if fusion.text is not None:
            sources = tuple(sorted((older.id, newer.id)))
            plan.merges.append(MergePlan(merged_id(tenant, sources, dialect), sources, fusion.text,
                                         UpdateType.CONFLICT, fusion.reason))
            continue
        newer_than.setdefault(older.id, []).append(newer)
        reasons[(older.id, newer.id)] = fusion.reason
    for older, (step, end) in sorted(final_survivors(newer_than).items()):
        reason = reasons[(older, step)]
        if step != end:
            reason = f"{reason} (superseded by {step}, itself superseded by {end})"
        plan.supersedes.append(SupersedePlan(older, end, reason))
    return plan


def held_back(ids: Sequence[str], judgments: pd.DataFrame, plan: Plan, outcomes: Sequence[dict],
              done: Sequence[str]) -> list[str]:
    """The nodes of this run that must stay unchecked: a failed or deferred judgment, a failed
    resolver, or a resolution that could not apply (a node changed meanwhile)."""
    waiting = {i for row in outcomes if row["status"] not in done for i in row["sources"]}
    waiting |= {i for group in plan.failed for i in group}
    if len(judgments):
        not_judged = judgments["failed"].astype(bool)
        if "deferred" in judgments:
            not_judged |= judgments["deferred"].astype(bool)
        waiting |= set(judgments[not_judged]["left_id"]) | set(judgments[not_judged]["right_id"])
    return [i for i in ids if i in waiting]
