"""Cross-language placement (``placement.plan_languages``): a memory that fits no topic of its own
language joins the other language's topic it fits in the shared space, and only then."""

from __future__ import annotations

import numpy as np
import pytest

from mem_assets.reorg.placement import (
    NO_SIMILAR_TOPIC,
    CrossParams,
    LanguagePool,
    PlacementParams,
    Topic,
    plan_languages,
)
from mem_assets.reorg.placement_thresholds import CROSS_PARAMS
from mem_assets.reorg.topic_vectors import (
    COMBINED_SPACE,
    E5_DIMENSION,
    E5_SPACE,
    MAIN_SPACE,
    TopicVectorsResource,
    combine,
    to_shared,
)
from mem_resources.settings import Settings

DIM = 48
PARAMS = PlacementParams(place_similarity=0.5, place_margin=0.05, group_similarity=0.5,
                         merge_similarity=0.6, max_members=20, min_cluster_size=3)
CROSS = CrossParams(place_similarity=0.3, place_margin=0.05)


def _theme(rng: np.random.Generator, axis: int, count: int) -> np.ndarray:
    vectors = np.zeros((count, DIM), dtype=np.float32)
    vectors[:, axis] = 1.0
    vectors += rng.normal(0, 0.1, size=(count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Tenant:
    """Memories of two languages whose vectors (e5-like) share one space."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(3)
        self.vectors: dict[str, np.ndarray] = {}
        self.langs: dict[str, str] = {}

    def add(self, prefix: str, lang: str, axis: int, count: int) -> list[str]:
        ids = [f"{prefix}{i:03d}" for i in range(count)]
        self.vectors.update(zip(ids, _theme(self.rng, axis, count), strict=True))
        self.langs.update(dict.fromkeys(ids, lang))
        return ids

    def lookup(self, ids) -> np.ndarray:
        return np.array([self.vectors[i] for i in ids], dtype=np.float32).reshape(len(ids), DIM)

    def plan(self, topics: dict[str, Topic], ids: list[str], cross: CrossParams | None = CROSS,
             shared: dict[str, bool] | None = None, max_members: int = 20):
        params = PlacementParams(**{**PARAMS.__dict__, "max_members": max_members})
        pools = {}
        for lang in ("en", "zh"):
            own = [i for i in ids if self.langs[i] == lang]
            pools[lang] = LanguagePool({t: v for t, v in topics.items() if v.language == lang}, own,
                                       self.lookup(own), params, self.lookup,
                                       to_shared(E5_SPACE) if (shared or {}).get(lang, True) else None)
        return plan_languages(pools, cross)


def _forest(plans) -> dict[str, Topic]:
    return {tid: t for plan in plans.values() for tid, t in plan.topics.items()}


def _home(topics: dict[str, Topic], memory: str) -> Topic | None:
    return next((t for t in topics.values() if t.level == 1 and memory in t.children), None)


@pytest.fixture
def bilingual() -> tuple[Tenant, dict[str, Topic]]:
    """English themes on axes 0-2, Chinese ones on axes 3-5, 12 memories each, planned once."""
    tenant = Tenant()
    ids = [m for axis in range(3) for m in tenant.add(f"en{axis}-", "en", axis, 12)]
    ids += [m for axis in range(3, 6) for m in tenant.add(f"zh{axis}-", "zh", axis, 12)]
    plans = tenant.plan({}, ids)
    assert not any(plan.set_aside for plan in plans.values())
    topics = _forest(plans)
    assert all({tenant.langs[m] for m in t.children} == {t.language} for t in topics.values() if t.level == 1)
    return tenant, topics


def test_a_memory_that_fits_no_topic_of_its_language_joins_the_other_languages_topic(bilingual):
    tenant, topics = bilingual
    [chinese_on_english] = tenant.add("zh-hiking-", "zh", 0, 1)
    [english_on_chinese] = tenant.add("en-tea-", "en", 4, 1)
    [stray] = tenant.add("zh-stray-", "zh", 40, 1)
    plans = tenant.plan(topics, [chinese_on_english, english_on_chinese, stray])
    after = _forest(plans)
    home = _home(after, chinese_on_english)
    assert home is not None and home.language == "en"
    assert all(m.startswith("en0-") or m == chinese_on_english for m in home.children), "its theme's topic"
    assert _home(after, english_on_chinese).language == "zh"
    assert all(m.startswith("zh4-") or m == english_on_chinese for m in _home(after, english_on_chinese).children)
    assert chinese_on_english not in plans["zh"].set_aside and english_on_chinese not in plans["en"].set_aside
    assert plans["zh"].set_aside[stray].reason == NO_SIMILAR_TOPIC, "what fits nowhere keeps its reason"
    assert _home(after, stray) is None
    placed = [m for t in after.values() if t.level == 1 for m in t.children]
    assert len(placed) == len(set(placed)), "one topic per memory"


def test_without_cross_placement_or_a_shared_space_languages_never_mix(bilingual):
    tenant, topics = bilingual
    [chinese_on_english] = tenant.add("zh-hiking-", "zh", 0, 1)
    for plans in (tenant.plan(topics, [chinese_on_english], cross=None),
                  tenant.plan(topics, [chinese_on_english], shared={"zh": False})):
        assert _home(_forest(plans), chinese_on_english) is None
        assert chinese_on_english in plans["zh"].set_aside


def test_a_memory_of_its_own_languages_topic_stays_there(bilingual):
    tenant, topics = bilingual
    ids = tenant.add("zh-more-", "zh", 3, 3) + tenant.add("en-more-", "en", 1, 3)
    after = _forest(tenant.plan(topics, ids))
    assert all(_home(after, m).language == tenant.langs[m] for m in ids)


def test_guests_never_overfill_a_topic(bilingual):
    tenant, topics = bilingual
    guests = tenant.add("zh-hiking-", "zh", 0, 9)
    plans = tenant.plan(topics, guests, max_members=20)
    after = _forest(plans)
    assert all(_home(after, m) is not None and _home(after, m).language == "en" for m in guests)
    assert max(len(t.children) for t in after.values() if t.level == 1) <= 20
    english = {m for t in after.values() if t.level == 1 and t.language == "en" for m in t.children}
    assert english >= {m for m in tenant.langs if m.startswith("en0-")} | set(guests), "a split loses no member"


def test_a_rebuild_mixes_languages_too():
    tenant = Tenant()
    ids = [m for axis in range(3) for m in tenant.add(f"en{axis}-", "en", axis, 12)]
    ids += tenant.add("zh-hiking-", "zh", 0, 2) + [m for axis in (3, 4) for m in tenant.add(f"zh{axis}-", "zh", axis, 6)]
    after = _forest(tenant.plan({}, ids))
    assert all(_home(after, m).language == "en" for m in ids if m.startswith("zh-hiking-"))


def test_the_shared_space_is_e5_and_the_combined_spaces_e5_half():
    rng = np.random.default_rng(0)
    main, e5 = rng.normal(size=(2, 256)), rng.normal(size=(2, E5_DIMENSION))
    half = to_shared(COMBINED_SPACE)(combine(main, e5))
    cosine = float(half[0] @ half[1] / np.linalg.norm(half[0]) / np.linalg.norm(half[1]))
    assert cosine == pytest.approx(float(e5[0] @ e5[1] / np.linalg.norm(e5[0]) / np.linalg.norm(e5[1])), abs=1e-5)
    assert to_shared(E5_SPACE)(e5) is e5
    assert to_shared(MAIN_SPACE) is None, "the embedder's space relates no languages"


def test_the_settings(tmp_path):
    assert Settings().topic_cross_language is True
    assert Settings(MEMTEND_TOPIC_CROSS_LANGUAGE="false").topic_cross_language is False
    assert TopicVectorsResource().cross_params() == CROSS_PARAMS == CrossParams(place_similarity=0.35, place_margin=0.05)
    path = tmp_path / "thresholds.json"
    path.write_text('{"cross_language": {"place_similarity": 0.4}}', encoding="utf-8")
    assert Settings(MEMTEND_TOPIC_THRESHOLDS=str(path)).topic_thresholds == str(path)
    moved = TopicVectorsResource(thresholds_file=str(path)).cross_params()
    assert (moved.place_similarity, moved.place_margin) == (0.4, CROSS_PARAMS.place_margin)
