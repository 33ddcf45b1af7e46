"""Two placement variants measured in bench/topic_refine_study.py and not shipped (docs/reorg.md,
"Refining new topics, group offers across languages"): refinement of a cycle's new topics
(``RefineParams``) and small groups offered across languages by their mean
(``CrossParams.group_similarity``). Both are off by default; these tests keep the study honest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mem_assets.reorg.placement import (
    CROSS_PARAMS,
    CrossParams,
    LanguagePool,
    PlacementParams,
    RefineParams,
    Topic,
    _Cycle,
    default_topic_id,
    plan_languages,
)
from mem_assets.reorg.vectors import E5_SPACE, to_shared

DIM = 48
PARAMS = PlacementParams(place_similarity=0.5, place_margin=0.05, group_similarity=0.5,
                         merge_similarity=0.6, max_members=20, min_cluster_size=3)


def _theme(rng: np.random.Generator, axis: int, count: int) -> np.ndarray:
    vectors = np.zeros((count, DIM), dtype=np.float32)
    vectors[:, axis] = 1.0
    vectors += rng.normal(0, 0.1, size=(count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Store:
    def __init__(self) -> None:
        self.rng = np.random.default_rng(5)
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, prefix: str, vectors: np.ndarray) -> list[str]:
        ids = [f"{prefix}{i:03d}" for i in range(len(vectors))]
        self.vectors.update(zip(ids, vectors, strict=True))
        return ids

    def lookup(self, ids) -> np.ndarray:
        return np.array([self.vectors[i] for i in ids], dtype=np.float32).reshape(len(ids), DIM)


def _misfiled(refine: RefineParams | None, params: PlacementParams = PARAMS):
    """An existing topic (axis 2) and a pool whose new topics are made by hand with one memory of
    theme 1 filed under theme 0's new topic (as a coarse grouping would); then the cycle refines."""
    store = Store()
    existing = store.add("old-", _theme(store.rng, 2, 8))
    topics = {"old": Topic("old", 1, "en", existing, store.lookup(existing).sum(axis=0, dtype=np.float64), 8)}
    zero, one = store.add("a-", _theme(store.rng, 0, 6)), store.add("b-", _theme(store.rng, 1, 6))
    joining = store.add("c-", _theme(store.rng, 2, 1))
    pool = zero + one + joining
    cycle = _Cycle(topics, pool, store.lookup(pool), ["en"] * len(pool), params, store.lookup,
                   default_topic_id, refine=refine)
    cycle.offer()
    cycle._place_new_leaf(np.array([*range(6), 6]), None, "en")
    cycle._place_new_leaf(np.arange(7, 12), None, "en")
    cycle.refine()
    return store, topics, cycle.finish(), zero, one, joining[0]


def _home(topics: dict[str, Topic], memory: str) -> Topic:
    return next(t for t in topics.values() if t.level == 1 and memory in t.children)


def test_refinement_moves_a_misfiled_member_to_the_new_topic_of_its_theme():
    store, before, plan, zero, one, joining = _misfiled(RefineParams(rounds=3, margin=0.05))
    home, other = _home(plan.topics, one[0]), _home(plan.topics, zero[0])
    assert set(home.children) == set(one) and set(other.children) == set(zero)
    assert plan.placed[one[0]] == home.id
    for topic in (home, other):
        assert topic.member_count == 6
        assert np.allclose(topic.vector_sum, store.lookup(topic.children).sum(axis=0), atol=1e-5)
    assert set(plan.topics["old"].children) == {*before["old"].children, joining}, "existing topics keep theirs"


def test_without_refinement_or_room_the_misfiled_member_stays():
    for refine, params in ((None, PARAMS), (RefineParams(rounds=3, margin=0.05), replace(PARAMS, max_members=5))):
        _, _, plan, zero, one, _ = _misfiled(refine, params)
        assert set(_home(plan.topics, one[0]).children) == {*zero, one[0]}


def test_a_small_group_joins_the_other_languages_topic_by_its_mean():
    """Two Chinese memories alike (a group too small for a topic), each too far from the English
    topic of their theme alone, join it together when offered by their mean."""
    store = Store()
    english = [m for axis in range(3) for m in store.add(f"en{axis}-", _theme(store.rng, axis, 12))]
    chinese = [m for axis in range(3, 6) for m in store.add(f"zh{axis}-", _theme(store.rng, axis, 12))]
    pair = np.zeros((2, DIM), dtype=np.float32)
    pair[:, 0], pair[:, 10], pair[:, 11] = 0.25, 0.95, [0.15, -0.15]
    pair = store.add("zh-pair-", pair / np.linalg.norm(pair, axis=1, keepdims=True))
    langs = {**dict.fromkeys(english, "en"), **dict.fromkeys(chinese + pair, "zh")}

    def plan(topics, ids, cross):
        return plan_languages({lang: LanguagePool({t: v for t, v in topics.items() if v.language == lang},
                                                  own := [i for i in ids if langs[i] == lang],
                                                  store.lookup(own), PARAMS, store.lookup, to_shared(E5_SPACE))
                               for lang in ("en", "zh")}, cross)

    first = plan({}, english + chinese, CROSS_PARAMS)
    topics = {tid: t for p in first.values() for tid, t in p.topics.items()}
    alone = plan(topics, pair, CrossParams(place_similarity=0.3, place_margin=0.05))
    assert set(alone["zh"].set_aside) == set(pair)
    grouped = plan(topics, pair, CrossParams(place_similarity=0.3, place_margin=0.05, group_similarity=0.15))
    after = {tid: t for p in grouped.values() for tid, t in p.topics.items()}
    homes = {_home(after, m).id for m in pair}
    assert len(homes) == 1 and after[homes.pop()].language == "en"
    assert all(m.startswith("en0-") or m in pair for m in _home(after, pair[0]).children)
    assert not grouped["zh"].set_aside
