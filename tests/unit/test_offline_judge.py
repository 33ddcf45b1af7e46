"""The offline judge as the pipeline calls it: reasons and counts, and the offline fusion, which
keeps the most informative text and never reconciles a contradiction. The learned model's
quality is measured in test_judge_model.py."""

from __future__ import annotations

from mem_assets.dedup.llm_judge_prompt import JudgeRequest, MemoryRef
from mem_assets.dedup.merging import informativeness
from mem_assets.dedup.pair_judge import REQUESTS_PER_BATCH, OfflineJudge


def test_judgments_carry_a_reason_and_count_calls():
    judgments, usage = OfflineJudge().judge_pairs([("The user likes tea.", "the user  likes tea"),
                                                   ("The user likes tea", "The user has a dog")])
    assert [j.label for j in judgments] == ["redundant", "independent"]
    assert all(j.reason and not j.failed for j in judgments)
    assert usage.calls == 2


def test_offline_fusion_keeps_the_more_informative_text_and_never_reconciles():
    fusion, _ = OfflineJudge().fuse(["The user has two cats.", "The user has two cats, Luna and Milo."],
                                    "redundant")
    assert fusion.text == "The user has two cats, Luna and Milo."
    assert OfflineJudge().fuse(["他住北京", "他住上海"], "contradictory")[0].text is None
    assert informativeness("用户养了一只猫,叫咪咪。") > informativeness("用户养了一只猫。")


def test_informativeness_counts_content_words_not_subjects_stop_words_or_negations():
    assert informativeness("The user doesn't like tea.")[0] == informativeness("He likes the tea")[0] == 2
    assert informativeness("用户有七年的软件开发经验。")[0] == informativeness("用户有7年软件开发经验。")[0]


def test_long_judging_reports_progress_batch_by_batch_with_the_same_judgments():
    """A run's requests are judged in batches so its progress line moves; the batches change no
    judgment (each pair's features do not depend on its batch)."""
    pets = ["cat", "dog", "parrot", "hamster", "rabbit"]
    requests = [JudgeRequest(MemoryRef(f"The user adopted a {pets[i % 5]} in year {2000 + i}."),
                             (MemoryRef(f"The user has a {pets[(i + 1) % 5]}."),
                              MemoryRef(f"The user adopted a {pets[i % 5]} in year {2000 + i}!")),
                             ("older", "older"))
                 for i in range(2 * REQUESTS_PER_BATCH + 1)]
    judge = OfflineJudge(model="fast")
    advanced: list[int] = []
    batched, usage = judge.judge_requests(requests, advanced.append)
    assert advanced == [2 * REQUESTS_PER_BATCH, 2 * REQUESTS_PER_BATCH, 2]
    flat, _ = judge.judge_pairs([pair for request in requests for pair in request.pairs()])
    assert [j for judgments in batched for j in judgments] == flat
    assert usage.calls == len(flat) and [len(j) for j in batched] == [2] * len(requests)
    assert {j.label for j in flat} >= {"redundant", "independent"}
