"""An LLM places only the memories offline placement is unsure of, and names a topic only when its
membership changed: through Dagster on the real Neo4j, the model a local OpenAI-compatible server."""

from __future__ import annotations

import json

import pandas as pd

from mem_assets.reorg.llm_placement import NEW, PLACEMENT_SYSTEM, LLMPlacer
from mem_assets.reorg.summarizers import LLMSummarizer
from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_writer import TopicWriter
from mem_resources.llm import OpenAIChatResource
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.fake_openai import chat_answer
from tests.support.reorg_graph import EMBEDDER, graph_counts, materialization_metadata, run_reorg, write_memories
from tests.support.topic_corpus import topic_memories

ANY_BATCH = {"ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}
CLEAR = "I cooked pasta with garlic and basil in the kitchen for dinner tonight"
CODE_TRIP = "Wrote Python code for the hotel booking of my trip"
UNSURE = ["My sister moved to a flat with a small balcony garden", CODE_TRIP,
          "The user renewed the car insurance policy for next year"]


def _base(neo4j: Neo4jResource, tenant: str, instance, summarizer=None) -> None:
    """Three English topics (cooking, travel, programming) made offline, then four new memories."""
    texts = [text for topic, text in topic_memories(per_topic=30)
             if topic in {"cooking", "travel", "programming"} and language(text) == "en"]
    write_memories(neo4j, tenant, texts)
    assert run_reorg(neo4j, tenant, instance, summarizer).success


def _placement_calls(model) -> list[dict]:
    return [json.loads(body["messages"][1]["content"]) for body in model.chat_calls()
            if body["messages"][0]["content"] == PLACEMENT_SYSTEM]


def _placer(model, **limits) -> LLMPlacer:
    return LLMPlacer(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0), **limits)


def _topic_of(neo4j: Neo4jResource, tenant: str, text: str) -> tuple[str | None, str | None]:
    with neo4j.session() as session:
        record = session.run(
            "MATCH (m:MemoryItem {user_name: $tenant, memory: $text}) "
            "OPTIONAL MATCH (t:MemoryItem {type: 'topic', status: 'activated'})-[:PARENT]->(m) "
            "RETURN t.id AS topic, m.reorg_set_aside_reason AS reason", tenant=tenant, text=text).single()
    return record["topic"], record["reason"]


def _answer(choose):
    """A model answering each memory of a placement request with ``choose(text, topics)``."""
    def answer(body):
        payload = json.loads(body["messages"][1]["content"])
        return 200, chat_answer(json.dumps({"choices": [
            {"memory": i, "choice": choose(text, payload["topics"]), "reason": "test"}
            for i, text in enumerate(payload["memories"])]}))
    return answer


def _python_topic(topics: list[dict]) -> str:
    return next(t["id"] for t in topics if "Python" in t["name"])


def test_uncertain_memories_go_to_the_model_and_land_where_it_says(neo4j, tenant, instance, model):
    _base(neo4j, tenant, instance)
    write_memories(neo4j, tenant, [CLEAR, *UNSURE])
    model.chat = _answer(lambda text, topics: _python_topic(topics) if text == CODE_TRIP else NEW)

    result = run_reorg(neo4j, tenant, instance, run_config=ANY_BATCH, topic_placer=_placer(model))

    requests = _placement_calls(model)
    assert len(requests) == 1
    request = requests[0]
    assert set(request) == {"memories", "topics"}
    assert sorted(request["memories"]) == sorted(UNSURE)  # the clear one never reaches the model
    assert {frozenset(topic) for topic in request["topics"]} == {frozenset({"id", "name", "summary", "examples"})}
    assert all(topic["examples"] and topic["name"] for topic in request["topics"])
    python_topic = _python_topic(request["topics"])
    assert _topic_of(neo4j, tenant, CODE_TRIP) == (python_topic, None)
    assert _topic_of(neo4j, tenant, CLEAR)[0] is not None
    metadata = materialization_metadata(result, "memory_clusters")
    assert metadata["llm_placement_calls"] == 1
    assert metadata["llm_placement_routed"] == 3
    assert metadata["llm_placement_changed"] == 1
    assert metadata["llm_placement_refused"] == metadata["llm_placement_over_budget"] == 0
    assert metadata["llm_placement_prompt_tokens"] == 11 and metadata["llm_placement_completion_tokens"] == 7
    for text in UNSURE:
        if text != CODE_TRIP:
            assert _topic_of(neo4j, tenant, text)[0] is None

    before = graph_counts(neo4j, tenant)
    calls = len(model.chat_calls())
    assert run_reorg(neo4j, tenant, instance, topic_placer=_placer(model)).success
    assert len(model.chat_calls()) == calls
    assert graph_counts(neo4j, tenant) == before


def test_a_topic_not_offered_is_refused_and_offline_placement_kept(neo4j, tenant, instance, model):
    _base(neo4j, tenant, instance)
    write_memories(neo4j, tenant, [CLEAR, *UNSURE])
    model.chat = _answer(lambda text, topics: "mem:not-offered")

    result = run_reorg(neo4j, tenant, instance, run_config=ANY_BATCH, topic_placer=_placer(model))

    metadata = materialization_metadata(result, "memory_clusters")
    assert metadata["llm_placement_calls"] == 1
    assert metadata["llm_placement_refused"] == 3 and metadata["llm_placement_changed"] == 0
    assert metadata["left_unplaced"] == metadata["llm_placement_deferred"] == 3
    for text in UNSURE:  # unplaced, as offline placement left them, and deferred: the next run asks again
        assert _topic_of(neo4j, tenant, text) == (None, None)
    assert _deferred(neo4j, tenant) == set(UNSURE)


def test_beyond_the_budget_offline_placement_stands_and_is_counted(neo4j, tenant, instance, model):
    _base(neo4j, tenant, instance)
    write_memories(neo4j, tenant, [CLEAR, *UNSURE])
    model.chat = _answer(lambda text, topics: _python_topic(topics))

    result = run_reorg(neo4j, tenant, instance, run_config=ANY_BATCH,
                       topic_placer=_placer(model, batch_size=1, max_calls_per_run=1))

    asked = [text for request in _placement_calls(model) for text in request["memories"]]
    metadata = materialization_metadata(result, "memory_clusters")
    assert len(asked) == 1 and metadata["llm_placement_calls"] == 1
    assert metadata["llm_placement_over_budget"] == 2 and metadata["llm_placement_calls_left"] == 0
    assert metadata["llm_placement_changed"] == 1 and metadata["left_unplaced"] == 2
    for text in UNSURE:
        assert (_topic_of(neo4j, tenant, text)[0] is not None) == (text in asked)


def _summaries(neo4j: Neo4jResource, tenant: str) -> dict[str, tuple]:
    with neo4j.session() as session:
        return {r["id"]: (r["key"], r["version"]) for r in session.run(
            "MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'}) "
            "RETURN t.id AS id, t.key AS key, coalesce(t.version, 1) AS version", tenant=tenant)}


def _names_in_order(skip: int | None = None):
    """Answers a naming call with "Topic <n>" for each topic asked, n counting every topic named so
    far; the topic at position ``skip`` of each call is left out of the answer."""
    named = []

    def answer(body):
        topics = json.loads(body["messages"][1]["content"])["topics"]
        entries = []
        for position, topic in enumerate(topics):
            named.append(topic["id"])
            if position != skip:
                entries.append({"id": topic["id"], "key": f"Topic {len(named)}",
                                "value": "Memories that belong together.", "tags": [], "background": ""})
        return 200, chat_answer(json.dumps({"topics": entries}))
    return answer


def test_names_are_regenerated_only_when_membership_changed(neo4j, tenant, instance, model):
    model.chat = _names_in_order()
    summarizer = LLMSummarizer(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0), topics_per_call=1)
    _base(neo4j, tenant, instance, summarizer)
    named = _summaries(neo4j, tenant)
    assert len(model.chat_calls()) == len(named) == 3

    # Every topic due for a summary but none changed (a write repeated, a plan revised back): no call.
    with neo4j.session() as session:
        rows = session.run(
            "MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'})-[:PARENT]->(m) "
            "RETURN t.id AS id, t.memory_type AS memory_type, t.reorg_centroid AS centroid, "
            "t.reorg_centroid_space AS space, t.reorg_language AS language, collect(m.id) AS children",
            tenant=tenant).data()
    plan = pd.DataFrame([{"kind": "topic", "memory_type": r["memory_type"], "id": r["id"], "level": 1,
                          "language": r["language"], "parent": None, "children": r["children"], "added": [],
                          "removed": [], "member_count": len(r["children"]), "members_before": len(r["children"]),
                          "centroid": r["centroid"], "space": r["space"], "action": "grown", "refresh": True}
                         for r in rows])
    outcome = TopicWriter(tenant, neo4j, EMBEDDER, summarizer, log=_Log()).run(
        plan, pd.DataFrame(columns=["id", "memory_type", "memory"]), 600)
    assert outcome.summaries_kept == 3 and outcome.usage.calls == 0
    assert len(model.chat_calls()) == 3
    assert _summaries(neo4j, tenant) == named

    # New memories change one topic's membership: that topic alone is named again.
    write_memories(neo4j, tenant, [f"In the kitchen I cook {dish} with garlic from a family recipe, again"
                                   for dish in ("risotto", "curry", "soup", "lasagna")])
    result = run_reorg(neo4j, tenant, instance, summarizer, run_config=ANY_BATCH)
    renamed = {tid for tid, value in _summaries(neo4j, tenant).items() if named.get(tid) != value}
    assert materialization_metadata(result, "summary_parents")["llm_calls"] == len(model.chat_calls()) - 3 == 1
    assert len(renamed) == 1


def _naming(neo4j: Neo4jResource, tenant: str) -> dict[str, tuple]:
    """Each topic's key, version, membership digest and whether it is owed an LLM summary."""
    with neo4j.session() as session:
        return {r["id"]: (r["key"], r["version"], r["digest"], r["owed"]) for r in session.run(
            "MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'}) "
            "RETURN t.id AS id, t.key AS key, coalesce(t.version, 1) AS version, "
            "t.reorg_summary_digest AS digest, t.reorg_summary_owed AS owed", tenant=tenant)}


def test_several_topics_are_named_in_one_call_and_one_left_out_keeps_its_draft(neo4j, tenant, instance, model):
    model.chat = _names_in_order(skip=1)
    summarizer = LLMSummarizer(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0), topics_per_call=6)
    _base(neo4j, tenant, instance, summarizer)
    [call] = model.chat_calls()
    asked = json.loads(call["messages"][1]["content"])["topics"]
    assert [topic["id"] for topic in asked] == ["t1", "t2", "t3"]
    assert call["response_format"]["json_schema"]["schema"]["properties"]["topics"]["minItems"] == 3
    names = _naming(neo4j, tenant)
    keys = [key for key, *_ in names.values()]
    assert sorted(key for key in keys if key.startswith("Topic ")) == ["Topic 1", "Topic 3"]
    assert len([key for key in keys if not key.startswith("Topic ")]) == 1  # the left-out one: its draft
    # the left-out topic keeps the offline name with its digest, like an unusable answer: no retry
    assert all(digest is not None and owed is None for _, _, digest, owed in names.values())
    before = graph_counts(neo4j, tenant)
    metadata = materialization_metadata(run_reorg(neo4j, tenant, instance, summarizer), "summary_parents")
    assert metadata["llm_calls"] == 0 and len(model.chat_calls()) == 1 and graph_counts(neo4j, tenant) == before


def test_summaries_beyond_the_budget_stay_offline_and_are_named_by_the_next_run(neo4j, tenant, instance, model):
    model.chat = _names_in_order()

    def summarizer(calls: int) -> LLMSummarizer:
        return LLMSummarizer(chat=OpenAIChatResource(base_url=model.base_url, max_retries=0),
                             max_calls_per_run=calls, topics_per_call=1)

    texts = [text for topic, text in topic_memories(per_topic=30)
             if topic in {"cooking", "travel", "programming"} and language(text) == "en"]
    write_memories(neo4j, tenant, texts)
    metadata = materialization_metadata(run_reorg(neo4j, tenant, instance, summarizer(1)), "summary_parents")
    assert len(model.chat_calls()) == metadata["llm_calls"] == 1
    assert metadata["summaries_over_budget"] == metadata["summaries_owed_left"] == 2
    assert metadata["llm_summary_calls_left"] == 0 and metadata["llm_fallbacks_to_offline"] == 0
    named = _naming(neo4j, tenant)
    assert len(named) == 3
    llm = [tid for tid, (key, _, digest, owed) in named.items() if key == "Topic 1"]
    assert len(llm) == 1 and named[llm[0]][2] is not None and named[llm[0]][3] is None
    owed = sorted(set(named) - set(llm))
    for tid in owed:  # the offline name, and no digest claiming the LLM's
        key, version, digest, flag = named[tid]
        assert key and not key.startswith("Topic ") and digest is None and flag is True

    # Nothing new: the next run with budget names an owed topic, keeping its members.
    before = graph_counts(neo4j, tenant)
    metadata = materialization_metadata(run_reorg(neo4j, tenant, instance, summarizer(1)), "summary_parents")
    assert metadata["llm_calls"] == metadata["summaries_owed_named"] == 1 and metadata["summaries_owed_left"] == 1
    assert metadata["topics_created"] == metadata["topics_grown"] == 0
    metadata = materialization_metadata(run_reorg(neo4j, tenant, instance, summarizer(0)), "summary_parents")
    assert metadata["llm_calls"] == metadata["summaries_owed_named"] == 1 and metadata["summaries_owed_left"] == 0
    assert metadata["llm_summary_calls_left"] == "no limit"
    renamed = _naming(neo4j, tenant)
    assert {key for key, *_ in renamed.values()} == {"Topic 1", "Topic 2", "Topic 3"}
    assert renamed[llm[0]] == named[llm[0]]
    for tid in owed:  # the offline summary went into history, the digest is now the LLM summary's
        key, version, digest, flag = renamed[tid]
        assert version == named[tid][1] + 1 and digest is not None and flag is None
    assert graph_counts(neo4j, tenant) == before

    # Nothing new, nothing owed: no call, nothing changes.
    metadata = materialization_metadata(run_reorg(neo4j, tenant, instance, summarizer(0)), "summary_parents")
    assert metadata["llm_calls"] == 0 and len(model.chat_calls()) == 3
    assert _naming(neo4j, tenant) == renamed and graph_counts(neo4j, tenant) == before


def _deferred(neo4j: Neo4jResource, tenant: str) -> set[str]:
    with neo4j.session() as session:
        return {r["memory"] for r in session.run(
            "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.reorg_deferred_at IS NOT NULL "
            "RETURN m.memory AS memory", tenant=tenant)}


def test_an_undecided_memory_is_asked_next_run_and_one_answered_new_is_not_asked_again(
        neo4j, tenant, instance, model):
    _base(neo4j, tenant, instance)
    write_memories(neo4j, tenant, [CLEAR, *UNSURE])
    model.chat = _answer(lambda text, topics: NEW)

    result = run_reorg(neo4j, tenant, instance, run_config=ANY_BATCH,
                       topic_placer=_placer(model, batch_size=1, max_calls_per_run=1))

    [first] = [text for request in _placement_calls(model) for text in request["memories"]]
    metadata = materialization_metadata(result, "memory_clusters")
    assert metadata["llm_placement_over_budget"] == metadata["llm_placement_deferred"] == 2
    assert materialization_metadata(result, "summary_parents")["deferred_to_next_run"] == 2
    assert _topic_of(neo4j, tenant, first)[0] is None  # answered "new": set aside, offline's reason kept
    assert _deferred(neo4j, tenant) == set(UNSURE) - {first}  # not set aside: the next run takes them up

    # Nothing new, but work left: the next run (default batch size) asks about the two left over.
    model.chat = _answer(lambda text, topics: _python_topic(topics) if text == CODE_TRIP else NEW)
    result = run_reorg(neo4j, tenant, instance, topic_placer=_placer(model))
    asked = [text for request in _placement_calls(model)[1:] for text in request["memories"]]
    assert set(UNSURE) - {first} <= set(asked)
    assert not _deferred(neo4j, tenant)
    for text in UNSURE:
        topic, reason = _topic_of(neo4j, tenant, text)
        assert (topic is not None) == (text == CODE_TRIP) and (reason is not None) == (text != CODE_TRIP)

    # Nothing new, nothing left: the memories the model put apart ("new") are not asked again.
    before, calls = graph_counts(neo4j, tenant), len(model.chat_calls())
    assert run_reorg(neo4j, tenant, instance, topic_placer=_placer(model)).success
    assert len(model.chat_calls()) == calls and graph_counts(neo4j, tenant) == before


class _Log:
    def warning(self, message: str) -> None:
        raise AssertionError(message)

