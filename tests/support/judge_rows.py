"""Probability rows in a shipped judge model's class order, for tests of its gates."""

from __future__ import annotations

import numpy as np

from mem_assets.dedup import offline_judge_model as judge_model
from mem_assets.dedup.relations import ModelKind


def probability_rows(kind: ModelKind, redundant: list[float], contradictory: list[float]) -> np.ndarray:
    """One row per pair: P(redundant), P(contradictory) as given, P(independent) the rest."""
    classes = judge_model.load(kind).classes
    out = np.zeros((len(redundant), 3))
    out[:, classes.index("redundant")] = redundant
    out[:, classes.index("contradictory")] = contradictory
    out[:, classes.index("independent")] = 1 - out.sum(axis=1)
    return out
