"""Groups offline placement made in a run are checked by the LLM too: which members are asked
about, what an answer does to the plan (pure: no model, no database)."""

from __future__ import annotations

import numpy as np

from mem_assets.reorg.llm_placement import (
    GROUP,
    LLM_NO_TOPIC,
    NEW,
    UNPLACED,
    apply_choices,
    group_offers,
    group_options,
)
from mem_assets.reorg.placement import CyclePlan, SetAside, Topic

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

    with_unplaced = group_offers(before, plan, ids, vectors, ids, band=0.3, k=5, max_members=20, unplaced=True)
    assert {(o.memory, o.why) for o in with_unplaced} == {("stray", GROUP), ("alone", UNPLACED)}
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
