"""The accurate judge's Chinese cross-encoder (mem_assets/dedup/cross_encoder.py): the shipped
ONNX file is the one the judge's trees were trained with, it reads pairs in the judge's order,
and English pairs never reach it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mem_assets.dedup import cross_encoder, judge_model
from mem_assets.dedup.pair_features import CROSS_FEATURE_NAMES
from mem_assets.dedup.training import CLASSES
from mem_resources.settings import DEFAULT_MODELS_DIR


@pytest.fixture(scope="module")
def model() -> cross_encoder.CrossEncoder:
    return cross_encoder.load(DEFAULT_MODELS_DIR)


def test_the_judge_names_the_shipped_cross_encoder_by_digest():
    spec = json.loads(judge_model.model_file("accurate").read_bytes())
    assert spec["features"][-3:] == list(CROSS_FEATURE_NAMES)
    assert spec["cross_encoder_sha256"] == judge_model.cross_encoder_sha256()
    assert judge_model.load("accurate").cross


def test_a_replaced_cross_encoder_file_is_refused(tmp_path, monkeypatch):
    other = tmp_path / "other.onnx"
    other.write_bytes(cross_encoder.MODEL_FILE.read_bytes()[:-1] + b"\0")
    monkeypatch.setattr(cross_encoder, "MODEL_FILE", other)
    judge_model.load.cache_clear()
    judge_model.cross_encoder_sha256.cache_clear()
    try:
        with pytest.raises(ValueError, match="retrain both"):
            judge_model.load("accurate")
    finally:
        judge_model.load.cache_clear()
        judge_model.cross_encoder_sha256.cache_clear()


def test_probabilities_follow_the_training_classes(model):
    pairs = [("用户对猫过敏", "用户对猫已经不过敏了"), ("用户喜欢喝乌龙茶", "用户爱喝乌龙"), ("用户对猫过敏", "用户在上海工作")]
    probabilities = model.probabilities(pairs)
    assert probabilities.shape == (3, 3)
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)
    assert [CLASSES[i] for i in probabilities.argmax(axis=1)] == ["contradictory", "redundant", "independent"]
    assert np.array_equal(model.probabilities(pairs[::-1]), probabilities[::-1])


def test_english_pairs_get_minus_one_and_chinese_pairs_their_probabilities(model):
    pairs = [("The user likes tea.", "The user enjoys tea."), ("用户喜欢喝乌龙茶", "用户爱喝乌龙")]
    columns = judge_model.featurizer(deep=True).matrix(pairs)[:, -len(CROSS_FEATURE_NAMES):]
    assert (columns[0] == -1).all()
    assert np.allclose(columns[1], model.probabilities(pairs[1:])[0])
