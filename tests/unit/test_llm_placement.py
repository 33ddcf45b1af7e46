"""Which memories the LLM is asked about, and what its choices do to a placement plan (pure)."""

from __future__ import annotations

import copy

import numpy as np

from mem_assets.reorg.llm_placement import (
    CLOSE_CALL,
    GROUP,
    LLM_NO_TOPIC,
    NEW,
    UNPLACED,
    Offer,
    PlacementAnswer,
    answer_schema,
    apply_choices,
    group_offers,
    group_options,
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


def _shift_clear(plan: CyclePlan, to: str | None) -> None:
    """Take ``clear`` out of A and, with ``to``, put it in that topic instead."""
    source = plan.topics["A"]
    source.children.remove("clear")
    source.vector_sum, source.member_count = source.vector_sum - CLEAR, source.member_count - 1
    if to is not None:
        target = plan.topics[to]
        target.children.append("clear")
        target.vector_sum, target.member_count = target.vector_sum + CLEAR, target.member_count + 1


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
    _shift_clear(plan, None)
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


def test_a_memory_offline_put_in_a_topic_not_its_nearest_is_asked_about_whatever_its_margin():
    before = _forest()
    plan = _plan(before)
    _shift_clear(plan, "B")
    offers = uncertain_offers(before, plan, IDS, VECTORS, ["c", "k", "f"], band=0.0, k=1, max_members=20)
    stray = next(o for o in offers if o.memory == "clear")
    assert stray.why == CLOSE_CALL and stray.offline == "B" and stray.options == ("B",)  # its own always offered
    assert "B" in next(o for o in uncertain_offers(before, plan, IDS, VECTORS, ["c", "k", "f"], band=0.0, k=5,
                                                   max_members=20) if o.memory == "clear").options


# -- groups made in the run ---------------------------------------------------------------------

E = np.eye(4)


def _topic(tid: str, rows: dict[str, np.ndarray]) -> Topic:
    return Topic(tid, 1, "en", list(rows), np.sum(list(rows.values()), axis=0), len(rows))


def _scene() -> tuple[dict[str, Topic], CyclePlan, list[str], np.ndarray]:
    """An existing topic along axis 0; this run made a group of two along axis 1 and one stray
    (axis 0) in it, and left one memory (axis 2) unplaced."""
    old = {f"o{i}": E[0] + 0.1 * E[3] * i for i in range(3)}
    before = {"old": _topic("old", old)}
    ids = ["g1", "g2", "stray", "alone"]
    vectors = np.array([E[1], E[1] + 0.1 * E[2], E[0], E[2]])
    plan = CyclePlan(topics={"old": _topic("old", old),
                             "grp": _topic("grp", dict(zip(ids[:3], vectors[:3], strict=True)))},
                     created={"grp"}, means={"en": np.zeros(4)})
    plan.set_aside["alone"] = SetAside("no_similar_topic", None, 0.0, 1)
    return before, plan, ids, vectors


def test_the_stray_member_of_a_new_group_is_asked_about_and_the_coherent_ones_are_not():
    before, plan, ids, vectors = _scene()
    offers = group_offers(before, plan, ids, vectors, ids, band=0.3, k=5, max_members=20)
    assert [(o.memory, o.why, o.offline) for o in offers] == [("stray", GROUP, "grp")]
    assert set(offers[0].options) == {"old", "grp"} and offers[0].options[0] == "old"

    shown = group_options(plan, ids, vectors, ids, ["grp"], examples=2)["grp"]
    assert shown.summary == "" and len(shown.examples) == 2 and "stray" not in shown.examples


def test_an_answer_moves_a_member_out_of_its_group_and_a_group_left_alone_is_dissolved():
    before, plan, ids, vectors = _scene()
    offers = group_offers(before, plan, ids, vectors, ids, band=0.3, k=5, max_members=20)
    apply_choices(before, plan, offers, {"stray": "old"}, ids, vectors, max_members=20, refresh_fraction=0.5)
    assert "stray" in plan.topics["old"].children and plan.placed["stray"] == "old"
    assert plan.topics["grp"].children == ["g1", "g2"] and plan.topics["grp"].member_count == 2
    assert "old" in plan.grown

    # "new" for a member of a group of two leaves one: the group goes, its last member set apart.
    before, plan, ids, vectors = _scene()
    plan.topics["grp"] = _topic("grp", {"g1": vectors[0], "stray": vectors[2]})
    offers = group_offers(before, plan, ids, vectors, ids, band=2.0, k=5, max_members=20)
    apply_choices(before, plan, offers, {"stray": NEW}, ids, vectors, max_members=20, refresh_fraction=0.5)
    assert "grp" not in plan.topics and "grp" not in plan.created
    assert plan.set_aside["stray"].reason == plan.set_aside["g1"].reason == LLM_NO_TOPIC


def _themed(promoted: bool) -> tuple[dict[str, Topic], CyclePlan, list[str], np.ndarray]:
    """Theme P over groups A (m1, m2) and B (m3-m5), made this run; or, ``promoted``, an existing
    topic P (m3-m5) promoted this run to a theme over B (its own members) and a new group A."""
    vectors = np.random.default_rng(0).normal(size=(5, 4))
    ids = ["m1", "m2", "m3", "m4", "m5"]
    topics = {"A": Topic("A", 1, "en", ids[:2], vectors[:2].sum(0), 2, parent="P"),
              "B": Topic("B", 1, "en", ids[2:], vectors[2:].sum(0), 3, parent="P"),
              "P": Topic("P", 2, "en", ["A", "B"], vectors.sum(0), 5)}
    before = {"P": Topic("P", 1, "en", ids[2:], vectors[2:].sum(0), 3)} if promoted else {}
    plan = CyclePlan(topics=topics, placed={"m1": "A", "m2": "A"} if promoted else {m: "A" if m in ids[:2] else "B"
                                                                                   for m in ids},
                     moved={m: "B" for m in ids[2:]} if promoted else {},
                     created={"A", "B"} if promoted else {"A", "B", "P"}, promoted={"P"} if promoted else set())
    return before, plan, ids, vectors


def test_a_theme_made_this_run_left_with_one_sub_topic_is_gone_and_its_sub_topic_takes_its_place():
    before, plan, ids, vectors = _themed(promoted=False)
    offer = Offer("m1", "t", ("B",), (0.5,), "A", GROUP, 0.01)
    apply_choices(before, plan, [offer], {"m1": NEW}, ids, vectors, 20, 0.25)
    assert set(plan.topics) == {"B"} and plan.topics["B"].parent is None and plan.created == {"B"}
    assert set(plan.set_aside) == {"m1", "m2"} and plan.placed == {m: "B" for m in ids[2:]}


def test_a_promotion_whose_new_sibling_is_dissolved_is_undone():
    before, plan, ids, vectors = _themed(promoted=True)
    offer = Offer("m1", "t", ("B",), (0.5,), "A", GROUP, 0.01)
    apply_choices(before, plan, [offer], {"m1": NEW}, ids, vectors, 20, 0.25)
    assert set(plan.topics) == {"P"} and plan.created == set() and plan.promoted == set()
    topic = plan.topics["P"]
    assert (topic.level, sorted(topic.children), topic.member_count) == (1, ids[2:], 3)
    assert plan.moved == {} and set(plan.set_aside) == {"m1", "m2"} and "P" not in plan.grown


def test_a_choice_that_makes_two_top_level_topics_alike_is_undone():
    """Offline placement joins top-level topics as alike as ``merge_similarity`` (the asset check
    refuses them); the model's choices must not make such a pair: the ones that did are undone."""
    from mem_assets.reorg.llm_placement import PlacementAdvisor
    from mem_resources.llm import CallBudget, OpenAIChatResource

    rng = np.random.default_rng(1)
    centres = [rng.normal(size=16) for _ in range(3)]
    rows = {name: np.array([c + 0.05 * rng.normal(size=16) for _ in range(3)]) for name, c in zip("ABC", centres)}
    memory = (centres[0] + 0.05 * rng.normal(size=16))[None, :]
    before = {name: Topic(name, 1, "en", [f"{name}{i}" for i in range(3)], rows[name].sum(0), 3) for name in "ABC"}

    class Scripted(PlacementAdvisor):
        def decide(self, offers, describe):
            return {"m": "B"}  # a memory of A's kind put in B draws B's centroid toward A

    def revised(merge_similarity: float | None) -> tuple[CyclePlan, PlacementAdvisor]:
        plan = CyclePlan(topics=copy.deepcopy(before), set_aside={"m": SetAside(UNPLACED, "A", 0.9, 1)})
        advisor = Scripted(chat=OpenAIChatResource(base_url="http://127.0.0.1:9/v1"), budget=CallBudget(0, 0))
        advisor.revise(before, plan, ["m"], memory, ["a memory"], 20, 0.25, lambda wanted: {}, merge_similarity)
        return plan, advisor

    # in the topic space fitted on these three roots, A and B move from cosine -0.72 to -0.54
    plan, advisor = revised(None)
    assert plan.placed == {"m": "B"} and advisor.changed == 1
    plan, advisor = revised(-0.6)
    assert plan.placed == {} and (advisor.changed, advisor.undone, advisor.undecided) == (0, 1, 0)
    assert plan.set_aside["m"].reason == UNPLACED  # answered, not deferred: no call for it next run
    assert plan.topics["B"].member_count == 3
