"""What an LLM's answer may do to a pair the offline judge was unsure of (``weigh``), and which
offline decisions go to it for confirmation (``JudgeModel.doubts``)."""

from __future__ import annotations

import numpy as np
import pytest

from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.pair_judge import Judgment, weigh

NEAR = Judgment("independent", "judge model: P(independent) = 0.20", near="redundant", near_probability=0.80)
DOUBTFUL = Judgment("redundant", "judge model: P(redundant) = 0.89", near_probability=0.89, doubtful=True)


CARRIED = Judgment("independent", "judge model: P(independent) = 0.95", carried=0.8)


def llm(label: str, **flags: bool) -> Judgment:
    return Judgment(label, "the model's reason", stage="llm", **flags)


@pytest.mark.parametrize(("offline", "said", "label", "stage"), [
    (NEAR, "redundant", "redundant", "llm"),  # confirms what the offline judge nearly said
    (NEAR, "independent", "independent", "llm"),
    (NEAR, "contradictory", "independent", "offline"),  # not what the evidence pointed to: apart
    (DOUBTFUL, "redundant", "redundant", "llm"),  # confirms a doubtful decision
    (DOUBTFUL, "independent", "independent", "llm"),  # undoes it
    (DOUBTFUL, "contradictory", "independent", "llm"),  # the judges disagree: nothing merged
    (CARRIED, "redundant", "redundant", "llm"),  # one memory carries most of the other's words: a repeat
    (CARRIED, "independent", "independent", "llm"),
    (CARRIED, "contradictory", "independent", "offline"),  # nothing points to a change: apart
])
def test_the_llm_may_confirm_or_settle_independent_never_anything_else(offline, said, label, stage):
    weighed = weigh(offline, llm(said))
    assert (weighed.label, weighed.stage, weighed.routed) == (label, stage, True)


NEAR_CHANGE = Judgment("independent", "judge model: P(independent) = 0.60", near="contradictory",
                       near_probability=0.30)
CHANGE = Judgment("contradictory", "judge model: P(contradictory) = 0.80", near_probability=0.80, doubtful=True)


@pytest.mark.parametrize(("offline", "restatements", "continues", "label"), [
    (NEAR_CHANGE, "none", False, "independent"),
    (NEAR_CHANGE, "near", False, "redundant"),  # read offline as a possible change, by the LLM as a repeat
    (NEAR_CHANGE, "continued", False, "redundant"),
    (CHANGE, "near", True, "independent"),  # a decided change stays apart under "near"
    (CHANGE, "continued", False, "independent"),
    (CHANGE, "continued", True, "redundant"),  # "... still plays with his trio": restated, not changed
    (CHANGE, "decided", False, "redundant"),
])
def test_a_restatement_the_offline_judge_read_as_a_change_takes_the_llm_s_redundant(offline, restatements,
                                                                                     continues, label):
    weighed = weigh(offline, llm("redundant"), restatements, continues)
    assert weighed.label == label and weighed.routed


@pytest.mark.parametrize("restatements", ["none", "near", "continued", "decided"])
def test_a_near_repeat_never_becomes_a_supersede(restatements):
    assert weigh(NEAR, llm("contradictory"), restatements, True).label == "independent"


def test_continuation_words_in_both_languages():
    from mem_assets.dedup.superseding import says_it_continues

    assert says_it_continues("Chris still plays Thursdays with his trio.")
    assert says_it_continues("孙浩仍在青岛教物理。") and says_it_continues("她一直在跑步。")
    assert not says_it_continues("Nadia now works four days a week.")
    assert not says_it_continues("The stillness of the lake calms her.")


@pytest.mark.parametrize("offline", [NEAR, DOUBTFUL])
@pytest.mark.parametrize("flags", [{"failed": True}, {"deferred": True, "over_budget": True}])
def test_an_answer_that_never_came_leaves_the_pair_apart(offline, flags):
    weighed = weigh(offline, llm("independent", **flags))
    assert weighed.label == "independent" and weighed.routed
    assert all(getattr(weighed, flag) for flag in flags)  # not cached: the next run asks again


def test_doubtful_decisions_are_those_short_of_the_confirmation_reach():
    model = judge_model.load()
    red, con = model.thresholds["redundant"], model.thresholds["contradictory"]
    reach = {"redundant": 0.75, "contradictory": 0.47}
    decided = [("redundant", red + 0.001), ("redundant", 1.0), ("contradictory", con + 0.01),
               ("contradictory", 1.0), ("independent", 0.9)]
    assert model.doubts(decided, reach) == [True, False, True, False, False]
    assert model.doubts(decided, {}) == [False] * len(decided)
    # Each label's reach is its own share of the room above its threshold.
    at = {"redundant": red + 0.75 * (1 - red), "contradictory": con + 0.47 * (1 - con)}
    assert model.doubts([("redundant", at["redundant"] - 1e-6), ("redundant", at["redundant"] + 1e-6),
                         ("contradictory", at["contradictory"] - 1e-6),
                         ("contradictory", at["contradictory"] + 1e-6)], reach) == [True, False, True, False]
    # A reach of 1 sends every decision of that label, however sure; 0 none.
    assert model.doubts(decided, {"redundant": 1.0, "contradictory": 0.0}) == [True, True, False, False, False]


def test_predict_marks_near_misses_and_doubtful_decisions_apart():
    probabilities = np.array([[0.80, 0.05, 0.15]])
    model = judge_model.load()
    index = {c: i for i, c in enumerate(model.classes)}
    row = np.zeros((1, 3))
    row[0, index["redundant"]], row[0, index["contradictory"]], row[0, index["independent"]] = probabilities[0]
    assert model.near_misses(row, {"redundant": 0.15, "contradictory": 0.15}) == [("redundant", 0.80)]
    assert model.doubts(model.decide(row), {"redundant": 1.0, "contradictory": 1.0}) == [False]


def test_each_label_has_its_own_near_band():
    """With an LLM the redundant band is wide (real conversations' paraphrases score far under the
    threshold) and the contradictory one narrow (judge-v13's thresholds: 0.88 / 0.64)."""
    model = judge_model.load()
    index = {c: i for i, c in enumerate(model.classes)}
    rows = np.zeros((3, 3))
    for k, (redundant, contradictory) in enumerate([(0.40, 0.05), (0.05, 0.50), (0.05, 0.40)]):
        rows[k, index["redundant"]], rows[k, index["contradictory"]] = redundant, contradictory
        rows[k, index["independent"]] = 1 - redundant - contradictory
    routed = {"redundant": 0.60, "contradictory": 0.20}
    assert model.near_misses(rows, routed) == [("redundant", 0.40), ("contradictory", 0.50), None]
    assert model.near_misses(rows, {"redundant": 0.30, "contradictory": 0.30}) == [
        None, ("contradictory", 0.50), ("contradictory", 0.40)]
    assert model.near_misses(rows, {}) == [None, None, None]
