"""The judge cascade's middle stage: of the pairs the fast gate leaves open, the middle model (the
pair's e5 vectors, no bge-small, no cross-encoder) answers those it is sure of on both sides;
only the rest pay bge-small and the cross-encoder. Each decision says which stage answered and
what the stage before it would have said; the bounds are part of the judge's fingerprint."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.offline_judge_features import DEEP_FEATURE_NAMES, FEATURE_NAMES, PairFeaturizer, dated_events
from mem_assets.dedup.pair_judge import Judgment, OfflineJudge
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR
from tests.support.judge_rows import probability_rows

REPEAT = ("The user enjoys hiking and finds it the best outdoor activity.",
          "The user enjoys hiking in the great outdoors.")
CHANGE = ("The user lives in Berlin.", "The user now lives in Paris.")
UNSURE = ("The user likes tea", "The user no longer drinks tea")
UNRELATED = ("The user plays chess every Sunday.", "用户住在杭州")
DATED = ("The user went to a pottery class on 12 March.", "The user went to a pottery class on 30 March.")


def middle(below: float = 0.0, redundant: float | None = None, contradictory: float | None = None) -> judge_model.Gate:
    return judge_model.Gate(judge_model.load("middle"), "judge-mid-v1", below, redundant, contradictory,
                            skipped="bge-small and the cross-encoder")


def test_the_middle_gate_answers_only_outside_its_band_on_every_side():
    gate = middle(0.05, 0.9, 0.8)
    probabilities = probability_rows("middle", [0.01, 0.95, 0.05, 0.5, 0.89, 0.04],
                                     [0.02, 0.01, 0.85, 0.3, 0.05, 0.06])
    assert gate.answers(probabilities) == ["independent", "redundant", "contradictory", None, None, None]
    assert middle().answers(probabilities) == [None] * 6, "bound 0 and no high side: every pair goes on"
    assert gate.answers(probability_rows("middle", [0.9], [0.95])) == ["contradictory"]
    assert "bge-small and the cross-encoder not read" in gate.reason(probabilities[1], "redundant")


def test_the_shipped_middle_stage_is_part_of_the_fingerprint():
    """Switched on, the middle model's file is in the judge's fingerprint (retraining it judges
    pairs again); off, the default, the fingerprint is the cascade's without it."""
    shipped = judge_model.middle_gate("accurate")
    raw = judge_model.model_file("middle").read_bytes()
    on = OfflineJudge(middle=True).fingerprint
    assert hashlib.sha256(raw).hexdigest()[:16] in on
    assert json.loads(raw)["features"] == list(FEATURE_NAMES + DEEP_FEATURE_NAMES)
    assert shipped.name == "judge-mid-v1" and judge_model.load("middle").deep
    assert not judge_model.load("middle").aligned and not judge_model.load("middle").cross
    assert on.endswith(f"+middle:{shipped.fingerprint}")
    assert "middle:" not in OfflineJudge().fingerprint
    assert "middle:" not in OfflineJudge(middle=True, gate=False).fingerprint
    assert len({middle(0.05, 0.9, 0.8).fingerprint, middle(0.05, 0.91, 0.8).fingerprint,
                middle(0.06, 0.9, 0.8).fingerprint}) == 3
    assert judge_model.middle_gate("fast") is None


def test_pairs_the_middle_stage_is_sure_of_pay_no_bge_and_no_cross_encoder():
    aligned_read: list[str] = []
    cross_read: list[tuple[str, str]] = []
    model = judge_model.load()

    def encoder(language):
        jar = bge.encoder(DEFAULT_MODELS_DIR, language)

        class Counted:
            def encode(self, texts):
                aligned_read.extend(texts)
                return jar.encode(texts)
        return Counted()

    def scorer(language):
        score = cross_encoder.load(DEFAULT_MODELS_DIR, language).probabilities

        def counted(pairs):
            cross_read.extend(pairs)
            return score(pairs)
        return counted

    featurizer = PairFeaturizer(wordllama_embed, e5_embed, aligned=encoder,
                                cross={language: scorer(language) for language in model.cross_encoders})
    pairs = [REPEAT, CHANGE, UNSURE, UNRELATED]
    fast = judge_model.gate()
    mid_rows = PairFeaturizer(wordllama_embed, e5_embed)
    both = [*pairs, *((b, a) for a, b in pairs)]
    features = mid_rows.deep_rows(both, mid_rows.cheap(both))
    p = judge_model.load("middle").pair_probabilities(features[:4], features[4:])
    r, c = (judge_model.load("middle").classes.index(k) for k in ("redundant", "contradictory"))
    # bounds that make the middle stage sure of the repeat and of the change, not of the tea pair
    gate = middle(0.0, float(min(p[0, r], 0.99)), float(min(p[1, c], 0.99)))
    assert p[2, r] < gate.redundant_from and p[2, c] < gate.contradictory_from
    decided = judge_model.predict(pairs, model, featurizer, fast, middle=gate)
    stages = [d.stage for d in decided]
    assert stages[:3] == ["middle", "middle", "accurate"] and stages[3] in ("fast", "middle", "accurate")
    assert [d.label for d in decided[:2]] == ["redundant", "contradictory"]
    assert "bge-small and the cross-encoder not read" in decided[0].reason
    assert set(cross_read) == {UNSURE, UNSURE[::-1]} | ({UNRELATED, UNRELATED[::-1]} if stages[3] == "accurate"
                                                         else set())
    assert not set(aligned_read) & {*REPEAT, *CHANGE}
    assert decided[2].middle_label in ("redundant", "contradictory", "independent")
    assert decided[0].fast_label is not None and decided[2].fast_label is not None


def test_a_sure_middle_answer_still_never_merges_two_dated_events():
    assert dated_events(*DATED)
    [decided] = judge_model.predict([DATED], gate=judge_model.gate(), middle=middle(0.0, 0.0, 0.0))
    assert decided.stage in ("fast", "middle")
    assert decided.label == "independent"
    if decided.stage == "middle":
        assert decided.overruled


def test_what_each_later_stage_changed_is_read_against_the_stage_before_it():
    def judged(label, cascade, fast=None, mid=None):
        return Judgment(label, "", cascade=cascade, fast_label=fast, middle_label=mid)

    assert judged("redundant", "middle", fast="independent").changed
    assert not judged("redundant", "middle", fast="redundant").changed
    assert judged("independent", "accurate", fast="independent", mid="redundant").changed
    assert not judged("redundant", "accurate", fast="independent", mid="redundant").changed, \
        "the accurate stage is read against the middle one"
    assert judged("redundant", "accurate", fast="independent").changed, "no middle stage: against the fast one"
    assert not judged("redundant", "fast").changed and not judged("redundant", "exact").changed
    assert not dataclasses.replace(judged("redundant", "accurate"), fast_label=None).changed
