"""The placement cascade (pure): a memory whose nearest topic is clear in the embedder's space
stands at that topic's vector; only uncertain memories (and one representative per new group)
are sent to the models."""

from __future__ import annotations

import numpy as np

from mem_assets.reorg.cascade import (
    BEST_TWO_CLOSE,
    CLEAR,
    NO_TOPIC_FITS,
    REPRESENTATIVE,
    Anchors,
    CascadeParams,
    impute,
    route,
    uncertainty,
)

BAND = CascadeParams(clear_similarity=0.4, clear_margin=0.1, representatives=1, group_similarity=0.5,
                     min_group_size=3)


def _axes(dimension: int = 16) -> np.ndarray:
    return np.eye(dimension, dtype=np.float64)


def test_uncertainty_names_why():
    assert uncertainty(0.9, 0.5, BAND) is None
    assert uncertainty(0.3, 0.5, BAND) == NO_TOPIC_FITS
    assert uncertainty(0.45, 0.0, BAND) == BEST_TWO_CLOSE
    assert uncertainty(0.9, 0.05, BAND) == BEST_TWO_CLOSE
    assert uncertainty(float("nan"), float("nan"), BAND) == NO_TOPIC_FITS


def test_clear_memories_skip_the_models_and_uncertain_ones_pay():
    axes = _axes()
    anchors = Anchors(["tea", "hiking", "chess"], np.stack([axes[0], axes[1], axes[2]]), ["tea", "hiking", "chess"])
    pool = np.stack([axes[0] + 0.05 * axes[5],      # clearly tea
                     axes[1],                       # clearly hiking
                     axes[0] + axes[1],             # between tea and hiking
                     axes[7]])                      # fits nothing
    routing = route(anchors, pool, "en", BAND)
    assert routing.stage[:2] == [CLEAR, CLEAR]
    assert routing.anchor[:2] == ["tea", "hiking"]
    assert routing.stage[2] == BEST_TWO_CLOSE and routing.stage[3] == NO_TOPIC_FITS
    assert routing.paid == [2, 3] and routing.uncertain() == {2: BEST_TWO_CLOSE, 3: NO_TOPIC_FITS}
    stand = impute(routing, {"tea": np.full(4, 1.0), "hiking": np.full(4, 2.0), "chess": np.zeros(4)},
                   {2: np.zeros(4), 3: np.zeros(4)})
    assert set(stand) == {0, 1}
    assert np.allclose(stand[0], 1.0) and np.allclose(stand[1], 2.0)


def test_a_band_of_one_sends_every_memory_to_the_models():
    axes = _axes()
    anchors = Anchors(["tea"], axes[:1], ["tea"])
    routing = route(anchors, np.stack([axes[0]] * 5), "en", CascadeParams())
    assert routing.clear == [] and len(routing.paid) == 5


def test_from_scratch_each_group_pays_for_its_representatives_only():
    rng = np.random.default_rng(0)
    axes = _axes(32)
    pool = np.vstack([axes[k] + 0.05 * rng.normal(size=(10, 32)) for k in range(3)])
    routing = route(Anchors([], np.zeros((0, 32)), []), pool, "en", BAND)
    assert len(routing.groups) == 3
    reps = sorted(row for rows in routing.groups.values() for row in rows)
    assert [routing.stage[row] for row in reps] == [REPRESENTATIVE] * 3
    assert routing.paid == reps and len(routing.clear) == 27
    real = {row: np.full(4, float(row)) for row in reps}
    stand = impute(routing, {}, real)
    for row in routing.clear:
        group = routing.anchor[row]
        assert group is not None and group.startswith("group:")
        assert np.allclose(stand[row], real[routing.groups[group][0]])
        assert routing.groups[group][0] // 10 == row // 10, "a memory stands with its own group"


def test_route_is_deterministic():
    rng = np.random.default_rng(1)
    pool = rng.normal(size=(40, 8))
    first = route(Anchors([], np.zeros((0, 8)), []), pool, "zh", BAND)
    second = route(Anchors([], np.zeros((0, 8)), []), pool, "zh", BAND)
    assert first.stage == second.stage and first.anchor == second.anchor
