"""Which memories the LLM is asked about, and what its choices do to a placement plan (pure)."""

from __future__ import annotations

import copy

import numpy as np

from mem_assets.reorg.llm_placement import (
    CLOSE_CALL,
    LLM_NO_TOPIC,
    NEW,
    UNPLACED,
    PlacementAnswer,
    answer_schema,
    apply_choices,
    uncertain_offers,
)
from mem_assets.reorg.placement import CyclePlan, SetAside, Topic

A, B = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
CLOSE = np.array([0.72, 0.69, 0.0])  # nearer A, but by a hair
CLEAR = np.array([0.99, 0.05, 0.0])
FAR = np.array([0.0, 0.0, 1.0])


def _forest() -> dict[str, Topic]:
    return {"A": Topic("A", 1, "en", ["a1", "a2", "a3", "a4"], A * 4, 4),
            "B": Topic("B", 1, "en", ["b1", "b2", "b3", "b4"], B * 4, 4)}


def _plan(before: dict[str, Topic]) -> CyclePlan:
    """Offline placement put ``close`` and ``clear`` in A and left ``far`` unplaced."""
    topics = copy.deepcopy(before)
    topics["A"].children += ["close", "clear"]
    topics["A"].vector_sum = topics["A"].vector_sum + CLOSE + CLEAR
    topics["A"].member_count += 2
    plan = CyclePlan(topics=topics, placed={"close": "A", "clear": "A"}, grown={"A"}, refresh={"A"},
                     set_aside={"far": SetAside("no_similar_topic", "A", 0.0, 1)})
    plan.means = {"en": np.zeros(3)}
    return plan


IDS = ["close", "clear", "far"]
VECTORS = np.array([CLOSE, CLEAR, FAR])


def test_only_close_calls_and_unplaced_memories_are_offered_with_their_nearest_topics():
    before = _forest()
    offers = uncertain_offers(before, _plan(before), IDS, VECTORS, ["c", "k", "f"], band=0.05, k=5, max_members=20)
    assert [(o.memory, o.why, o.offline) for o in offers] == [("close", CLOSE_CALL, "A"), ("far", UNPLACED, None)]
    assert offers[0].options == ("A", "B") and offers[0].margin < 0.05
    assert uncertain_offers(before, _plan(before), IDS, VECTORS, ["c", "k", "f"], band=0.0, k=5,
                            max_members=20)[0].memory == "far"


def test_a_move_updates_both_topics_and_a_topic_back_as_it_was_is_not_rewritten():
    before = _forest()
    plan = _plan(before)
    offers = uncertain_offers(before, plan, IDS, VECTORS, ["c", "k", "f"], 0.05, 5, 20)
    revision = apply_choices(before, plan, offers, {"close": "B", "far": "B"}, IDS, VECTORS, 20, 0.25)
    assert revision.changed == 2
    assert plan.topics["A"].children == ["a1", "a2", "a3", "a4", "clear"]
    assert np.allclose(plan.topics["A"].vector_sum, A * 4 + CLEAR) and plan.topics["A"].member_count == 5
    assert plan.topics["B"].children == ["b1", "b2", "b3", "b4", "close", "far"]
    assert np.allclose(plan.topics["B"].vector_sum, B * 4 + CLOSE + FAR) and plan.topics["B"].member_count == 6
    assert plan.placed == {"clear": "A", "close": "B", "far": "B"} and plan.set_aside == {}
    assert plan.grown == {"A", "B"}
    assert plan.refresh == {"A", "B"}  # A: 1 of 4 memories new (refresh fraction 0.25), B: 2 of 4


def test_new_unplaces_a_close_call_and_a_full_topic_takes_no_one():
    before = _forest()
    plan = _plan(before)
    offers = uncertain_offers(before, plan, IDS, VECTORS, ["c", "k", "f"], 0.05, 5, 20)
    revision = apply_choices(before, plan, offers, {"close": NEW, "far": "B"}, IDS, VECTORS, 4, 0.25)
    assert revision.changed == 1 and revision.full == 1
    assert plan.set_aside["close"].reason == LLM_NO_TOPIC and "close" not in plan.placed
    assert plan.set_aside["far"].reason == "no_similar_topic" and plan.topics["B"].member_count == 4
    assert plan.topics["A"].children == ["a1", "a2", "a3", "a4", "clear"]


def test_a_topic_left_exactly_as_before_drops_out_of_the_plan():
    before = _forest()
    plan = _plan(before)
    plan.topics["A"].children.remove("clear")
    plan.topics["A"].vector_sum = plan.topics["A"].vector_sum - CLEAR
    plan.topics["A"].member_count -= 1
    del plan.placed["clear"]
    offers = uncertain_offers(before, plan, ["close"], VECTORS[:1], ["c"], 0.05, 5, 20)
    apply_choices(before, plan, offers, {"close": NEW}, ["close"], VECTORS[:1], 20, 0.25)
    assert "A" not in plan.grown and "A" not in plan.refresh
    assert np.allclose(plan.topics["A"].vector_sum, A * 4)


def test_answers_are_read_in_the_shapes_models_give_and_the_schema_names_only_offered_ids():
    assert PlacementAnswer.model_validate({"choice": "t1"}).choices[0].memory == 0
    assert PlacementAnswer.model_validate([{"memory": 1, "choice": NEW}]).choices[0].choice == NEW
    schema = answer_schema(2, ["t1", "t2"])
    item = schema["properties"]["choices"]["items"]
    assert item["properties"]["choice"]["enum"] == ["t1", "t2", NEW]
    assert schema["properties"]["choices"]["minItems"] == schema["properties"]["choices"]["maxItems"] == 2
