"""Incremental placement on synthetic themes: joins, splits, new topics, merges, refreshes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mem_assets.reorg.placement import (
    AMBIGUOUS,
    NO_SIMILAR_TOPIC,
    PlacementParams,
    Topic,
    near_duplicate_roots,
    plan_cycle,
)

DIM = 48
PARAMS = PlacementParams(place_similarity=0.5, place_margin=0.05, group_similarity=0.5,
                         merge_similarity=0.6, max_members=20, min_cluster_size=3)


def _theme_vectors(rng: np.random.Generator, axis: int, count: int, noise: float = 0.1) -> np.ndarray:
    vectors = np.zeros((count, DIM), dtype=np.float32)
    vectors[:, axis] = 1.0
    vectors += rng.normal(0, noise, size=(count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class Store:
    """Memory vectors by id, as the graph would hold them."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}

    def add(self, prefix: str, vectors: np.ndarray) -> list[str]:
        ids = [f"{prefix}{i:03d}" for i in range(len(vectors))]
        self.vectors.update(zip(ids, vectors, strict=True))
        return ids

    def lookup(self, ids: list[str]) -> np.ndarray:
        return np.array([self.vectors[i] for i in ids])

    def cycle(self, topics: dict[str, Topic], ids: list[str], params: PlacementParams = PARAMS):
        return plan_cycle(topics, ids, self.lookup(ids), ["en"] * len(ids), params, self.lookup)


@pytest.fixture
def seeded() -> tuple[Store, dict[str, Topic], np.random.Generator]:
    """Three themes (axes 0, 1, 2) of 12 memories each, clustered by a first cycle."""
    rng = np.random.default_rng(7)
    store = Store()
    ids = [m for axis in range(3) for m in store.add(f"t{axis}-", _theme_vectors(rng, axis, 12))]
    plan = store.cycle({}, ids)
    assert not plan.set_aside
    return store, plan.topics, rng


def _roots(topics: dict[str, Topic]) -> list[Topic]:
    return [t for t in topics.values() if t.parent is None]


def _memories(topics: dict[str, Topic], tid: str) -> set[str]:
    topic = topics[tid]
    if topic.level == 1:
        return set(topic.children)
    return {m for child in topic.children for m in topics[child].children}


def test_first_cycle_makes_one_topic_per_theme(seeded):
    _, topics, _ = seeded
    roots = _roots(topics)
    assert len(roots) == 3
    assert sorted({m[:2] for m in _memories(topics, r.id)} == {r.children[0][:2]} for r in roots) == [True] * 3
    assert all(t.member_count == len(_memories(topics, t.id)) for t in topics.values())


def test_new_memories_of_a_known_theme_join_its_topic_instead_of_a_new_one(seeded):
    store, topics, rng = seeded
    new = store.add("n1-", _theme_vectors(rng, 1, 4))
    plan = store.cycle(topics, new)
    theme_root = next(r.id for r in _roots(topics) if r.children[0].startswith("t1-"))
    assert set(plan.placed) == set(new)
    assert all(plan.placed[m] == theme_root for m in new)
    assert not plan.created
    assert plan.grown == {theme_root}
    assert len(_roots(plan.topics)) == 3
    assert plan.topics[theme_root].member_count == 16


def test_input_topics_are_not_changed(seeded):
    store, topics, rng = seeded
    before = {tid: (list(t.children), t.member_count) for tid, t in topics.items()}
    store.cycle(topics, store.add("n1-", _theme_vectors(rng, 1, 4)))
    assert {tid: (list(t.children), t.member_count) for tid, t in topics.items()} == before


def test_a_full_topic_splits_into_sub_topics_and_keeps_its_id(seeded):
    store, topics, rng = seeded
    root = next(r for r in _roots(topics) if r.children[0].startswith("t0-"))
    plan = store.cycle(topics, store.add("n0-", _theme_vectors(rng, 0, 12)))
    after = plan.topics[root.id]
    assert after.level == 2 and root.id in plan.promoted and root.id in plan.refresh
    leaves = [plan.topics[c] for c in after.children]
    assert len(leaves) >= 2 and all(2 <= len(leaf.children) <= 20 for leaf in leaves)
    assert _memories(plan.topics, root.id) == set(root.children) | {f"n0-{i:03d}" for i in range(12)}
    assert after.member_count == 24
    assert len(_roots(plan.topics)) == 3


def test_a_full_sub_topic_gets_a_sibling_under_the_same_parent(seeded):
    store, topics, rng = seeded
    plan = store.cycle(topics, store.add("a0-", _theme_vectors(rng, 0, 12)))
    root = next(r for r in _roots(plan.topics) if r.level == 2)
    children_before = set(root.children)
    plan2 = store.cycle(plan.topics, store.add("b0-", _theme_vectors(rng, 0, 20)))
    children_after = set(plan2.topics[root.id].children)
    assert children_before < children_after
    assert all(plan2.topics[c].parent == root.id and len(plan2.topics[c].children) <= 20 for c in children_after)
    assert len(_memories(plan2.topics, root.id)) == 44


def test_a_parent_whose_sub_topic_grows_is_grown_with_its_new_count(seeded):
    """Its child list is unchanged, but its count and centroid are not: it must be written."""
    store, topics, rng = seeded
    plan = store.cycle(topics, store.add("a0-", _theme_vectors(rng, 0, 12)))
    root = next(r for r in _roots(plan.topics) if r.level == 2)
    sub = min(root.children, key=lambda c: plan.topics[c].member_count)
    newcomer = store.add("c0-", store.lookup(plan.topics[sub].children[:1]))
    plan2 = store.cycle(plan.topics, newcomer)
    assert plan2.placed == {newcomer[0]: sub}
    assert set(plan2.topics[root.id].children) == set(root.children)
    assert root.id in plan2.grown and sub in plan2.grown
    assert plan2.topics[root.id].member_count == root.member_count + 1 == len(_memories(plan2.topics, root.id))


def test_an_unrelated_memory_stays_unplaced_with_its_reason(seeded):
    store, topics, rng = seeded
    stray = store.add("x-", _theme_vectors(rng, 30, 1))
    plan = store.cycle(topics, stray)
    aside = plan.set_aside[stray[0]]
    assert aside.reason == NO_SIMILAR_TOPIC and aside.similarity < PARAMS.place_similarity
    assert aside.nearest_topic in plan.topics and aside.group_size == 1
    assert not plan.placed and not plan.created


def test_a_memory_between_two_themes_is_not_filed(seeded):
    store, topics, _ = seeded
    vector = np.zeros((1, DIM), dtype=np.float32)
    vector[0, 0] = vector[0, 1] = 1.0
    both = store.add("both-", vector / np.linalg.norm(vector))
    plan = store.cycle(topics, both, PlacementParams(**{**PARAMS.__dict__, "place_similarity": 0.3}))
    assert plan.set_aside[both[0]].reason == AMBIGUOUS
    assert not plan.placed


def test_a_new_theme_becomes_a_new_topic_and_refreshes_nothing_else(seeded):
    store, topics, rng = seeded
    new = store.add("t5-", _theme_vectors(rng, 5, 6))
    plan = store.cycle(topics, new)
    assert len(plan.created) == 1
    created = plan.topics[next(iter(plan.created))]
    assert set(created.children) == set(new) and created.parent is None
    assert plan.refresh == plan.created


def test_refresh_follows_the_changed_fraction(seeded):
    store, topics, rng = seeded
    root = next(r for r in _roots(topics) if r.children[0].startswith("t2-"))
    small = store.cycle(topics, store.add("s2-", _theme_vectors(rng, 2, 1)))
    assert root.id in small.grown and root.id not in small.refresh
    large = store.cycle(topics, store.add("l2-", _theme_vectors(rng, 2, 3)))
    assert root.id in large.refresh


def test_near_duplicate_top_level_topics_are_joined(seeded):
    store, topics, rng = seeded
    twin = store.add("twin-", _theme_vectors(rng, 0, 6))
    twin_topic = Topic(id="twin", level=1, language="en", children=twin,
                       vector_sum=store.lookup(twin).sum(axis=0).astype(np.float64), member_count=6)
    forest = {**topics, "twin": twin_topic}
    assert near_duplicate_roots(_roots(forest), PARAMS.merge_similarity)
    plan = store.cycle(forest, store.add("t2x-", _theme_vectors(rng, 2, 1)))
    assert not near_duplicate_roots(_roots(plan.topics), PARAMS.merge_similarity)
    assert plan.topics["twin"].parent is not None
    assert len(_roots(plan.topics)) == 3


def test_languages_are_never_mixed():
    rng = np.random.default_rng(3)
    store = Store()
    ids = store.add("m", _theme_vectors(rng, 0, 12))
    langs = ["en"] * 6 + ["zh"] * 6
    plan = plan_cycle({}, ids, store.lookup(ids), langs, PARAMS, store.lookup)
    for topic in plan.topics.values():
        if topic.level == 1:
            assert len({langs[ids.index(m)] for m in topic.children}) == 1


def _facet_vectors(rng: np.random.Generator, axis: int, facet: int, count: int) -> np.ndarray:
    vectors = np.zeros((count, DIM), dtype=np.float32)
    vectors[:, axis], vectors[:, facet] = 0.8, 0.6
    vectors += rng.normal(0, 0.05, size=(count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def faceted() -> tuple[Store, list[str], dict[str, str]]:
    """Theme 0 told in two facets (six memories each), themes 1 and 2, and a pair on axis 3."""
    rng = np.random.default_rng(11)
    store = Store()
    parts = {"facet-a": _facet_vectors(rng, 0, 10, 6), "facet-b": _facet_vectors(rng, 0, 11, 6),
             "one": _theme_vectors(rng, 1, 8), "two": _theme_vectors(rng, 2, 8), "pair": _theme_vectors(rng, 3, 2)}
    ids = [m for name, vectors in parts.items() for m in store.add(f"{name}-", vectors)]
    return store, ids, {m: m.rsplit("-", 1)[0] for m in ids}


#: Tight groups of two or more; themes only by the coarser cut (merge_similarity never joins here).
FACETS = PlacementParams(place_similarity=0.5, place_margin=0.05, group_similarity=0.6, merge_similarity=0.99,
                         max_members=20, min_cluster_size=2)


def _theme_roots(topics: dict[str, Topic], part_of: dict[str, str]) -> dict[str, set[str]]:
    roots: dict[str, set[str]] = {}
    for root in _roots(topics):
        for member in _memories(topics, root.id):
            roots.setdefault(part_of[member], set()).add(root.id)
    return roots


def test_facets_of_one_theme_become_sub_topics_of_one_top_level_topic(faceted):
    store, ids, part_of = faceted
    apart = store.cycle({}, ids, FACETS)
    assert _theme_roots(apart.topics, part_of)["facet-a"] != _theme_roots(apart.topics, part_of)["facet-b"]
    plan = store.cycle({}, ids, replace(FACETS, theme_similarity=0.2))
    roots = _theme_roots(plan.topics, part_of)
    assert roots["facet-a"] == roots["facet-b"] and len(roots["facet-a"]) == 1
    (root,) = roots["facet-a"]
    leaves = [plan.topics[child] for child in plan.topics[root].children]
    assert sorted({part_of[m] for m in leaf.children} for leaf in leaves) == [{"facet-a"}, {"facet-b"}]
    assert all(len(members) == 1 for name, members in roots.items())
    assert len({next(iter(roots[name])) for name in ("facet-a", "one", "two")}) == 3


def test_a_theme_under_min_theme_size_stays_unplaced(faceted):
    store, ids, part_of = faceted
    pair = {m for m in ids if part_of[m] == "pair"}
    assert "pair" in _theme_roots(store.cycle({}, ids, replace(FACETS, theme_similarity=0.2)).topics, part_of)
    plan = store.cycle({}, ids, replace(FACETS, theme_similarity=0.2, min_theme_size=3))
    assert set(plan.set_aside) == pair
    assert {aside.group_size for aside in plan.set_aside.values()} == {2}
    assert "pair" not in _theme_roots(plan.topics, part_of)
