"""The accurate judge's e5 gate: pairs the fast model calls clearly independent are answered
independent without e5. It may only take away a redundant/contradictory decision, never add one;
gated texts are not embedded; the cache key changes with it; a gated judgment says so."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.judgment_cache import judge_pairs
from mem_assets.dedup.offline_judge_features import PairFeaturizer
from mem_assets.dedup.pair_judge import OfflineJudge
from mem_resources import bge
from mem_resources.embedder import e5_embed, wordllama_embed
from mem_resources.settings import DEFAULT_MODELS_DIR

UNRELATED = ("The user plays chess every Sunday.", "用户住在杭州")
PAIRS = [
    ("The user likes tea.", "The user  likes tea."),
    ("The user likes tea", "The user no longer drinks tea"),
    ("The user's sister lives in Berlin.", "The user's sister moved to Paris."),
    ("The user enjoys hiking and finds it the best outdoor activity.", "The user enjoys hiking in the great outdoors."),
    UNRELATED,
    ("Caroline went hiking with friends.", "Melanie bought a new car."),
    ("用户喜欢喝绿茶", "用户不再喝绿茶了"),
]


def test_gate_closes_only_rows_under_the_bound_for_both_classes():
    gate = judge_model.gate("accurate")
    assert gate is not None and gate.name == "judge-v2"
    r, c, i = (gate.model.classes.index(k) for k in ("redundant", "contradictory", "independent"))
    rows = np.zeros((4, 3))
    rows[:, r] = [0.01, gate.below, 0.01, 0.0]
    rows[:, c] = [0.01, 0.0, gate.below + 0.01, 0.0]
    rows[:, i] = 1 - rows[:, r] - rows[:, c]
    assert gate.closed(rows).tolist() == [True, False, False, True]
    assert judge_model.gate("fast") is None


def test_gate_only_turns_decisions_into_independent():
    plain = judge_model.predict(PAIRS)
    gated = judge_model.predict(PAIRS, gate=judge_model.gate())
    assert any(d.gated for d in gated)
    for before, after in zip(plain, gated, strict=True):
        assert after.label == before.label or (after.gated and after.label == "independent")
    assert [d.label for d in gated[:3]] == ["redundant", "contradictory", "contradictory"]
    assert gated[4].gated and gated[4].label == "independent"
    assert gated[4].reason.startswith("gated by judge-v2: P(redundant) = ")


def test_gated_texts_are_not_embedded():
    embedded: list[str] = []

    def deep(texts):
        embedded.extend(texts)
        return e5_embed(texts)

    class Recorded:
        def __init__(self, encoder: bge.TokenEncoder) -> None:
            self.encoder = encoder

        def encode(self, texts: list[str]) -> list[bge.TokenStates]:
            encoded.extend(texts)
            return self.encoder.encode(texts)

    encoded: list[str] = []
    featurizer = PairFeaturizer(wordllama_embed, deep,
                                aligned=lambda language: Recorded(bge.encoder(DEFAULT_MODELS_DIR, language)),
                                cross={language: cross_encoder.load(DEFAULT_MODELS_DIR, language).probabilities
                                       for language in judge_model.load().cross_encoders})
    decided = judge_model.predict([UNRELATED, PAIRS[1]], judge_model.load(), featurizer, judge_model.gate())
    assert decided[0].gated and not decided[1].gated
    assert set(embedded) == set(encoded) == set(PAIRS[1]) and featurizer.deep_skipped == 2


def test_the_gate_changes_the_cache_key_and_judgments_say_why():
    gated, plain = OfflineJudge(), OfflineJudge(gate=False)
    assert gated.fingerprint.startswith(plain.fingerprint + "+gate:judge-v2:")
    assert OfflineJudge(model="fast").fingerprint == OfflineJudge(model="fast", gate=False).fingerprint
    judgments, _ = gated.judge_pairs([UNRELATED])
    assert judgments[0].gated and "e5 not read" in judgments[0].reason
    assert not plain.judge_pairs([UNRELATED])[0][0].gated


def test_judging_report_counts_gated_pairs_and_skipped_e5_passes():
    pairs = pd.DataFrame({"left_id": ["a", "c"], "right_id": ["b", "d"],
                          "left_text": [UNRELATED[0], PAIRS[1][0]], "right_text": [UNRELATED[1], PAIRS[1][1]]})
    report = judge_pairs(pairs, OfflineJudge(), lambda keys: {}, stored_vectors=lambda ids: {})
    assert report.pairs_gated == 1 and report.vectors_skipped == 2 and report.vectors_made == 2
    assert report.cross_encoded == 2, "the opened English pair is read by the English cross-encoder, both orders"
    chinese = pd.DataFrame({"left_id": ["e"], "right_id": ["f"], "left_text": [PAIRS[6][0]],
                            "right_text": [PAIRS[6][1]]})
    assert judge_pairs(chinese, OfflineJudge(), lambda keys: {}, stored_vectors=lambda ids: {}).cross_encoded == 2
    assert [node for node, _, _ in report.vectors_to_store] == ["c", "d"]
