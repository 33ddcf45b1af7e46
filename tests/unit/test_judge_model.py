"""The learned offline judge, scored end to end on held-out splits it never saw in training.

Floors (today's figures: docs/dedup.md, "Scoring a judge"; every judge version's: research/NOTES.md
§1.2) for the default, accurate model (judge-v13 behind its e5 gate, bound 0.09
since 2026-12-03). Hand-written pairs: wrong merges + wrong supersedes <= 1.5% of pairs, redundant
precision >= 0.95, redundant F1 >= 0.80 (the issue's target), contradictory F1 >= 0.80; measured
0.85%, 0.97, 0.808, 0.83 on 1,766 pairs on an AMD EPYC (gate bound 0.19 before: 0.79%, 0.96, 0.796,
0.83; judge-v11: 0.96%, 0.97, 0.77, 0.73). Real conversations (LoCoMo 42 and 43, 520 candidate
pairs, no contradiction among them): wrong supersedes <= 1.5% and wrong merges + supersedes <= 3%;
measured 0.19% and 1.92% (gate bound 0.19: 0.19% and 1.73%; judge-v11: 0.38% and 1.54%; judge-v6:
1.35% and 2.88%, judge-v3: 4.62% and 5.77%).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.candidates import WORDLLAMA_THRESHOLD
from mem_assets.dedup.evaluation import evaluate, read_pairs
from mem_assets.dedup.offline_judge_features import (
    ALIGNED_FEATURE_NAMES,
    CROSS_FEATURE_NAMES,
    DEEP_FEATURE_NAMES,
    FEATURE_NAMES,
    PairScorer,
    dated_events,
    pair_features,
    parse,
)
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_resources import bge
from mem_resources.embedder import (
    HashingEmbedder,
    WordLlamaEmbedder,
    e5_embed,
    wordllama_embed,
)
from mem_resources.settings import DEFAULT_MODELS_DIR
from research.training import judge_trees as training

DATA = Path(__file__).parents[2] / "research" / "data" / "judge"


def test_heldout_floors(judge_heldout_score):
    assert judge_heldout_score["pairs"] >= 400
    assert judge_heldout_score["wrong_total"]["percent"] <= 1.5
    assert judge_heldout_score["classes"]["redundant"]["precision"] >= 0.95
    assert judge_heldout_score["classes"]["redundant"]["f1"] >= 0.80
    assert judge_heldout_score["classes"]["contradictory"]["f1"] >= 0.80
    assert set(judge_heldout_score["by_language"]) >= {"en", "zh"}


def test_real_conversation_heldout_floors():
    """Real repeats are rare and real updates rarer: the judge must not supersede true facts."""
    score = evaluate(read_pairs(DATA / "locomo" / "heldout.jsonl"), WordLlamaEmbedder(), OfflineJudge(),
                     WORDLLAMA_THRESHOLD, top_k=5)
    assert score["pairs"] == 520
    assert score["wrong_supersedes"]["percent"] <= 1.5
    assert score["wrong_total"]["percent"] <= 3.0


def test_pairs_never_candidates_count_as_independent():
    rows = [{"a": "The user enjoys hiking and finds it the best outdoor activity.",
             "b": "The user enjoys hiking in the great outdoors.", "label": "redundant"}]
    caught = evaluate(rows, WordLlamaEmbedder(), OfflineJudge(), threshold=0.0, top_k=5)
    missed = evaluate(rows, WordLlamaEmbedder(), OfflineJudge(), threshold=0.999, top_k=5)
    assert caught["classes"]["redundant"]["recall"] == 1.0 and caught["candidates"] == 1
    assert missed["classes"]["redundant"]["recall"] == 0.0 and missed["never_candidates"] == 1
    assert missed["judge_calls"] == 0


def test_top_k_competes_within_a_tenant():
    rows = [{"a": f"Caroline went to an LGBTQ support group on {day} May.", "b":
             "Caroline went to an LGBTQ support group on 7 May.", "label": "independent", "tenant": "t"}
            for day in range(10, 20)]
    result = evaluate(rows, HashingEmbedder(), OfflineJudge(), threshold=0.0, top_k=3)
    assert result["candidates"] == 3


def test_datasets_are_big_bilingual_and_balanced():
    rows = read_pairs(DATA / "train.jsonl") + read_pairs(DATA / "heldout.jsonl")
    labels = Counter(r["label"] for r in rows)
    assert len(rows) >= 2000
    assert labels["contradictory"] / len(rows) >= 0.20 and labels["redundant"] / len(rows) >= 0.15
    assert {r["lang"] for r in rows} >= {"en", "zh"}
    train_groups = {r["group"] for r in read_pairs(DATA / "train.jsonl")}
    assert not train_groups & {r["group"] for r in read_pairs(DATA / "heldout.jsonl")}


def test_subject_name_is_not_shared_content():
    assert "caroline" not in parse("Caroline went to a support group.").tokens
    assert "李娜" not in parse("李娜参加了读书会").tokens
    assert "boston" in parse("Tim's sister lives in Boston.").tokens


def test_exact_duplicates_are_redundant_and_clear_cases_hold():
    decided = judge_model.predict([("The user likes tea.", "The user  likes tea."),
                                   ("The user likes tea", "The user no longer drinks tea"),
                                   ("a cat", "a dog")])
    assert [d.label for d in decided] == ["redundant", "contradictory", "independent"]


def test_one_kind_of_event_on_two_dates_is_two_events_not_an_update():
    """The English cross-encoder reads a date-only difference as a paraphrase; the overrule keeps
    both events, while a date that the newer text says moved still supersedes."""
    two_classes = ("Rosa went to a pottery class on 12 March.", "Rosa went to a pottery class on 30 March.")
    moved = ("Tom has a meeting with his manager on 12 March.", "Tom's meeting with his manager moved to 30 March.")
    decided = judge_model.predict([two_classes, ("小王3月12号去上了陶艺课。", "小王3月30号去上了陶艺课。"), moved],
                                  gate=judge_model.gate())
    assert [d.label for d in decided] == ["independent", "independent", "contradictory"]
    assert "two dated events" in decided[0].reason
    assert dated_events("Tom went hiking on Saturday.", "Tom went hiking on Sunday.")
    assert not dated_events("Tom flies to Rome on June 3.", "On 3 June Tom is flying to Rome.")
    assert not dated_events("Tom's birthday is on 12 March.", "Tom's birthday is on 30 March.")
    assert not dated_events("用户今年三十二岁", "用户今年二十八岁")
    assert not dated_events("Tom has two cats.", "Tom has three cats.")
    assert "dated-events" in OfflineJudge().fingerprint


def encoders(language: bge.Language) -> bge.TokenEncoder:
    return bge.encoder(DEFAULT_MODELS_DIR, language)


def cross() -> dict[bge.Language, PairScorer]:
    return {language: cross_encoder.load(DEFAULT_MODELS_DIR, language).probabilities
            for language in judge_model.load().cross_encoders}


@pytest.mark.parametrize(("kind", "features"), [("accurate", FEATURE_NAMES + DEEP_FEATURE_NAMES + ALIGNED_FEATURE_NAMES
                                                 + CROSS_FEATURE_NAMES), ("fast", FEATURE_NAMES)])
def test_model_file_fingerprint_keys_the_judgment_cache(kind, features):
    raw = judge_model.model_file(kind).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    assert judge_model.load(kind).fingerprint.endswith(digest)
    assert digest in OfflineJudge(model=kind).fingerprint
    assert json.loads(raw)["features"] == list(features)
    model = judge_model.load(kind)
    assert model.deep == model.aligned == model.cross == (kind == "accurate")


def test_chinese_pairs_keep_the_cross_validated_redundant_threshold():
    """The real-conversation raise is English evidence: with a raised threshold (training.py's step
    4; judge-v13 needed none), a Chinese pair between the two thresholds merges, an English one
    does not."""
    model = dataclasses.replace(judge_model.load(), thresholds={"redundant": 0.92, "redundant_zh": 0.88,
                                                                 "contradictory": 0.62})
    p = 0.90
    row = np.zeros((1, 3))
    row[0, model.classes.index("redundant")], row[0, model.classes.index("independent")] = p, 1 - p
    rows = np.vstack([row, row])
    assert [label for label, _ in model.decide(rows, np.array([True, False]))] == ["redundant", "independent"]
    assert [label for label, _ in model.decide(rows)] == ["independent", "independent"]


def test_the_real_conversation_raise_leaves_chinese_pairs_at_the_cross_validated_threshold():
    classes = training.CLASSES
    probabilities = np.zeros((3, 3))
    probabilities[:, classes.index("redundant")] = [0.89, 0.89, 0.95]
    probabilities[:, classes.index("independent")] = 1 - probabilities[:, classes.index("redundant")]
    truth = np.array(["independent", "independent", "redundant"])
    chinese = np.array([False, True, False])
    raised = training.real_conversation_threshold(probabilities[:1], truth[:1], chinese[:1],
                                                  {"redundant": 0.88, "contradictory": 0.62})
    assert raised == {"redundant": 0.9, "contradictory": 0.62, "redundant_zh": 0.88}
    assert list(training.apply_model_thresholds(probabilities, raised, chinese)) == [
        "independent", "redundant", "redundant"]


def test_exported_trees_split_exactly_where_scikit_learn_does():
    """A split threshold can equal a feature value of a row the fit never saw (each stage fits a
    subsample); rounded, the threshold sent such a row the other way (judge-v12's first export
    failed its check so)."""
    low = np.float32(0.9881049990653992)
    high = np.nextafter(np.nextafter(np.nextafter(low, np.float32(1)), np.float32(1)), np.float32(1))
    x = np.zeros((40, len(FEATURE_NAMES)))
    x[:, 0] = np.repeat([low, high], 20)
    truth = np.repeat(["independent", "redundant"], 20)
    truth[::7] = "contradictory"
    model = GradientBoostingClassifier(n_estimators=3, max_depth=1, random_state=0).fit(x, truth)
    split = float(model.estimators_[0, 0].tree_.threshold[0])
    assert low < split < high and round(split, 9) != split
    at_split = np.zeros((1, len(FEATURE_NAMES)))
    at_split[0, 0] = split
    rows = np.vstack([x, at_split])
    exported = judge_model.model_from_json(training.export(model, "fast", {}, {}), "test")
    assert np.allclose(exported.probabilities(rows), model.predict_proba(rows), atol=1e-9)


def test_all_trees_read_at_once_give_scikit_learns_probabilities_in_any_batch():
    """The trees of a model are read together (``Forest``), in chunks of pairs; trees of
    several depths, more rows than a chunk, and a row's probabilities bit for bit the same alone
    as inside a batch."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(judge_model.FOREST_CHUNK * 2 + 37, len(FEATURE_NAMES)))
    truth = np.where(x[:, 0] + x[:, 1] > 1, "redundant", np.where(x[:, 2] * x[:, 3] > 0.5, "contradictory",
                                                                  "independent"))
    model = GradientBoostingClassifier(n_estimators=40, max_depth=4, min_samples_leaf=200, random_state=0).fit(x, truth)
    exported = judge_model.model_from_json(training.export(model, "fast", {}, {}), "test")
    assert len({tree.steps[3] for per_class in exported.trees for tree in per_class}) > 1
    together = exported.probabilities(x)
    assert np.allclose(together, model.predict_proba(x), atol=1e-9)
    for row in (0, judge_model.FOREST_CHUNK, len(x) - 1):
        assert np.array_equal(exported.probabilities(x[row]), together[row:row + 1])


def test_the_newer_first_reading_is_skipped_only_where_it_cannot_change_a_decision():
    """A pair reaches the costly model's (newer, older) reading only when the (older, newer) one
    leaves a decision or a review-queue place open; every label and ``near`` is what reading both
    orders gives, and a skipped pair's P(independent) is a lower bound of the two-order one."""
    pairs = [("The user lives in Berlin.", "The user moved to Munich last spring."),
             ("The user likes green tea.", "The user enjoys drinking green tea."),
             ("The user has two cats.", "The user's sister works as a nurse."),
             ("Melanie has two children.", "Melanie has three kids."),
             ("用户住在杭州", "用户搬到了上海"), ("用户喜欢喝绿茶", "用户爱喝绿茶"),
             ("用户养了一只狗", "用户的哥哥在北京工作"), ("用户每天跑步五公里", "用户周末去爬山"),
             ("The user plays the piano.", "The user started learning the violin."),
             ("The user is allergic to peanuts.", "The user cannot eat peanuts."),
             ("Jon wants to open a dance studio.", "Jon's favourite food is pizza."),
             ("用户是素食者", "用户不吃肉")]
    model, band = judge_model.load(), {"redundant": 0.3, "contradictory": 0.3}
    decided = judge_model.predict(pairs, model, band=band)
    featurizer = judge_model.featurizer()
    both = featurizer.matrix([*pairs, *((b, a) for a, b in pairs)])
    read_both = model.pair_probabilities(both[:len(pairs)], both[len(pairs):])
    chinese = judge_model.both_chinese(both[:len(pairs)])
    labels = model.decide(read_both, chinese)
    near = model.near_misses(read_both, band, chinese)
    assert [d.label for d in decided] == [label for label, _ in labels]
    assert [d.near for d in decided] == [n[0] if n and label == "independent" else None
                                         for n, (label, _) in zip(near, labels, strict=True)]
    skipped = [i for i, d in enumerate(decided) if d.one_order]
    assert skipped and len(skipped) < len(pairs)
    independent = model.classes.index("independent")
    for i in skipped:
        assert decided[i].probability <= read_both[i, independent] + 1e-12
        assert "read older-first only" in decided[i].reason
    reread = model.needs_reverse(model.probabilities(both[:len(pairs)]), band, chinese)
    assert not reread[skipped].any()


def test_probabilities_are_a_distribution():
    features = pair_features("Melanie has two children.", "Melanie has three kids.", wordllama_embed, e5_embed,
                             encoders, cross())
    probabilities = judge_model.load().probabilities(features)
    assert probabilities.shape == (1, 3) and abs(probabilities.sum() - 1) < 1e-9


def test_negation_is_scoped_to_the_words_it_governs():
    parsed = parse("Andrew wants a dog but his apartment doesn't allow pets.")
    negated = dict(zip(parsed.tokens, parsed.negated, strict=True))
    assert negated["allow"] and not negated["dog"]
    chinese = parse("用户不喜欢吃香菜")
    assert dict(zip(chinese.tokens, chinese.negated, strict=True))["喜欢"]


def test_chinese_numbers_articles_and_years():
    assert parse("钟琳嫁给了一名消防员").numbers == frozenset()
    assert parse("张伟养了两只猫").numbers == {2.0}
    assert 2019.0 in parse("华英二〇一九年拿到了护理学位").numbers


def test_values_of_one_kind_swapped_are_seen_as_a_swap():
    swap = FEATURE_NAMES.index("value_swap_exact")
    features = judge_model.feature_matrix([("Mia's dog Biscuit is a beagle.", "Mia's dog Biscuit is a poodle."),
                                           ("Mia's dog Biscuit is a beagle.", "Mia walks Biscuit every morning.")])
    assert features[0, swap] == 1.0 and features[1, swap] == 0.0


def test_batched_features_equal_one_pair_at_a_time():
    pairs = [("The user likes tea.", "The user no longer drinks tea."), ("用户住在杭州", "用户搬到了上海"),
             ("The user likes tea.", "用户住在杭州")]
    batched = judge_model.feature_matrix(pairs)
    for row, (a, b) in zip(batched, pairs, strict=True):
        assert (row == pair_features(a, b, wordllama_embed, e5_embed, encoders, cross())).all()


def test_words_that_start_with_a_digit_read_as_numbers_without_failing_the_run():
    """"4s店" (a car dealer), "²" or "3.5.1" once stopped a tenant's judging with a ValueError."""
    pairs = [("他把车送去4s店保养了。", "他的车在4s店修好了。"), ("The flat is 60m² and costs 900.", "The flat costs 950."),
             ("She runs version 3.5.1 of the app.", "She runs version 3.6 of the app.")]
    judged, _ = OfflineJudge(model="fast").judge_pairs(pairs)
    assert len(judged) == 3 and all(j.label in ("redundant", "contradictory", "independent") for j in judged)
    featurizer = judge_model.featurizer(False)
    assert featurizer.cheap(pairs).shape[0] == 3
