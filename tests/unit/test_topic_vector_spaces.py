"""Per-language topic spaces: which vectors a language uses, stored centroids only reused in
their own space, and e5 asked only for the languages of the e5 and encoder spaces, once a text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from pydantic import ValidationError

from mem_assets.reorg.evaluation import EvalItem, evaluate_topics
from mem_assets.reorg.placement import PlacementParams
from mem_assets.reorg.placement_thresholds import E5_PARAMS, EMBEDDER_PARAMS, SHIPPED
from mem_assets.reorg.topic_encoder import ENCODERS
from mem_assets.reorg.topic_space import language
from mem_assets.reorg.topic_vectors import (
    COMBINED_SPACE,
    COMBINED_WEIGHT,
    E5_DIMENSION,
    E5_SPACE,
    ENCODER_SPACES,
    KEPT_DIMENSION,
    MAIN_SPACE,
    TopicVectorsResource,
    centroid_in_space,
    combine,
    in_spaces,
    space_dimension,
    to_shared,
)
from mem_resources.embedder import HashingEmbedder
from mem_resources.settings import Settings


def test_languages_choose_their_space():
    vectors = TopicVectorsResource()
    assert vectors.space("zh") == ENCODER_SPACES["zh"] != COMBINED_SPACE
    assert vectors.space("en") == COMBINED_SPACE == ENCODER_SPACES["en"]
    assert TopicVectorsResource(combined_languages=["en"]).space("zh") == MAIN_SPACE
    assert TopicVectorsResource(e5_languages=["zh"], combined_languages=["en"]).space("zh") == E5_SPACE
    assert TopicVectorsResource(combined_languages=[]).space("en") == MAIN_SPACE


@pytest.mark.parametrize(("raw", "expected"), [("zh", ["zh"]), ("en, ZH", ["en", "zh"]), ("none", []), ("", [])])
def test_the_setting_lists_languages(raw, expected):
    assert Settings(topic_e5_languages=raw, topic_combined_languages="none").e5_languages == expected
    assert Settings(topic_e5_languages="none", topic_combined_languages=raw).combined_languages == expected


def test_a_language_has_one_topic_space():
    assert (Settings().e5_languages, Settings().combined_languages) == ([], ["en", "zh"])
    moved = Settings(topic_e5_languages="zh")
    assert (moved.e5_languages, moved.combined_languages) == (["zh"], ["en"]), "e5 takes it from the default"
    with pytest.raises(ValidationError, match="zh: in both .*remove it from one of them"):
        Settings(topic_e5_languages="zh", topic_combined_languages="en,zh")
    overridden = Settings().with_topic_languages(e5="zh")
    assert (overridden.e5_languages, overridden.combined_languages) == (["zh"], ["en"]), "as from the environment"
    assert Settings(topic_combined_languages="en").with_topic_languages().combined_languages == ["en"]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_a_combined_cosine_is_the_weighted_cosines_of_its_halves():
    rng = np.random.default_rng(1)
    main, e5 = rng.normal(size=(2, 64)), rng.normal(size=(2, E5_DIMENSION))
    both = combine(main, e5, 0.8)
    assert both.shape == (2, 64 + E5_DIMENSION)
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-6)
    assert float(both[0] @ both[1]) == pytest.approx(0.2 * cosine(*main) + 0.8 * cosine(*e5), abs=1e-5)


def test_kept_vectors_give_e5_to_the_e5_space_and_each_encoder_to_its_language():
    """A kept vector is e5 ⊕ English encoder ⊕ Chinese encoder; each encoder space compares by its
    encoder's part and still maps to e5 (the space shared across languages)."""
    rng = np.random.default_rng(2)
    kept = rng.normal(size=(2, KEPT_DIMENSION))
    assert KEPT_DIMENSION == E5_DIMENSION + ENCODERS["en"].dimension + ENCODERS["zh"].dimension
    e5 = kept[:, :E5_DIMENSION]
    parts = {"en": kept[:, E5_DIMENSION:E5_DIMENSION + ENCODERS["en"].dimension],
             "zh": kept[:, E5_DIMENSION + ENCODERS["en"].dimension:]}
    as_e5 = in_spaces([E5_SPACE] * 2, [None, None], list(kept))
    assert np.array_equal(np.stack(as_e5), e5)
    for lang, space in ENCODER_SPACES.items():
        joined = np.stack(in_spaces([space] * 2, [None, None], list(kept)))
        assert joined.shape == (2, space_dimension(space, 256))
        assert float(joined[0] @ joined[1]) == pytest.approx(cosine(*parts[lang]), abs=1e-5)
        assert cosine(*to_shared(space)(joined)) == pytest.approx(cosine(*e5), abs=1e-5)
    mixed = in_spaces([ENCODER_SPACES["zh"], COMBINED_SPACE], [None, None], list(kept))
    assert [len(v) for v in mixed] == [space_dimension(ENCODER_SPACES["zh"], 256), space_dimension(COMBINED_SPACE, 256)]
    assert COMBINED_WEIGHT < 1e-5


def test_the_shipped_thresholds_of_each_space_are_those_tuned():
    """The shipped file holds the values placement was tuned and floored with (placement unchanged)."""
    spaces = TopicVectorsResource().space_params()
    assert spaces[MAIN_SPACE] == EMBEDDER_PARAMS == PlacementParams(), "the dataclass defaults are the embedder's"
    assert spaces[E5_SPACE] == E5_PARAMS == PlacementParams(
        place_similarity=0.25, place_margin=0.03, group_similarity=0.15, merge_similarity=0.35,
        attach_similarity=0.10, attach_margin=0.05)
    assert spaces[COMBINED_SPACE] == PlacementParams(
        place_similarity=0.30, group_similarity=0.30, merge_similarity=0.50, min_cluster_size=2,
        theme_similarity=0.10, min_theme_size=4)
    assert spaces[ENCODER_SPACES["zh"]] == spaces[COMBINED_SPACE], "both encoder spaces take combined"


def _thresholds_file(tmp_path, text: str) -> str:
    path = tmp_path / "thresholds.json"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_deployment_overrides_one_space_in_part(tmp_path):
    path = _thresholds_file(tmp_path, '{"e5": {"group_similarity": 0.2, "min_cluster_size": 2}, '
                                      '"combined": {"place_similarity": 0.35}}')
    spaces = TopicVectorsResource(thresholds_file=path).space_params()
    assert (spaces[E5_SPACE].group_similarity, spaces[E5_SPACE].min_cluster_size) == (0.2, 2)
    assert spaces[E5_SPACE].merge_similarity == E5_PARAMS.merge_similarity, "the rest stays shipped"
    assert spaces[COMBINED_SPACE].place_similarity == 0.35
    assert spaces[COMBINED_SPACE].theme_similarity == 0.10, "its shipped themed groups"
    assert spaces[ENCODER_SPACES["zh"]] == spaces[COMBINED_SPACE]
    assert spaces[MAIN_SPACE] == SHIPPED.embedder_params


@pytest.mark.parametrize("text", ['{"e5": {"min_cluster_size": 30}}', '{"e5": {"place_similarty": 0.2}}',
                                  '{"encoder": {}}', '{"combined": {"place_similarity": 2}}'])
def test_a_bad_thresholds_file_is_refused(tmp_path, text):
    with pytest.raises(ValidationError):
        TopicVectorsResource(thresholds_file=_thresholds_file(tmp_path, text)).space_params()


def test_the_setting_refuses_unknown_languages():
    with pytest.raises(ValidationError):
        Settings(topic_e5_languages="zh,fr")


def test_a_stored_centroid_is_used_only_in_its_own_space():
    e5 = [0.1] * E5_DIMENSION
    assert centroid_in_space(e5, E5_SPACE, E5_SPACE, 256) is not None
    assert centroid_in_space([0.1] * 256, None, E5_SPACE, 256) is None, "a WordLlama centroid of an old topic"
    assert centroid_in_space([0.1] * 256, None, MAIN_SPACE, 256) is not None, "written before spaces were named"
    assert centroid_in_space(e5, E5_SPACE, MAIN_SPACE, 384) is None, "same size, other space"
    assert centroid_in_space([0.1] * 255, MAIN_SPACE, MAIN_SPACE, 256) is None
    assert centroid_in_space([0.1] * 256, MAIN_SPACE, COMBINED_SPACE, 256) is None, "an English topic of before"
    assert centroid_in_space([0.1] * (256 + E5_DIMENSION), "embedding+multilingual-e5-small/query@0.8",
                             COMBINED_SPACE, 256) is None, "an English topic of the WordLlama + e5 space"
    combined = [0.1] * space_dimension(COMBINED_SPACE, 256)
    assert centroid_in_space(combined, COMBINED_SPACE, COMBINED_SPACE, 256) is not None
    assert centroid_in_space(combined, "embedding+other@0.5", COMBINED_SPACE, 256) is None
    assert centroid_in_space(e5, E5_SPACE, ENCODER_SPACES["zh"], 256) is None, "a Chinese topic of the e5 space"
    chinese = [0.1] * space_dimension(ENCODER_SPACES["zh"], 256)
    assert centroid_in_space(chinese, ENCODER_SPACES["zh"], ENCODER_SPACES["zh"], 256) is not None
    assert centroid_in_space(None, None, MAIN_SPACE, 256) is None


def _items() -> list[EvalItem]:
    english = {"dog": ["The dog chewed the sofa", "Walked the dog in the park", "The dog barks at night",
                       "Bought dog food"],
               "tea": ["Brewed green tea", "Tea with milk in the morning", "Bought oolong tea", "A tea set"]}
    chinese = {"dog": ["狗狗咬坏了沙发", "在公园遛狗", "狗晚上一直叫", "买了狗粮"],
               "tea": ["泡了一壶绿茶", "早上喝奶茶", "买了乌龙茶", "一套新茶具"]}
    return [EvalItem(text=text, topic=topic, batch=1 + i % 2)
            for themes in (english, chinese) for topic, texts in themes.items() for i, text in enumerate(texts)]


def _fake_kept(seen: list[str]):
    """Distinct kept vectors (e5 ⊕ topic encoder) per theme (a stand-in for the models: what matters
    is who is asked)."""
    def embed(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        rng = np.random.default_rng(0)
        axes = rng.normal(size=(2, KEPT_DIMENSION))
        rows = np.array([axes[int("茶" in text or "tea" in text.lower())] + 0.1 * rng.normal(size=KEPT_DIMENSION)
                         for text in texts])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return embed


def test_only_e5_languages_are_sent_to_e5_and_each_language_plans_in_its_own_space():
    seen: list[str] = []
    report = evaluate_topics(_items(), HashingEmbedder(dimension=64), PlacementParams(), ["zh"], E5_PARAMS,
                             _fake_kept(seen), combined_languages=())
    assert sorted(seen) == sorted(item.text for item in _items() if language(item.text) == "zh"), \
        "each Chinese text embedded once, no English text"
    assert report.by_language["zh"].placed == 1.0
    assert report.by_language["zh"].purity == 1.0
    assert report.near_duplicate_pairs == 0

    none: list[str] = []
    evaluate_topics(_items(), HashingEmbedder(dimension=64), PlacementParams(), [], E5_PARAMS, _fake_kept(none),
                    combined_languages=())
    assert none == []

    both: list[str] = []
    report_both = evaluate_topics(_items(), HashingEmbedder(dimension=64), PlacementParams(), ["zh"], E5_PARAMS,
                                  _fake_kept(both), combined_languages=("en",))
    assert sorted(both) == sorted(item.text for item in _items()), "English too (its encoder space)"
    english = report_both.by_language["en"]
    assert (english.placed, english.purity) == (1.0, 1.0), "English placed by its kept vectors' encoder part"

    default: list[str] = []
    report_default = evaluate_topics(_items(), HashingEmbedder(dimension=64), PlacementParams(), (), E5_PARAMS,
                                     _fake_kept(default))
    assert sorted(default) == sorted(item.text for item in _items()), "each text once, for both encoder spaces"
    assert all((f.placed, f.purity) == (1.0, 1.0) for f in report_default.by_language.values())
