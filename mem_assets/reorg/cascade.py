"""The placement cascade: a memory pays for its topic-space vector only where the cheap space
cannot decide where it goes.

Every memory already has the configured embedder's vector (``embedding``, WordLlama by default,
~0.1 ms a text). A memory's kept vector (topic encoders, e5 for cross-language offers) costs
~3–15 ms. So before planning, each memory without a kept vector is *routed* in the cheap space:

1. Against the tenant's level-1 topics of its language (their centroids from their members' cheap
   vectors): a memory whose nearest topic is **clear** — cosine ≥ ``clear_similarity`` and ahead
   of the best topic of any other theme by ≥ ``clear_margin`` — takes that topic's centroid in the
   topic space as its vector (no model pass): planning then places it there.
2. What is left is grouped in the cheap space (average linkage at ``group_similarity``); each
   group of ≥ ``min_group_size`` sends its ``representatives`` most central members to the models,
   and the rest is routed again against the topics and these groups: a clear member takes the mean
   of its group's representatives' vectors. So a tenant reorganized from scratch pays about one
   pass per group, not per memory.
3. Every other memory is **uncertain** (``uncertainty``: no topic fits, or the best two are too
   close) and gets its real kept vector — the only ones a costlier judge of membership (a topic
   encoder today, a language model tomorrow) needs to see.

Pure: no Dagster, no Neo4j; the caller embeds the rows ``Routing.paid`` names and imputes the
rest with ``impute``. ``CascadeParams`` with ``clear_similarity`` 1 routes nothing as clear: every
memory pays, as before the cascade.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mem_assets.reorg.clustering import themed_groups
from mem_assets.reorg.topic_space import TopicSpace
from mem_resources.embedder import normalize_rows

CLEAR = "clear"
REPRESENTATIVE = "representative"
NO_TOPIC_FITS = "no_topic_fits"
BEST_TWO_CLOSE = "best_two_close"


@dataclass(frozen=True)
class CascadeParams:
    """Cosines in the cheap (embedder) space, centred on the language's mean. Shipped in
    ``models/placement-thresholds.json`` (``cascade``); chosen in
    research/studies/placement_cascade_rule.md."""

    clear_similarity: float = 1.0
    clear_margin: float = 1.0
    representatives: int = 1
    group_similarity: float = 0.15
    min_group_size: int = 3
    seed: int = 0

    @property
    def enabled(self) -> bool:
        """Whether any memory can be clear (a ``clear_similarity`` above 1 routes none: then
        nothing is routed and every memory gets its kept vector)."""
        return self.clear_similarity <= 1


def uncertainty(similarity: float, margin: float, params: CascadeParams) -> str | None:
    """Why a memory's nearest topic is not clear — no topic fits (``NO_TOPIC_FITS``) or the best
    two themes are too close (``BEST_TWO_CLOSE``) — or None when it is clear."""
    if not similarity >= params.clear_similarity:
        return NO_TOPIC_FITS
    if not margin >= params.clear_margin:
        return BEST_TWO_CLOSE
    return None


@dataclass(frozen=True)
class Anchors:
    """What memories are routed to: existing level-1 topics (by id) with their members' mean cheap
    vector and their theme (top-level topic)."""

    ids: list[str]
    cheap_means: np.ndarray
    themes: list[str]


@dataclass
class Routing:
    """Per row of the routed pool: the anchor it goes to (an existing topic's id, or ``group:<n>``
    for a new cheap group) or None, the cheap cosine to it, its margin over other themes, and its
    stage: ``CLEAR`` (imputed, no model pass), ``REPRESENTATIVE`` or an ``uncertainty`` reason
    (both paid)."""

    anchor: list[str | None]
    similarity: np.ndarray
    margin: np.ndarray
    stage: list[str]
    #: Each new group's representative rows (their vectors' mean is the group's vector).
    groups: dict[str, list[int]] = field(default_factory=dict)

    @property
    def paid(self) -> list[int]:
        """Rows that need their real vector."""
        return [row for row, stage in enumerate(self.stage) if stage != CLEAR]

    @property
    def clear(self) -> list[int]:
        return [row for row, stage in enumerate(self.stage) if stage == CLEAR]

    def uncertain(self) -> dict[int, str]:
        """Rows whose place the cheap space could not tell, with the reason."""
        return {row: stage for row, stage in enumerate(self.stage) if stage in (NO_TOPIC_FITS, BEST_TWO_CLOSE)}


def _best_two(vectors: np.ndarray, centroids: np.ndarray, themes: Sequence[str]) -> tuple[np.ndarray, ...]:
    """Per row: nearest centroid, cosine to it, and the best cosine to a centroid of another theme."""
    n = len(vectors)
    if not len(centroids):
        return np.full(n, -1), np.full(n, -1.0), np.full(n, -1.0)
    codes = np.unique(np.asarray(themes, dtype=object), return_inverse=True)[1]
    best_at, best, second = np.empty(n, dtype=np.int64), np.empty(n), np.empty(n)
    for start in range(0, n, 1024):
        sims = vectors[start:start + 1024] @ centroids.T
        at = sims.argmax(axis=1)
        best_at[start:start + 1024] = at
        best[start:start + 1024] = sims[np.arange(len(at)), at]
        other = np.where(codes[None, :] == codes[at][:, None], -np.inf, sims)
        second[start:start + 1024] = np.maximum(other.max(axis=1), -1.0)
    return best_at, best, second


def route(anchors: Anchors, cheap: np.ndarray, lang: str, params: CascadeParams) -> Routing:
    """Route a pool of one language (``cheap``: its rows' embedder vectors) as the module says."""
    cheap = np.asarray(cheap, dtype=np.float64)
    n = len(cheap)
    space = TopicSpace.fit([lang] * len(anchors.ids), anchors.cheap_means, [lang] * n, cheap,
                           min_topics=3)
    projected = space.project(cheap, [lang] * n) if n else cheap
    routing = Routing([None] * n, np.full(n, np.nan), np.full(n, np.nan), [NO_TOPIC_FITS] * n)
    centroids = space.project(anchors.cheap_means, [lang] * len(anchors.ids)) if anchors.ids else np.zeros((0, 1))
    _assign(routing, np.arange(n), projected, centroids, anchors.ids, anchors.themes, params)
    rest = np.array([row for row in range(n) if routing.stage[row] != CLEAR], dtype=np.int64)
    if len(rest) < max(params.min_group_size, 2):
        return routing
    groups = [g for theme in themed_groups(projected[rest], params.group_similarity, params.group_similarity,
                                           seed=params.seed)
              for g in theme if len(g) >= params.min_group_size]
    if not groups:
        return routing
    ids, themes, means = list(anchors.ids), list(anchors.themes), [centroids]
    for number, g in enumerate(groups):
        rows = rest[g]
        mean = normalize_rows(projected[rows].mean(axis=0))
        order = np.argsort(-(projected[rows] @ mean), kind="stable")[:params.representatives]
        name = f"group:{number}"
        routing.groups[name] = sorted(int(rows[k]) for k in order)
        for row in routing.groups[name]:
            routing.stage[row], routing.anchor[row] = REPRESENTATIVE, name
        ids.append(name)
        themes.append(name)
        means.append(mean[None, :])
    others = np.array([row for row in rest if routing.stage[row] != REPRESENTATIVE], dtype=np.int64)
    _assign(routing, others, projected, np.vstack([m for m in means if m.size]), ids, themes, params)
    return routing


def _assign(routing: Routing, rows: np.ndarray, projected: np.ndarray, centroids: np.ndarray,
            ids: Sequence[str], themes: Sequence[str], params: CascadeParams) -> None:
    if not len(rows) or not len(ids):
        return
    at, best, second = _best_two(projected[rows], centroids, themes)
    for row, k, score, other in zip(rows, at, best, second, strict=True):
        routing.anchor[row] = ids[int(k)]
        routing.similarity[row] = score
        routing.margin[row] = score - other
        routing.stage[row] = uncertainty(float(score), float(score - other), params) or CLEAR


def impute(routing: Routing, topic_means: dict[str, np.ndarray], paid: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Each clear row's vector in the topic space: its topic's mean vector (``topic_means`` by
    id), or its group's representatives' mean (``paid``: the paid rows' real vectors)."""
    means = dict(topic_means)
    for name, reps in routing.groups.items():
        means[name] = np.mean([paid[row] for row in reps], axis=0)
    return {row: np.asarray(means[routing.anchor[row]], dtype=np.float32) for row in routing.clear}
