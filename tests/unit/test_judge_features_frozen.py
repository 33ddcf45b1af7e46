"""The shipped fast judge model (judge-v2) must keep seeing the numbers it was trained on: any
change to how pair features are computed (a speed-up, a refactor) has to give bit-identical
feature matrices and the same labels on every pair of the judge data. The digests were recorded from the featurizer the
model was trained with (commit c440674), before any speed work; a deliberate feature change
retrains the model and records new digests. Float results come from numpy and WordLlama under the
locked requirements and differ in the last bits between CPUs (numpy's SIMD paths), so the float
digests are recorded per CPU, computed at the commit that recorded the first ones; the labels'
digest is one for all."""

from __future__ import annotations

import gc
import hashlib
import json
from pathlib import Path

import pytest

from mem_assets.dedup import offline_judge_model as judge_model

DATA = Path(__file__).parents[2] / "research" / "data" / "judge"
FEATURES_SHA256 = {"5543d136524d61e8ab0ca227c859ebdbcaee626678ee64bf303635bb4575e3f4",  # recorded at c440674
                   "b60f6370aaf1ea48f4060dbc89ee718355a5ab961031bc3e92765bbec1602163"}  # AMD EPYC, at 7cacb16
LABELS_SHA256 = "cc6e054d661a29083f8ce55fb281130e1265bcd571dccae528c772fff3a9a485"
PROBABILITIES_SHA256 = {"0cc8a50098e8a02a77d1fa7489defe697a3c0b8f795b1ed4f269468339508328",
                        "8b36a78dfc2f81c821ce1aa7e6161e1dd0180b3787702beca51ba7036c11912b"}


#: Groups written after the digests were recorded (for judge-v3, judge-v4, judge-v6 and judge-v7).
LATER_FILES = ("en_13_negated_neighbours:", "zh_11_negated_neighbours:", "zh_12_paraphrase_restated:",
               "zh_13_span_cues:", "en_14_progress_not_change:", "zh_14_progress_not_change:",
               "en_15_idiomatic_negation:", "zh_15_idiomatic_negation:", "en_16_roles_and_attributes:",
               "zh_16_roles_and_attributes:")


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    """Every (a, b) of the train and held-out files, in file order (labels are not read), but
    those of groups written later."""
    return [(row["a"], row["b"]) for name in ("train.jsonl", "heldout.jsonl")
            for row in map(json.loads, (DATA / name).read_text("utf-8").splitlines())
            if not row["group"].startswith(LATER_FILES)]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_feature_matrix_is_bit_identical_to_the_trained_featurizer(pairs):
    features = judge_model.feature_matrix(pairs, deep=False)
    assert features.shape == (5718, len(judge_model.FEATURE_NAMES))
    assert sha256(features.tobytes()) in FEATURES_SHA256


def test_labels_and_probabilities_are_unchanged(pairs):
    """Labels as the pipeline reads pairs (newer-first only where it can change a decision);
    probabilities with every pair read both ways, as when the digests were recorded."""
    model = judge_model.load("fast")
    assert sha256("\n".join(d.label for d in judge_model.predict(pairs, model)).encode()) == LABELS_SHA256
    decided = judge_model.predict(pairs, model, both_orders=True)
    assert sha256("\n".join(d.label for d in decided).encode()) == LABELS_SHA256
    assert sha256("\n".join(f"{d.label}:{d.probability!r}" for d in decided).encode()) in PROBABILITIES_SHA256


def test_featurizing_leaves_the_garbage_collector_as_it_found_it():
    """The featurizer pauses the cyclic collector while it works (speed); the process's setting,
    on or off, must be what it was."""
    pair = [("The user likes tea.", "用户住在杭州")]
    assert gc.isenabled()
    judge_model.feature_matrix(pair)
    assert gc.isenabled()
    gc.disable()
    try:
        judge_model.feature_matrix(pair)
        assert not gc.isenabled()
    finally:
        gc.enable()
