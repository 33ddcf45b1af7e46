"""The offline judge on the labeled set: every clear-cut pair right, and the issue's examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mem_assets.dedup.judges import OfflineJudge
from mem_assets.dedup.offline_judge import informativeness, judge

LABELED = [json.loads(line) for line in
           (Path(__file__).parents[1] / "data" / "labeled_pairs.jsonl").read_text("utf-8").splitlines()]


def test_labeled_set_is_big_enough_and_bilingual():
    assert len(LABELED) >= 100
    for label in ("redundant", "contradictory", "independent"):
        assert {p["lang"] for p in LABELED if p["label"] == label} == {"en", "zh"}


@pytest.mark.parametrize("pair", [p for p in LABELED if p["clear"]], ids=lambda p: f"{p['a']}|{p['b']}")
def test_clear_cut_pairs(pair):
    assert judge(pair["a"], pair["b"])[0] == pair["label"]
    assert judge(pair["b"], pair["a"])[0] == pair["label"]


@pytest.mark.parametrize(("a", "b", "label"), [
    ("他住北京", "他住上海", "contradictory"),
    ("The user lives in Berlin", "The user lives in Paris", "contradictory"),
    ("The user likes tea", "The user no longer drinks tea", "contradictory"),
    ("The user likes tea.", "the user  likes tea", "redundant"),
    ("用户喜欢喝茶", "用户喜欢喝茶。", "redundant"),
    ("The user likes tea", "The user has a dog", "independent"),
])
def test_issue_examples(a, b, label):
    assert judge(a, b)[0] == label


def test_judgments_carry_a_reason_and_count_calls():
    judgments, usage = OfflineJudge().judge_pairs([("The user likes tea", "The user no longer drinks tea"),
                                                   ("a cat", "a dog")])
    assert [j.label for j in judgments] == ["contradictory", "independent"]
    assert all(j.reason and not j.failed for j in judgments)
    assert usage.calls == 2


def test_offline_fusion_keeps_the_more_informative_text_and_never_reconciles():
    fusion, _ = OfflineJudge().fuse(["The user has two cats.", "The user has two cats, Luna and Milo."],
                                    "redundant")
    assert fusion.text == "The user has two cats, Luna and Milo."
    assert OfflineJudge().fuse(["他住北京", "他住上海"], "contradictory")[0].text is None
    assert informativeness("用户养了一只猫,叫咪咪。") > informativeness("用户养了一只猫。")


def test_the_same_number_in_chinese_and_arabic_numerals_is_one_value():
    assert judge("用户有七年的软件开发经验。", "用户有7年软件开发经验。")[0] == "redundant"
    assert judge("用户养了两只猫", "用户养了2只猫")[0] == "redundant"
    assert judge("用户养了两只猫", "用户养了三只猫")[0] == "contradictory"


def test_sharing_only_numbers_and_units_is_not_a_topic_in_common():
    assert judge("用户戒烟已经两年了。", "用户的试用期为三个月，到 2027 年 2 月结束。")[0] == "independent"
