"""The offline judge's cascade: the fast model answers the pairs it is sure of in both
directions (clearly independent, clearly a repeat, clearly a contradiction) and the accurate
model reads only the rest; each decision says which stage answered, an accurate one what the fast
model alone would have said, and the bounds are part of the judge's fingerprint."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pandas as pd

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.judgment_cache import judge_pairs
from mem_assets.dedup.offline_judge_features import PairFeaturizer, dated_events
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_assets.dedup.relations import CascadeStage
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR
from tests.support.judge_rows import probability_rows

SURE_REPEAT = ("The user enjoys hiking and finds it the best outdoor activity.",
               "The user enjoys hiking in the great outdoors.")  # judge-v2: P(redundant) 0.97
SURE_CHANGE = ("The user lives in Berlin.", "The user now lives in Paris.")  # judge-v2: P(contradictory) 0.93
UNSURE = ("The user likes tea", "The user no longer drinks tea")  # judge-v2: P(contradictory) 0.80
UNRELATED = ("The user plays chess every Sunday.", "用户住在杭州")
EXACT = ("The user likes tea.", "The user  likes tea.")
DATED = ("The user went to a pottery class on 12 March.", "The user went to a pottery class on 30 March.")


def cascade(redundant: float | None = 0.9, contradictory: float | None = 0.9) -> judge_model.Gate:
    gate = judge_model.gate()
    assert gate is not None
    return dataclasses.replace(gate, redundant_from=redundant, contradictory_from=contradictory)


def test_the_fast_stage_answers_only_outside_the_band():
    gate = cascade(0.9, 0.8)
    probabilities = probability_rows("fast", [0.01, 0.95, 0.05, 0.5, 0.89, 0.45], [0.02, 0.01, 0.85, 0.3, 0.05, 0.5])
    assert gate.answers(probabilities) == ["independent", "redundant", "contradictory", None, None, None]
    assert cascade(None, None).answers(probabilities) == ["independent", None, None, None, None, None]
    assert gate.answers(probability_rows("fast", [0.9], [0.95])) == ["contradictory"], \
        "a repeat needs P(redundant) >= P(contradictory)"


def test_the_cascade_bounds_are_part_of_the_fingerprint():
    low_only = cascade(None, None)
    assert low_only.fingerprint == judge_model.gate().fingerprint
    assert len({low_only.fingerprint, cascade(0.9, None).fingerprint, cascade(0.9, 0.8).fingerprint,
                cascade(0.91, 0.8).fingerprint}) == 4
    shipped = judge_model.gate("accurate", cascade=True)
    assert f"+{shipped.fingerprint}" in OfflineJudge().fingerprint
    assert not OfflineJudge(gate=False).fingerprint.count("gate:")


def test_sure_pairs_skip_the_accurate_stage_and_unsure_ones_record_the_fast_label():
    embedded: list[str] = []

    def deep(texts):
        embedded.extend(texts)
        return e5_embed(texts)

    model = judge_model.load()
    featurizer = PairFeaturizer(wordllama_embed, deep, aligned=lambda language: bge.encoder(DEFAULT_MODELS_DIR, language),
                                cross={language: cross_encoder.load(DEFAULT_MODELS_DIR, language).probabilities
                                       for language in model.cross_encoders})
    decided = judge_model.predict([SURE_REPEAT, SURE_CHANGE, UNSURE, UNRELATED, EXACT], model, featurizer,
                                  cascade(0.9, 0.9))
    assert [(d.label, d.stage) for d in decided] == [
        ("redundant", "fast"), ("contradictory", "fast"), ("contradictory", "accurate"), ("independent", "fast"),
        ("redundant", "exact")]
    assert "clearly a repeat" in decided[0].reason and "clearly a contradiction" in decided[1].reason
    assert set(embedded) == set(UNSURE), "only the pair in the band pays e5"
    assert decided[2].fast_label == "contradictory" and decided[0].fast_label is None


def test_a_sure_fast_answer_still_never_merges_two_dated_events():
    assert dated_events(*DATED)
    [decided] = judge_model.predict([DATED], gate=cascade(0.5, 0.5))
    assert (decided.label, decided.stage) == ("independent", "fast") and decided.overruled


def test_without_a_high_side_the_cascade_decides_as_the_gate():
    pairs = [SURE_REPEAT, SURE_CHANGE, UNSURE, UNRELATED]
    gated = judge_model.predict(pairs, gate=judge_model.gate())
    low_only = judge_model.predict(pairs, gate=cascade(None, None))
    assert [(d.label, d.reason) for d in gated] == [(d.label, d.reason) for d in low_only]
    assert [d.stage for d in low_only] == ["accurate", "accurate", "accurate", "fast"]


def test_the_judging_report_counts_pairs_per_stage_and_what_the_accurate_stage_changed():
    judge = OfflineJudge()
    pairs = [SURE_REPEAT, UNSURE, UNRELATED, EXACT]
    frame = pd.DataFrame({"left_id": [f"a{i}" for i in range(4)], "right_id": [f"b{i}" for i in range(4)],
                          "left_text": [a for a, _ in pairs], "right_text": [b for _, b in pairs]})
    report = judge_pairs(frame, judge, lambda keys: {}, stored_vectors=lambda ids: {})
    judged, _ = judge.judge_pairs(pairs)
    stages = [j.cascade for j in judged]
    assert report.cascade == {stage: stages.count(stage) for stage in get_args(CascadeStage)}
    assert report.cascade["exact"] == 1 and report.cascade["fast"] >= 1
    assert report.middle_changed == sum(j.cascade == "middle" and j.fast_label != j.label for j in judged)
    assert report.accurate_changed == sum(j.cascade == "accurate" and (j.middle_label or j.fast_label) != j.label
                                          for j in judged)
    fast_judge, _ = OfflineJudge(model="fast").judge_pairs(pairs)
    assert {j.cascade for j in fast_judge} == {"exact", "fast"}
