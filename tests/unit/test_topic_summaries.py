"""Offline topic names: phrases that cover most members, and parents that summarize children."""

from __future__ import annotations

from mem_assets.reorg.offline_summaries import PhraseIndex, phrase_summary, phrases

DOG = [
    "The user adopted a beagle named Biscuit from a rescue.",
    "Biscuit pulls on the leash when he smells squirrels.",
    "User walks Biscuit twice a day before work.",
    "The vet said Biscuit is a little overweight.",
    "Biscuit got his rabies booster last week.",
]
WALKS = [
    "The dog walker Marisol takes the beagle out at noon.",
    "User bought a no-pull harness for the beagle's walks.",
    "The beagle howls when left alone in the apartment.",
    "User's beagle loves the off-leash park on Sundays.",
]
TEA = [
    "用户每天下午都要泡一壶铁观音。",
    "朋友送了一盒大红袍，用户泡铁观音和大红袍对比。",
    "用户学会了用盖碗泡乌龙茶。",
    "用户的茶叶柜子里有铁观音和普洱。",
]
OTHER = [
    "The user runs 25 miles a week.",
    "The user's manager is named Priya.",
    "User plays guitar every evening.",
    "爸爸有高血压，每天吃药。",
    "用户周末和朋友去爬山。",
]


def _setup():
    texts = DOG + WALKS + TEA + OTHER
    return texts, PhraseIndex(texts)


def test_phrases_are_stems_word_pairs_and_chinese_words():
    found = phrases("The user's beagle Biscuit has a peanut allergy; Biscuit walks twice.")
    assert found["w:biscuit"] == "Biscuit"
    assert found["b:peanut allergi"] == "peanut allergy"
    assert "b:allergi biscuit" not in found
    assert "w:user" not in found
    assert "z:羽毛球" in phrases("用户每周三晚上和同事打羽毛球。")


def test_a_topic_is_named_by_the_phrase_most_members_share():
    texts, index = _setup()
    summary = phrase_summary(texts, list(range(5)), index, "en")
    assert summary.key.split(", ")[0] == "Biscuit"
    assert summary.background.startswith("5 of 5 memories mention")
    assert any(text in summary.value for text in DOG)


def test_chinese_topics_get_chinese_names():
    texts, index = _setup()
    rows = list(range(9, 13))
    summary = phrase_summary(texts, rows, index, "zh")
    assert summary.key.split("、")[0] == "铁观音"
    assert summary.value.startswith("4条关于")
    assert summary.background.startswith("4条记忆中有")


def test_a_parent_summarizes_all_its_members_and_copies_no_child():
    texts, index = _setup()
    children = [list(range(5)), list(range(5, 9))]
    child_summaries = [phrase_summary(texts, rows, index, "en") for rows in children]
    parent = phrase_summary(texts, [r for rows in children for r in rows], index, "en",
                            child_keys=[s.key for s in child_summaries])
    assert parent.value.startswith("9 memories about")
    assert "2 sub-topics" in parent.value
    for child in child_summaries:
        assert parent.key != child.key
        assert parent.value != child.value
        assert child.key in parent.value
    assert {"Biscuit", "beagle"} <= set(parent.tags)


def test_a_parent_never_repeats_a_child_key_even_when_phrases_agree():
    texts, index = _setup()
    rows = list(range(5))
    child = phrase_summary(texts, rows, index, "en")
    parent = phrase_summary(texts, rows, index, "en", child_keys=[child.key])
    assert parent.key != child.key
