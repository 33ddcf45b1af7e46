"""Each language's topics in its topic encoder's space (e5 carried) on the real Neo4j: a memory
that gets its kept vector (e5 ⊕ English encoder ⊕ Chinese encoder) gets it once, on its node, and
every later cycle (new arrivals, a rebuild, a split) reuses it; in a cycle of one language the
kept vector has no e5 part (no cross-language offer can read it), and a tenant's first cycle of
two languages gives the kept vectors it reads their e5 part, once; topics of an older space move
when they next grow. The placement cascade (``cascade``) decides who gets one: a memory
clearly in a topic in the embedder's space gets none; the kept-vector tests below turn it off."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from mem_assets.reorg.placement_plan import MemberStore
from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_vectors import (
    COMBINED_SPACE,
    E5_SPACE,
    ENCODER_SPACES,
    KEPT_DIMENSION,
    ONE_LANGUAGE_SPACES,
    PARTS,
    TopicVectorsResource,
    in_spaces,
    is_kept_key,
    kept_embed,
    space_dimension,
    vector_key,
)
from mem_resources.model_passes import from_metadata
from mem_resources.neo4j_resource import Neo4jResource
from tests.support.reorg_graph import (
    EMBEDDER,
    REORG_ASSETS,
    graph_counts,
    materialization_metadata,
    reorg_resources,
    run_reorg,
    write_memories,
)

ITEMS = Path(__file__).resolve().parents[1] / "research" / "data" / "eval" / "topics.jsonl"
#: Every memory pays for its kept vector, as before the cascade.
CASCADE_OFF = TopicVectorsResource(thresholds_file=str(Path(__file__).parent / "support" / "cascade_off.json"))
THEMES = ("tea", "calligraphy", "badminton")
ENGLISH_THEMES = ("guitar", "gardening", "sleep")


def _texts(themes: tuple[str, ...], batch: int, lang: str) -> list[str]:
    rows = [json.loads(line) for line in ITEMS.read_text(encoding="utf-8").splitlines()]
    return [row["text"] for row in rows if row["topic"] in themes and row["batch"] == batch
            and language(row["text"]) == lang]


def _chinese(batch: int) -> list[str]:
    return _texts(THEMES, batch, "zh")


def _stored(neo4j: Neo4jResource, tenant: str) -> dict[str, tuple[str | None, list[float] | None]]:
    with neo4j.session() as session:
        rows = session.run(
            """
            MATCH (m:MemoryItem {user_name: $tenant}) WHERE coalesce(m.type, '') <> 'topic'
            RETURN m.memory AS memory, m.reorg_vector_key AS key, m.reorg_vector AS vector
            """, tenant=tenant).data()
    return {row["memory"]: (row["key"], row["vector"]) for row in rows}


def _offered_abroad(stored: dict[str, tuple[str | None, list[float] | None]], texts: list[str]) -> list[str]:
    """The texts whose kept vector has the other language's encoder part: made only when the
    memory was offered to that language's topics. Every other text's names e5 and its own
    language's encoder."""
    own = {text: vector_key(text, ("e5", language(text))) for text in texts}
    assert all(stored[text][0] in (own[text], vector_key(text, PARTS)) for text in texts)
    return [text for text in texts if stored[text][0] != own[text]]


def _items(passes: dict, model: str) -> int:
    return passes[model].items if model in passes else 0


def _topics(neo4j: Neo4jResource, tenant: str) -> list[dict]:
    with neo4j.session() as session:
        return session.run(
            """
            MATCH (t:MemoryItem {user_name: $tenant, type: 'topic', status: 'activated'})
            RETURN t.id AS id, t.reorg_language AS language, t.reorg_centroid_space AS space,
                   size(t.reorg_centroid) AS dimension
            """, tenant=tenant).data()


def run_reorg_with(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance,
                   vectors: TopicVectorsResource) -> dg.ExecuteInProcessResult:
    instance.add_dynamic_partitions("tenants", [tenant])
    return dg.materialize(REORG_ASSETS, partition_key=tenant, instance=instance,
                          resources={**reorg_resources(neo4j), "topic_vectors": vectors})


def _second_batch_reads_kept_vectors(neo4j: Neo4jResource, tenant: str, instance: dg.DagsterInstance,
                                     first: list[str], second: list[str],
                                     stored: dict[str, tuple[str | None, list[float] | None]]
                                     ) -> tuple[dg.ExecuteInProcessResult, dict]:
    """Reorganize after a second batch: only its memories get e5 vectors; the first batch's kept
    vectors are read back unchanged, never made twice. Returns the run and the stored vectors."""
    write_memories(neo4j, tenant, second)
    again = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}, topic_vectors=CASCADE_OFF)
    assert again.success
    assert materialization_metadata(again, "memory_clusters")["kept_vectors_made"] == len(second)
    after = _stored(neo4j, tenant)
    assert all(np.array_equal(after[text][1], stored[text][1]) for text in first), "never embedded twice"
    return again, after


def test_e5_vectors_are_made_once_and_reused_by_later_cycles(neo4j, tenant, instance):
    first, second = _chinese(1), _chinese(2)
    english = ["I went for a long run along the river this morning.",
               "My running shoes are wearing out after 600 km."]
    assert len(first) >= 20 and len(second) >= 5
    write_memories(neo4j, tenant, first + english)
    result = run_reorg(neo4j, tenant, instance, topic_vectors=CASCADE_OFF)
    assert result.success
    made = materialization_metadata(result, "memory_clusters")
    assert made["kept_vectors_made"] == len(first + english)
    stored = _stored(neo4j, tenant)
    assert all(len(stored[text][1]) == KEPT_DIMENSION for text in first + english)
    abroad = _offered_abroad(stored, first + english)
    passes = from_metadata(made)
    assert passes["e5 query"].items == len(first + english)
    assert passes["topic-encoder-zh-v1"].items == len(first) + sum(text in abroad for text in english)
    assert _items(passes, "topic-encoder-v1") == len(english) + sum(text in abroad for text in first)
    assert sum(text in abroad for text in first) < len(first), "the English encoder only for offered memories"
    topics = _topics(neo4j, tenant)
    chinese = [t for t in topics if t["language"] == "zh"]
    chinese_space = ENCODER_SPACES["zh"]
    assert chinese and all(t["space"] == chinese_space and t["dimension"] == space_dimension(chinese_space, 0)
                           for t in chinese)

    _, after = _second_batch_reads_kept_vectors(neo4j, tenant, instance, first, second, stored)

    rewritten = first[0] + "（后来又补充了一句）"
    with neo4j.session() as session:
        session.run("MATCH (m:MemoryItem {user_name: $tenant, memory: $old}) SET m.memory = $new",
                    tenant=tenant, old=first[0], new=rewritten).consume()
    rebuild = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"rebuild": True}}}}, topic_vectors=CASCADE_OFF)
    assert rebuild.success
    assert materialization_metadata(rebuild, "reorg_candidates")["candidates"] == \
        len(first) + len(second) + len(english)
    assert materialization_metadata(rebuild, "memory_clusters")["kept_vectors_made"] == 1, \
        "only the memory whose text changed is embedded again"
    final = _stored(neo4j, tenant)
    _offered_abroad(final, [rewritten])
    kept = [text for text in after if text != first[0]]
    assert set(kept) == set(final) - {rewritten}
    completed = [text for text in kept if final[text] != after[text]]
    assert set(completed) <= set(_offered_abroad(final, kept)), "a kept vector changes only to gain a part"
    for text in completed:
        before, now = np.asarray(after[text][1]), np.asarray(final[text][1])
        assert np.array_equal(now[before != 0], before[before != 0])


def test_a_clear_memory_is_placed_without_the_models_and_an_uncertain_one_pays(neo4j, tenant, instance, tmp_path):
    first = _chinese(1)
    write_memories(neo4j, tenant, first)
    assert run_reorg(neo4j, tenant, instance, topic_vectors=CASCADE_OFF).success
    band = tmp_path / "band.json"
    band.write_text(json.dumps({"cascade": {"clear_similarity": 0.3, "clear_margin": 0.05}}), encoding="utf-8")
    shipped_band = TopicVectorsResource(thresholds_file=str(band))

    clear, unsure = first[0] + "，真的。", "量子纠错码的阈值定理让我想了一整夜。"
    write_memories(neo4j, tenant, [clear, unsure])
    second = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}, topic_vectors=shipped_band)
    assert second.success
    metadata = materialization_metadata(second, "memory_clusters")
    routes = {row["id"]: row for row in second.output_for_node("memory_clusters").to_dict("records")
              if row["kind"] == "route"}
    stage = {text: routes[mid]["reason"] for mid, text in _ids(neo4j, tenant, [clear, unsure]).items()}
    assert stage[clear] == "clear" and stage[unsure] in ("no_topic_fits", "best_two_close")
    assert (metadata["cascade_cheap"], metadata["cascade_encoder"], metadata["kept_vectors_made"]) == (1, 1, 1)
    stored = _stored(neo4j, tenant)
    assert stored[clear] == (None, None), "the clear memory got no kept vector"
    assert stored[unsure][0] == vector_key(unsure, ("zh",)), "one language: its own encoder only"
    with neo4j.session() as session:
        home = session.run("MATCH (t:MemoryItem {user_name: $tenant})-[:PARENT]->(m:MemoryItem {memory: $text}) "
                           "RETURN collect(t.id) AS topics", tenant=tenant, text=clear).single()["topics"]
    assert home, "the clear memory is placed"
    assert all(e.passed for e in second.get_asset_check_evaluations())

    before = graph_counts(neo4j, tenant)
    idle = run_reorg(neo4j, tenant, instance, topic_vectors=shipped_band)
    assert materialization_metadata(idle, "reorg_candidates")["candidates"] == 0
    assert materialization_metadata(idle, "memory_clusters")["kept_vectors_made"] == 0
    assert graph_counts(neo4j, tenant) == before


def _ids(neo4j: Neo4jResource, tenant: str, texts: list[str]) -> dict[str, str]:
    with neo4j.session() as session:
        rows = session.run("MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.memory IN $texts "
                           "RETURN m.id AS id, m.memory AS memory", tenant=tenant, texts=texts).data()
    return {row["id"]: row["memory"] for row in rows}


def test_e5_work_per_run_is_bounded_and_the_rest_waits_for_the_next_run(neo4j, tenant, instance):
    first = _chinese(1)
    write_memories(neo4j, tenant, first)
    capped = {"ops": {"reorg_candidates": {"config": {"e5_max_per_run": 10}}}}
    stored, deferred = [], []
    for _ in range(3):
        result = run_reorg(neo4j, tenant, instance, run_config=capped)
        stored.append(materialization_metadata(result, "memory_clusters")["kept_vectors_made"])
        deferred.append(materialization_metadata(result, "reorg_candidates")["e5_deferred_to_next_run"])
        with neo4j.session() as session:
            waiting = session.run(
                "MATCH (m:MemoryItem {user_name: $tenant}) WHERE m.reorg_deferred_at IS NOT NULL "
                "RETURN count(m) AS n, count(m.reorg_vector) AS with_vector", tenant=tenant).single()
        assert (waiting["n"], waiting["with_vector"]) == (deferred[-1], 0)
    assert stored == [10, 10, len(first) - 20]
    assert deferred == [len(first) - 10, len(first) - 20, 0]
    assert all(key == vector_key(text, ("zh",)) for text, (key, _) in _stored(neo4j, tenant).items())

    before = graph_counts(neo4j, tenant)
    idle = run_reorg(neo4j, tenant, instance)
    assert materialization_metadata(idle, "reorg_candidates")["candidates"] == 0
    assert materialization_metadata(idle, "memory_clusters")["kept_vectors_made"] == 0
    assert graph_counts(neo4j, tenant) == before


@pytest.mark.parametrize(("before_space", "before"), [
    ("embedding", TopicVectorsResource(combined_languages=["en"])),
    (E5_SPACE, TopicVectorsResource(e5_languages=["zh"], combined_languages=["en"]))],
    ids=["embedder space", "e5 space (the default until the Chinese encoder)"])
def test_chinese_topics_of_an_older_space_move_to_the_encoder_space_when_they_next_grow(
        neo4j, tenant, instance, before_space, before):
    write_memories(neo4j, tenant, _chinese(1))
    assert run_reorg_with(neo4j, tenant, instance, before).success
    assert {t["space"] for t in _topics(neo4j, tenant)} == {before_space}

    write_memories(neo4j, tenant, _chinese(2))
    after = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}, topic_vectors=CASCADE_OFF)
    assert after.success
    grown = {row["id"] for row in after.output_for_node("memory_clusters").to_dict("records")
             if row["kind"] == "topic"}
    assert grown
    topics = {t["id"]: t for t in _topics(neo4j, tenant)}
    chinese_space = ONE_LANGUAGE_SPACES["zh"]
    assert all(topics[tid]["space"] == chinese_space and topics[tid]["dimension"] == space_dimension(chinese_space, 0)
               for tid in grown)
    stored = _stored(neo4j, tenant)
    assert all(is_kept_key(key, text, np.asarray(vector)) for text, (key, vector) in stored.items()), \
        "members of old topics got their kept vector when their centroid was recomputed, kept for later cycles"


def test_english_topics_live_in_the_topic_encoder_space_and_reuse_kept_vectors(neo4j, tenant, instance):
    first, second = _texts(ENGLISH_THEMES, 1, "en"), _texts(ENGLISH_THEMES, 2, "en")
    assert len(first) >= 20 and len(second) >= 5
    ids = write_memories(neo4j, tenant, first)
    result = run_reorg(neo4j, tenant, instance, topic_vectors=CASCADE_OFF)
    assert result.success
    assert materialization_metadata(result, "memory_clusters")["kept_vectors_made"] == len(first)
    english = ONE_LANGUAGE_SPACES["en"]
    read_back = MemberStore(neo4j, EMBEDDER, tenant, english, TopicVectorsResource()).matrix(ids)
    placed_in = np.stack(in_spaces([english] * len(first), [None] * len(first), list(kept_embed(first, ("en",)))))
    assert np.allclose(read_back, placed_in, atol=1e-5), \
        "members read back (splits, promotions) are in the space they were placed in"
    topics = _topics(neo4j, tenant)
    assert topics and all(t["space"] == english and t["dimension"] == space_dimension(COMBINED_SPACE, 0)
                          for t in topics)
    stored = _stored(neo4j, tenant)

    again, _ = _second_batch_reads_kept_vectors(neo4j, tenant, instance, first, second, stored)
    assert materialization_metadata(again, "memory_clusters")["placed"] > 0
    assert all(t["space"] == english for t in _topics(neo4j, tenant))
    assert all(e.passed for e in again.get_asset_check_evaluations())


def test_a_tenant_of_one_language_pays_no_e5_until_a_second_language_arrives(neo4j, tenant, instance):
    english, chinese = _texts(ENGLISH_THEMES, 1, "en"), _chinese(1)
    write_memories(neo4j, tenant, english)
    first = run_reorg(neo4j, tenant, instance, topic_vectors=CASCADE_OFF)
    assert first.success
    passes = from_metadata(materialization_metadata(first, "memory_clusters"))
    assert set(passes) & {"e5 query", "topic-encoder-zh-v1"} == set(), "one language: its own encoder only"
    assert passes["topic-encoder-v1"].items == len(english)
    assert {t["space"] for t in _topics(neo4j, tenant)} == {ONE_LANGUAGE_SPACES["en"]}
    assert all(key == vector_key(text, ("en",)) for text, (key, _) in _stored(neo4j, tenant).items())

    write_memories(neo4j, tenant, chinese)
    second = run_reorg(neo4j, tenant, instance, run_config={
        "ops": {"reorg_candidates": {"config": {"min_group_size": 1}}}}, topic_vectors=CASCADE_OFF)
    assert second.success
    made = materialization_metadata(second, "memory_clusters")
    passes = from_metadata(made)
    stored = _stored(neo4j, tenant)
    abroad = _offered_abroad(stored, english + chinese)
    assert len(abroad) < len(english + chinese), "the other language's encoder only for offered memories"
    assert (made["kept_vectors_made"], made["kept_vectors_completed"]) == (len(chinese), len(english) + len(abroad))
    assert passes["e5 query"].items == len(chinese) + len(english), "each memory's e5 part made once"
    assert _items(passes, "topic-encoder-v1") == sum(text in abroad for text in chinese), \
        "the English memories' English part is kept"
    assert passes["topic-encoder-zh-v1"].items == len(chinese) + sum(text in abroad for text in english)
    written = {row["space"] for row in second.output_for_node("memory_clusters").to_dict("records")
               if row["kind"] == "topic"}
    assert written and written <= {ENCODER_SPACES["en"], ENCODER_SPACES["zh"]}
    assert all(e.passed for e in second.get_asset_check_evaluations())

    idle = run_reorg(neo4j, tenant, instance, topic_vectors=CASCADE_OFF)
    assert from_metadata(materialization_metadata(idle, "memory_clusters")) == {}
