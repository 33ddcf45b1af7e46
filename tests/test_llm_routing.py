"""Routing and budget of the LLM judge, through the pipeline on the real Neo4j and real HTTP to
the local fake server: the offline judge decides every pair, only the pairs in its uncertain band
reach the LLM (one call per new memory with just those candidates), a per-run budget caps the
calls and leaves the rest, unmerged and unchecked, for the next run, and a rerun with nothing new
makes no call."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from mem_assets.dedup.pair_judge import OfflineJudge, OpenAIJudge, RoutedJudge
from mem_resources.llm import OpenAIChatResource
from mem_resources.settings import Settings
from tests.support.fake_openai import chat_answer, fake_openai_server, judge_groups, verdicts
from tests.test_dedup import metadata, nodes, run_dedup, write_items

#: Pairs the shipped accurate judge is unsure of (left independent at P(redundant) 0.84, about 0.5
#: and about 0.5: within the band below its 0.88 threshold) among pairs it decides clearly (a
#: repeat at P 0.99, a move at P(contradictory) 1.00, unrelated facts the gate closes).
TEXTS = ["The user likes green tea.", "The user lives in Berlin.", "The user has two kids.",
         "The user goes running to clear her head.", "The user reads books before bed.",
         "The user drinks green tea every morning.", "The user now lives in Paris.",
         "The user has two children.", "The user goes jogging to unwind.", "The user reads a book every night."]
BAND = 0.45
"""Wider than the default 0.15, so that three new memories have uncertain pairs."""


def _llm(base_url: str, **budget: int) -> OpenAIJudge:
    return OpenAIJudge(chat=OpenAIChatResource(base_url=base_url, model="test-model", timeout_s=10.0, max_retries=0),
                       max_concurrency=1, **budget)


def _routed(base_url: str, **budget: int) -> RoutedJudge:
    return RoutedJudge(offline=OfflineJudge(review_band=BAND), llm=_llm(base_url, **budget))


def _asked(calls: list[dict[str, Any]]) -> list[tuple[str, frozenset[str]]]:
    """(new memory, candidate texts) of every group of every judge request, in order."""
    return [group for body in calls for group in judge_groups(body) or []]


def _judge_calls(calls: list[dict[str, Any]]) -> int:
    return sum(judge_groups(body) is not None for body in calls)


def _redundant(body: dict[str, Any]) -> tuple[int, Any]:
    """Judges every candidate a repeat; fuses by refusing (the run keeps a carrying source or
    keeps the group apart)."""
    if judge_groups(body) is None:
        return 200, chat_answer(json.dumps({"reason": "keep both", "reconcilable": False, "merged": None}))
    return 200, chat_answer(verdicts(body, lambda new, c: "redundant", "same fact"),
                            prompt_tokens=100, completion_tokens=20)


def _unsure(neo4j_pairs: pd.DataFrame) -> dict[str, frozenset[str]]:
    """By new memory text, the candidate texts the offline judge alone leaves in its band (below a
    threshold, or decided just above it)."""
    texts = neo4j_pairs.set_index("left_id")["left_text"].to_dict() | \
        neo4j_pairs.set_index("right_id")["right_text"].to_dict()
    pairs = [(row.left_text, row.right_text) for row in neo4j_pairs.itertuples()]
    judged, _ = OfflineJudge(review_band=BAND).judge_pairs(pairs)
    unsure: dict[str, set[str]] = {}
    for row, judgment in zip(neo4j_pairs.itertuples(), judged, strict=True):
        if judgment.near is not None or judgment.doubtful:
            other = row.left_id if row.new_id == row.right_id else row.right_id
            unsure.setdefault(texts[row.new_id], set()).add(texts[other])
    return {new: frozenset(candidates) for new, candidates in unsure.items()}


def test_only_uncertain_pairs_reach_the_llm_grouped_by_new_memory(neo4j, instance, tenant):
    write_items(neo4j, tenant, TEXTS)
    with fake_openai_server() as server:
        server.chat = _redundant
        result = run_dedup(neo4j, tenant, instance, judge=_routed(server.base_url))
        asked, calls = _asked(server.chat_calls()), _judge_calls(server.chat_calls())
        before = len(server.chat_calls())
        again = run_dedup(neo4j, tenant, instance, judge=_routed(server.base_url))
        calls_again = len(server.chat_calls()) - before

    pairs = result.output_for_node("dedup_candidates")
    unsure = _unsure(pairs)
    assert len(unsure) >= 2 and sum(map(len, unsure.values())) < len(pairs)  # some clear, some not
    # One group per new memory with an uncertain pair, carrying exactly its uncertain candidates;
    # up to four new memories a call.
    assert len(asked) == len(unsure) and dict(asked) == unsure
    assert calls == -(-len(unsure) // 4) < len(unsure)
    judged = result.output_for_node("relation_judgments")
    routed = judged[judged["routed"]]
    assert len(routed) == sum(map(len, unsure.values()))
    assert set(judged.loc[~judged["routed"], "stage"]) == {"offline"}
    clear = judged[~judged["routed"]]
    assert set(clear["label"]) == {"independent"}  # every merge and supersede was asked first

    meta = metadata(result, "relation_judgments")
    assert meta["llm_calls"] == meta["judge_calls"] == calls
    assert meta["pairs_routed_to_llm"] == len(routed)
    assert meta["decided_llm"] + meta["decided_offline"] == len(judged)
    # The LLM answered "redundant": applied where the offline doubt was about a repeat.
    changed = routed[routed["label"] == "redundant"]
    assert meta["llm_changed"] == len(changed) > 0 and set(changed["stage"]) == {"llm"}
    assert meta["prompt_tokens"] == 100 * calls and meta["completion_tokens"] == 20 * calls
    assert meta["llm_calls_left"] == "no limit"
    assert meta["judge_calls_per_new_node"] == round(calls / metadata(result, "dedup_candidates")
                                                     ["unchecked_nodes"], 3)

    # The cache records which stage decided; a rerun with nothing new asks nothing.
    with neo4j.session() as session:
        stages = session.run("MATCH (j:DedupJudgment {user_name: $t}) RETURN j.stage AS stage, "
                             "j.routed AS routed", t=tenant).data()
    assert {row["stage"] for row in stages} == {"offline", "llm"}
    assert sum(bool(row["routed"]) for row in stages) == len(routed)
    assert calls_again == 0 and metadata(again, "relation_judgments")["llm_calls"] == 0


def test_route_all_sends_every_pair(neo4j, instance, tenant):
    write_items(neo4j, tenant, TEXTS)
    with fake_openai_server() as server:
        server.chat = lambda body: (200, chat_answer(verdicts(body, lambda new, c: "independent")))
        result = run_dedup(neo4j, tenant, instance, judge=_llm(server.base_url))
        asked = _asked(server.chat_calls())
    pairs = result.output_for_node("dedup_candidates")
    assert len(asked) == pairs["new_id"].nunique()
    assert sum(len(candidates) for _, candidates in asked) == len(pairs)
    meta = metadata(result, "relation_judgments")
    assert meta["decided_llm"] == len(pairs) and meta["decided_offline"] == 0


def test_a_budget_of_one_call_makes_one_and_the_next_run_takes_up_the_rest(neo4j, instance, tenant):
    ids = write_items(neo4j, tenant, TEXTS)
    with fake_openai_server() as server:
        server.chat = _redundant
        capped = run_dedup(neo4j, tenant, instance,
                           judge=_routed(server.base_url, max_calls_per_run=1, memories_per_call=1))
        first = _asked(server.chat_calls())
        before = len(server.chat_calls())
        graph = nodes(neo4j, tenant)
        taken = run_dedup(neo4j, tenant, instance,
                          judge=_routed(server.base_url, max_calls_per_run=10, memories_per_call=1))
        second = _asked(server.chat_calls()[before:])

    assert len(first) == 1
    meta = metadata(capped, "relation_judgments")
    assert meta["llm_calls"] == 1 and meta["llm_calls_left"] == 0
    assert meta["over_budget_nodes"] >= 1 and meta["over_budget_pairs"] >= meta["over_budget_nodes"]
    judged = capped.output_for_node("relation_judgments")
    waiting = judged[judged["over_budget"]]
    assert len(waiting) == meta["over_budget_pairs"] and set(waiting["label"]) == {"independent"}
    assert not waiting["cached"].any()
    # Nothing merged for them: both sides still activated and unchecked.
    for row in waiting.itertuples():
        for node in (row.left_id, row.right_id):
            assert graph[node]["status"] == "activated" and "dedup_checked_at" not in graph[node]
    left_over = {graph[i]["memory"] for i in set(waiting["left_id"]) | set(waiting["right_id"])}

    # The next run, with budget, asks about exactly what was left.
    assert len(second) == meta["over_budget_nodes"]
    assert {new for new, _ in second} | {c for _, cs in second for c in cs} <= left_over
    again = metadata(taken, "relation_judgments")
    assert again["over_budget_nodes"] == 0 and again["llm_calls"] == len(second)
    assert all("dedup_checked_at" in n for n in nodes(neo4j, tenant).values() if n["id"] in ids
               and n["status"] == "activated")


def test_settings_default_to_routing_with_a_budget(monkeypatch: pytest.MonkeyPatch):
    from mem_assets.resources import build_judge

    for name in ("MEMTEND_LLM_ROUTE", "MEMTEND_LLM_MAX_CALLS_PER_RUN", "MEMTEND_LLM_MAX_TOKENS_PER_RUN",
                 "MEMTEND_LLM_NEAR_CARRIED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMTEND_LLM", "openai")
    routed = build_judge(Settings(), in_dagster=False)
    assert isinstance(routed, RoutedJudge) and routed.llm_budget == (1000, 2_000_000)
    assert routed.near_carried == 0.60
    monkeypatch.setenv("MEMTEND_LLM_NEAR_CARRIED", "0")
    assert build_judge(Settings(), in_dagster=False).near_carried == 0.0
    monkeypatch.delenv("MEMTEND_LLM_NEAR_CARRIED")
    assert not routed.offline.middle, "the confirmation reach reads the accurate stage: no middle stage"
    monkeypatch.setenv("MEMTEND_LLM", "offline")
    offline = build_judge(Settings(), in_dagster=False)
    assert isinstance(offline, OfflineJudge) and not offline.middle, "the middle stage is opt-in"
    monkeypatch.setenv("MEMTEND_JUDGE_MIDDLE", "true")
    assert build_judge(Settings(), in_dagster=False).middle
    monkeypatch.setenv("MEMTEND_LLM", "openai")
    assert not build_judge(Settings(), in_dagster=False).offline.middle
    monkeypatch.delenv("MEMTEND_JUDGE_MIDDLE")
    monkeypatch.setenv("MEMTEND_LLM", "openai")
    monkeypatch.setenv("MEMTEND_LLM_ROUTE", "ALL")
    monkeypatch.setenv("MEMTEND_LLM_MAX_CALLS_PER_RUN", "0")
    every = build_judge(Settings(), in_dagster=False)
    assert isinstance(every, OpenAIJudge) and every.llm_budget == (0, 2_000_000)


def test_the_token_budget_stops_new_calls_once_spent():
    from mem_assets.dedup.llm_judge_prompt import JudgeRequest, MemoryRef

    requests = [JudgeRequest(MemoryRef(f"The user visited city number {i}."),
                             (MemoryRef("The user likes to travel."),), ("older",)) for i in range(4)]
    with fake_openai_server() as server:
        server.chat = _redundant  # 120 tokens a call
        results, usage = _llm(server.base_url, max_tokens_per_run=150, memories_per_call=1).judge_requests(requests)
        calls = len(server.chat_calls())
    # 0 then 120 tokens spent are under 150: two calls; 240 is not: the rest wait.
    assert calls == usage.calls == 2 and usage.prompt_tokens + usage.completion_tokens == 240
    assert not any(r[0].deferred or r[0].failed for r in results[:2])  # answered (the offline veto may overrule)
    assert all(r[0].over_budget and r[0].deferred and r[0].label == "independent" for r in results[2:])


#: A repeat the offline judge is sure of (P(redundant) 0.996: past a merge reach of 0.70, P 0.964;
#: each text carries the other's words, so it merges into one of them) and a move it is sure of
#: (P(contradictory) 0.996).
SURE = ["Every morning the user drinks green tea.", "The user lives in Berlin.",
        "The user drinks green tea every morning.", "The user now lives in Paris."]


def _independent(body: dict[str, Any]) -> tuple[int, Any]:
    """Judges every candidate independent; fuses by refusing (a carrying source is kept)."""
    if judge_groups(body) is None:
        return 200, chat_answer(json.dumps({"reason": "keep both", "reconcilable": False, "merged": None}))
    return 200, chat_answer(verdicts(body, lambda new, c: "independent", "different"))


def test_by_default_no_memory_is_archived_on_the_offline_judge_s_word_alone(neo4j, instance, tenant):
    """The default reach (1): the sure repeat and the sure move are shown to the LLM first; its
    "independent" keeps all four memories active, and the rerun asks nothing."""
    write_items(neo4j, tenant, SURE)
    with fake_openai_server() as server:
        server.chat = _independent
        result = run_dedup(neo4j, tenant, instance, judge=RoutedJudge(offline=OfflineJudge(), llm=_llm(server.base_url)))
        asked = set(_asked(server.chat_calls()))
        before = len(server.chat_calls())
        again = run_dedup(neo4j, tenant, instance, judge=RoutedJudge(offline=OfflineJudge(), llm=_llm(server.base_url)))
        calls_again = len(server.chat_calls()) - before
    assert asked == {(SURE[2], frozenset({SURE[0]})), (SURE[3], frozenset({SURE[1]}))}
    assert metadata(result, "relation_judgments")["llm_changed"] == 2
    assert all(node["status"] == "activated" for node in nodes(neo4j, tenant).values())
    assert calls_again == 0 and metadata(again, "relation_judgments")["llm_calls"] == 0


def test_sure_decisions_past_a_lower_reach_never_reach_the_llm(neo4j, instance, tenant):
    ids = write_items(neo4j, tenant, SURE)
    offline = OfflineJudge(confirm_merges=0.70, confirm_supersedes=0.47)
    with fake_openai_server() as server:
        server.chat = _independent
        result = run_dedup(neo4j, tenant, instance, judge=RoutedJudge(offline=offline, llm=_llm(server.base_url)))
        asked = _asked(server.chat_calls())
    assert asked == [] and metadata(result, "relation_judgments")["llm_calls"] == 0
    graph = nodes(neo4j, tenant)
    assert graph[ids[0]]["status"] == "archived" or graph[ids[2]]["status"] == "archived"  # merged offline
    assert graph[ids[1]]["status"] == "archived" and graph[ids[3]]["status"] == "activated"  # superseded


def test_a_merge_within_the_reach_goes_to_the_llm_which_may_keep_it_apart(neo4j, instance, tenant):
    """``confirm_merges`` 1: every offline merge is confirmed first (supersedes 0: none is); the
    LLM's "independent" keeps the repeat apart; the rerun asks nothing."""
    ids = write_items(neo4j, tenant, SURE)

    def judge(url: str) -> RoutedJudge:
        return RoutedJudge(offline=OfflineJudge(review_band=0.0, confirm_merges=1.0, confirm_supersedes=0.0),
                           llm=_llm(url))

    with fake_openai_server() as server:
        server.chat = _independent
        result = run_dedup(neo4j, tenant, instance, judge=judge(server.base_url))
        asked = _asked(server.chat_calls())
        before = len(server.chat_calls())
        again = run_dedup(neo4j, tenant, instance, judge=judge(server.base_url))
        calls_again = len(server.chat_calls()) - before

    # One call, for the newer of the repeat, carrying just that candidate: not the move.
    assert asked == [(SURE[2], frozenset({SURE[0]}))]
    judged = result.output_for_node("relation_judgments")
    routed = judged[judged["routed"]]
    assert len(routed) == 1 and routed.iloc[0]["label"] == "independent" and routed.iloc[0]["stage"] == "llm"
    assert set(judged.loc[~judged["routed"], "stage"]) == {"offline"}
    meta = metadata(result, "relation_judgments")
    assert meta["llm_calls"] == 1 and meta["pairs_routed_to_llm"] == 1 and meta["llm_changed"] == 1
    graph = nodes(neo4j, tenant)
    assert graph[ids[0]]["status"] == graph[ids[2]]["status"] == "activated"  # kept apart
    assert graph[ids[1]]["status"] == "archived" and graph[ids[3]]["status"] == "activated"  # decided offline
    assert calls_again == 0 and metadata(again, "relation_judgments")["llm_calls"] == 0


def test_the_confirmation_reach_is_read_from_the_settings(monkeypatch: pytest.MonkeyPatch):
    from mem_assets.resources import build_judge

    monkeypatch.setenv("MEMTEND_LLM", "openai")
    for name in ("MEMTEND_LLM_CONFIRM_MERGES", "MEMTEND_LLM_CONFIRM_SUPERSEDES", "MEMTEND_LLM_ROUTE"):
        monkeypatch.delenv(name, raising=False)
    routed = build_judge(Settings(), in_dagster=False)
    assert isinstance(routed, RoutedJudge)
    assert (routed.offline.confirm_merges, routed.offline.confirm_supersedes) == (1.0, 1.0)
    monkeypatch.setenv("MEMTEND_LLM_CONFIRM_MERGES", "0.5")
    monkeypatch.setenv("MEMTEND_LLM_CONFIRM_SUPERSEDES", "0")
    routed = build_judge(Settings(), in_dagster=False)
    assert isinstance(routed, RoutedJudge)
    assert (routed.offline.confirm_merges, routed.offline.confirm_supersedes) == (0.5, 0.0)


#: A repeat the offline judge scores far under its threshold (P(redundant) 0.44 against 0.88): out
#: of the review band (0.30: P >= 0.58), inside the LLM's near band for merges (0.80: P >= 0.08).
FAR_REPEAT = ["The user reads books before bed.", "The user reads a book every night."]


def test_with_the_default_bands_a_far_repeat_reaches_the_llm_but_not_the_review_queue(
        neo4j, instance, tenant, monkeypatch: pytest.MonkeyPatch):
    from mem_assets.resources import build_judge

    for name in ("MEMTEND_REVIEW_BAND", "MEMTEND_LLM_NEAR_MERGES", "MEMTEND_LLM_NEAR_SUPERSEDES",
                 "MEMTEND_LLM_CONFIRM_MERGES", "MEMTEND_LLM_CONFIRM_SUPERSEDES", "MEMTEND_LLM_ROUTE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMTEND_LLM", "offline")
    offline_tenant = f"{tenant}-offline"
    write_items(neo4j, offline_tenant, FAR_REPEAT)
    alone = metadata(run_dedup(neo4j, offline_tenant, instance, judge=build_judge(Settings(), in_dagster=False)),
                     "merged_nodes")
    assert (alone["merges"], alone["queued_unsure"]) == (0, 0)

    def repeat_fused(body: dict[str, Any]) -> tuple[int, Any]:
        if judge_groups(body) is not None:
            return _redundant(body)
        return 200, chat_answer(json.dumps({"reason": "same habit", "reconcilable": True,
                                            "merged": "The user reads a book every night before bed."}))

    ids = write_items(neo4j, tenant, FAR_REPEAT)
    with fake_openai_server() as server:
        server.chat = repeat_fused
        for name, value in (("MEMTEND_LLM", "openai"), ("OPENAI_BASE_URL", server.base_url),
                            ("OPENAI_API_KEY", "test"), ("MEMTEND_LLM_MODEL", "test-model")):
            monkeypatch.setenv(name, value)
        judge = build_judge(Settings(), in_dagster=False)
        assert isinstance(judge, RoutedJudge) and judge.offline.bands() == {"redundant": 0.80, "contradictory": 0.40}
        result = run_dedup(neo4j, tenant, instance, judge=judge)
        asked = _asked(server.chat_calls())
    assert asked == [(FAR_REPEAT[1], frozenset({FAR_REPEAT[0]}))]
    assert metadata(result, "relation_judgments")["llm_calls"] == 1
    judged = result.output_for_node("relation_judgments")
    assert list(judged[["label", "stage", "routed"]].itertuples(index=False, name=None)) == [("redundant", "llm", True)]
    assert metadata(result, "merged_nodes")["merges"] == 1
    graph = nodes(neo4j, tenant)
    assert [graph[i]["status"] for i in ids] == ["archived", "archived"]
    [fused] = [n for n in graph.values() if n["status"] == "activated"]
    assert fused["memory"] == "The user reads a book every night before bed."

    monkeypatch.setenv("MEMTEND_LLM_NEAR_MERGES", "0.30")
    assert build_judge(Settings(), in_dagster=False).offline.bands()["redundant"] == 0.30


def test_fusions_spend_under_their_own_budget_and_the_next_run_takes_up_the_rest(neo4j, instance, tenant):
    """Resolver (fusion) calls are limited per run like judging, counted apart: with one call a run,
    the repeat is fused and the move waits, its pair unresolved and its nodes unchecked, until the
    next run; nothing is merged or superseded without the model's answer."""
    ids = write_items(neo4j, tenant, SURE)

    def fused(body: dict[str, Any]) -> tuple[int, Any]:
        assert judge_groups(body) is None, "the offline judge is sure of both pairs: no judge call"
        return 200, chat_answer(json.dumps({"reason": "one fact", "reconcilable": False, "merged": None}))

    def judge(url: str) -> RoutedJudge:  # a reach under the sure decisions: only fusions call
        return RoutedJudge(offline=OfflineJudge(confirm_merges=0.70, confirm_supersedes=0.47),
                           llm=_llm(url, max_calls_per_run=1))

    with fake_openai_server() as server:
        server.chat = fused
        first = metadata(run_dedup(neo4j, tenant, instance, judge=judge(server.base_url)), "merged_nodes")
        calls_first = len(server.chat_calls())
        graph = nodes(neo4j, tenant)
        second = metadata(run_dedup(neo4j, tenant, instance, judge=judge(server.base_url)), "merged_nodes")
        calls_second = len(server.chat_calls()) - calls_first
    assert calls_first == first["resolver_calls"] == 1 and first["resolver_over_budget"] == 1
    assert (first["resolver_calls_left"], first["resolver_failed"]) == (0, 1)
    assert first["merges"] + first["supersedes"] == 1
    waiting = [i for i in ids if "dedup_checked_at" not in graph[i]]
    assert len(waiting) == 2 and all(graph[i]["status"] == "activated" for i in waiting)
    assert calls_second == second["resolver_calls"] == 1 and second["resolver_over_budget"] == 0
    assert first["merges"] + second["merges"] == 1 and first["supersedes"] + second["supersedes"] == 1


#: The offline judge reads "still" as a change (P(contradictory) 0.85, decided): a restatement.
STILL = ["The user works as a nurse at the city hospital.", "The user still works as a nurse at the city hospital."]


@pytest.mark.parametrize(("restatements", "merged"), [("continued", True), ("none", False)])
def test_a_fact_restated_with_still_is_merged_when_the_llm_calls_it_a_repeat(neo4j, instance, tenant,
                                                                             restatements, merged):
    """By default the LLM's "redundant" is taken on a decided change whose newer memory says the
    fact continues: the two memories merge into the one that carries both (nothing superseded);
    without restatements the two judges disagree and both stay active."""
    ids = write_items(neo4j, tenant, STILL)
    with fake_openai_server() as server:
        server.chat = _redundant
        result = run_dedup(neo4j, tenant, instance, judge=RoutedJudge(
            offline=OfflineJudge(), llm=_llm(server.base_url), restatements=restatements))
    [judged] = result.output_for_node("relation_judgments").itertuples()
    assert judged.routed and judged.label == ("redundant" if merged else "independent")
    judging = metadata(result, "relation_judgments")
    assert (judging["llm_restated"], judging["llm_changed"], judging["llm_overruled"]) == \
        ((1, 1, 0) if merged else (0, 1, 0))  # "none": the LLM's "redundant" undoes the change, apart
    meta = metadata(result, "merged_nodes")
    assert (meta["merges"], meta["supersedes"]) == ((1, 0) if merged else (0, 0))
    graph = nodes(neo4j, tenant)
    active = [n["memory"] for n in graph.values() if n["status"] == "activated"]
    assert active == [STILL[1]] if merged else sorted(active) == sorted(STILL)
    assert graph[ids[0]]["status"] == ("archived" if merged else "activated")


#: The offline judge reads a repeat with a detail more as different facts (P(independent) 0.95,
#: no band); a dated pair carrying as much is two events, never sent.
CARRIED = ["The user has a ginger cat called Biltong.",
           "The user's ginger cat Biltong hid under the bed for two days after the move."]
DATED = ["The user went to a pottery class on 12 March.", "The user went to a pottery class on 30 March."]


@pytest.mark.parametrize("near_carried", [0.6, 0.0])
def test_a_repeat_with_a_detail_more_reaches_the_llm_by_its_carried_words(neo4j, instance, tenant, near_carried):
    """With ``near_carried`` the pair one of whose memories carries most of the other's words goes to
    the LLM (the dated pair does not), and its "redundant" merges the two into a text carrying both;
    without it the LLM is never asked and both stay active."""
    fused_text = "The user has a ginger cat called Biltong, who hid under the bed for two days after the move."
    ids = write_items(neo4j, tenant, CARRIED) + write_items(neo4j, f"{tenant}-dated", DATED)

    def answer(body: dict[str, Any]) -> tuple[int, Any]:
        if judge_groups(body) is not None:
            return _redundant(body)
        return 200, chat_answer(json.dumps({"reason": "one cat", "reconcilable": True, "merged": fused_text}))

    with fake_openai_server() as server:
        server.chat = answer

        def judge() -> RoutedJudge:
            return RoutedJudge(offline=OfflineJudge(near_merges=0.80, near_supersedes=0.40), llm=_llm(server.base_url),
                               near_carried=near_carried)

        result = run_dedup(neo4j, tenant, instance, judge=judge())
        dated = run_dedup(neo4j, f"{tenant}-dated", instance, judge=judge())
        asked = _asked(server.chat_calls())
    assert asked == ([(CARRIED[1], frozenset({CARRIED[0]}))] if near_carried else [])
    judging = metadata(result, "relation_judgments")
    assert (judging["pairs_routed_carried"], judging["llm_changed"]) == ((1, 1) if near_carried else (0, 0))
    assert metadata(dated, "relation_judgments")["pairs_routed_carried"] == 0
    assert metadata(dated, "merged_nodes")["merges"] == 0
    graph = nodes(neo4j, tenant)
    active = sorted(n["memory"] for n in graph.values() if n["status"] == "activated")
    assert active == ([fused_text] if near_carried else sorted(CARRIED))
    assert [graph[i]["status"] for i in ids[:2]] == ["archived" if near_carried else "activated"] * 2
