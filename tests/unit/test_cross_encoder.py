"""The accurate judge's cross-encoders (mem_assets/dedup/offline_judge_cross_encoder.py): the shipped ONNX files
are the ones the judge's trees were trained with, they read pairs in the judge's order, and each
pair reaches the cross-encoder of its language only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.offline_judge_features import CROSS_FEATURE_NAMES
from mem_resources import bge
from mem_resources.settings import DEFAULT_MODELS_DIR
from research.training.judge_trees import CLASSES


def test_the_judge_names_each_shipped_cross_encoder_by_digest():
    spec = json.loads(judge_model.model_file("accurate").read_bytes())
    assert spec["features"][-3:] == list(CROSS_FEATURE_NAMES)
    assert spec["cross_encoders"] == {language: cross_encoder.sha256(language) for language in ("en", "zh")}
    assert judge_model.load("accurate").cross


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_replaced_cross_encoder_file_is_refused(tmp_path, monkeypatch, language):
    other = tmp_path / "other.onnx"
    other.write_bytes(cross_encoder.MODEL_FILES[language].read_bytes()[:-1] + b"\0")
    monkeypatch.setitem(cross_encoder.MODEL_FILES, language, other)
    judge_model.load.cache_clear()
    cross_encoder.sha256.cache_clear()
    try:
        with pytest.raises(ValueError, match=f"{other.name} is not the file .*retrain both"):
            judge_model.load("accurate")
    finally:
        monkeypatch.undo()
        judge_model.load.cache_clear()
        cross_encoder.sha256.cache_clear()


@pytest.mark.parametrize(("language", "pairs"), [
    ("zh", [("用户对猫过敏", "用户对猫已经不过敏了"), ("用户喜欢喝乌龙茶", "用户爱喝乌龙"), ("用户对猫过敏", "用户在上海工作")]),
    ("en", [("Mia's dog Biscuit is a beagle.", "Mia's dog Biscuit is a golden retriever."),
            ("The user is allergic to cats.", "The user has a cat allergy."),
            ("The user is allergic to cats.", "The user works in Shanghai.")]),
])
def test_probabilities_follow_the_training_classes(language, pairs):
    model = cross_encoder.load(DEFAULT_MODELS_DIR, language)
    probabilities = model.probabilities(pairs)
    assert probabilities.shape == (3, 3)
    assert np.allclose(probabilities.sum(axis=1), 1, atol=1e-4)
    assert [CLASSES[i] for i in probabilities.argmax(axis=1)] == ["contradictory", "redundant", "independent"]
    assert np.array_equal(model.probabilities(pairs[::-1]), probabilities[::-1])


def test_each_pair_gets_the_cross_encoder_of_its_language():
    pairs = [("The user likes tea.", "The user enjoys tea."), ("用户喜欢喝乌龙茶", "用户爱喝乌龙")]
    columns = judge_model.featurizer(deep=True).matrix(pairs)[:, -len(CROSS_FEATURE_NAMES):]
    assert np.allclose(columns[0], cross_encoder.load(DEFAULT_MODELS_DIR, "en").probabilities(pairs[:1])[0])
    assert np.allclose(columns[1], cross_encoder.load(DEFAULT_MODELS_DIR, "zh").probabilities(pairs[1:])[0])
    assert (judge_model.featurizer(deep=True, cross=["zh"]).matrix(pairs[:1])[0, -3:] == -1).all()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_one_sleeping_thread_gives_the_default_sessions_probabilities_bit_for_bit(language):
    """The shipped session (one intra-op thread that sleeps between runs) is a speed setting only:
    onnxruntime's default session gives the same numbers, so stored judgments stay valid."""
    import onnxruntime

    pairs = [("The user is allergic to cats.", "The user has a cat allergy."), ("用户喜欢喝乌龙茶", "用户爱喝乌龙")]
    shipped = cross_encoder.load(DEFAULT_MODELS_DIR, language)
    assert shipped._session.get_session_options().intra_op_num_threads == 1
    reference = onnxruntime.InferenceSession(str(cross_encoder.MODEL_FILES[language]),
                                             providers=["CPUExecutionProvider"])
    for pair in pairs:
        encoded = cross_encoder.tokenizer(bge.existing_jar(DEFAULT_MODELS_DIR, language), language).encode(*pair)
        feed = {name: np.array([getattr(encoded, field)], dtype=np.int64)
                for name, field in zip(cross_encoder.INPUTS, ("ids", "attention_mask", "type_ids"), strict=True)}
        assert np.array_equal(shipped.probabilities([pair])[0], reference.run(None, feed)[0][0].astype(np.float64))
