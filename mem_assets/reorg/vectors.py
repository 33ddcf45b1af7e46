"""Which vectors a language's topics are compared in, and where those vectors are kept.

Chinese and English memories never share a topic (``PlacementParams.split_languages``), so each
language may use its own space. WordLlama (the offline embedder) carries little meaning for
Chinese, so by default Chinese topics use multilingual-e5-small ``query:`` vectors: ~17 ms per
text, so each memory is embedded once and the vector kept on its node (``reorg_vector``, with
``reorg_vector_key`` naming the model and a digest of the text it was made from: a vector whose key
does not match — a merge rewrote the text, the model changed — is made again); later cycles read
it back. Every topic's stored centroid names the space it is in (``reorg_centroid_space``); one
of another space is recomputed from its members' vectors, never compared across spaces.

English topics by default use the combined space (``MEMTEND_TOPIC_COMBINED_LANGUAGES``): the
vector of the **topic encoder** (bge-small-en fine-tuned on labeled themes, ``topic_encoder``),
joined with the memory's e5 vector at weight 1e-6, so cosines there are the topic encoder's while
a mean still maps to the e5 space all languages share (cross-language offers). It places more
English, more purely, than the embedder ⊕ e5 space it replaced (docs/reorg.md, "Topic encoder").
The kept vector (``reorg_vector``) is therefore e5 ⊕ topic encoder (768 floats) for every memory
that needs one, so each memory is run through each model at most once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg
import numpy as np

from mem_assets.reorg import topic_encoder
from mem_assets.reorg.placement import COMBINED_PARAMS, E5_PARAMS, PlacementParams
from mem_resources.embedder import (
    E5_QUERY_SPACE,
    EmbedderResource,
    e5_query_embed,
    normalize_rows,
    stored_vector_key,
)

#: The e5 space's stored-centroid tag.
E5_SPACE = E5_QUERY_SPACE
E5_DIMENSION = 384
#: The kept vector's model tag (e5 ⊕ topic encoder): a change of either model re-embeds kept vectors.
KEPT_MODEL = f"{E5_QUERY_SPACE}+{topic_encoder.NAME}"
KEPT_DIMENSION = E5_DIMENSION + topic_encoder.DIMENSION
#: The configured embedder's own ``embedding`` property.
MAIN_SPACE = "embedding"
#: e5's share of a cosine in the combined space: carried only so that a mean maps to the e5 space.
COMBINED_WEIGHT = 1e-6
#: The stored-centroid tag of the combined space: a change of weight or model recomputes centroids.
COMBINED_SPACE = f"{topic_encoder.NAME}+{E5_SPACE}@{COMBINED_WEIGHT:g}"
#: Spaces whose vectors need the kept vector.
NEEDS_E5 = frozenset({E5_SPACE, COMBINED_SPACE})
#: Placed in the e5 space by default (``MEMTEND_TOPIC_E5_LANGUAGES``).
DEFAULT_E5_LANGUAGES = ("zh",)
#: Placed in the combined space by default (``MEMTEND_TOPIC_COMBINED_LANGUAGES``).
DEFAULT_COMBINED_LANGUAGES = ("en",)
#: Each space's shipped thresholds (run config ``memory_clusters`` overrides them per space).
SHIPPED_PARAMS = {MAIN_SPACE: PlacementParams(), E5_SPACE: E5_PARAMS, COMBINED_SPACE: COMBINED_PARAMS}


def combine(main: np.ndarray, e5: np.ndarray, weight: float = COMBINED_WEIGHT) -> np.ndarray:
    """``main`` joined with e5 so that a cosine is ``(1 - weight)`` times ``main``'s plus ``weight``
    times e5's (row by row; each half normalised)."""
    return np.hstack([np.sqrt(1 - weight) * normalize_rows(np.asarray(main, dtype=np.float64)),
                      np.sqrt(weight) * normalize_rows(np.asarray(e5, dtype=np.float64))]).astype(np.float32)


def space_of(language: str, e5_languages: Sequence[str], combined_languages: Sequence[str]) -> str:
    """The topic space of ``language``: combined, e5, else the embedder's."""
    if language in combined_languages:
        return COMBINED_SPACE
    return E5_SPACE if language in e5_languages else MAIN_SPACE


def kept_embed(texts: Sequence[str]) -> np.ndarray:
    """Kept vectors: e5 ``query:`` ⊕ topic encoder."""
    return np.hstack([e5_query_embed(list(texts)), topic_encoder.topic_encoder_embed(list(texts))]).astype(np.float32)


def in_spaces(spaces: Sequence[str], main: Sequence[np.ndarray | None],
              kept: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Each row's vector in its space from its embedder (``main``) and kept (e5 ⊕ topic encoder)
    parts (a part its space does not use may be None); the combined rows are joined in one pass."""
    chosen = [main[row] if space == MAIN_SPACE else np.asarray(kept[row])[:E5_DIMENSION]
              for row, space in enumerate(spaces)]
    joined = [row for row, space in enumerate(spaces) if space == COMBINED_SPACE]
    if joined:
        both = combine(np.stack([np.asarray(kept[row])[E5_DIMENSION:] for row in joined]),
                       np.stack([np.asarray(kept[row])[:E5_DIMENSION] for row in joined]))
        for row, vector in zip(joined, both, strict=True):
            chosen[row] = vector
    return chosen


def to_shared(space: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """The map from ``space`` to the space all languages share (e5 ``query:``), where a memory may
    be offered to the other language's topics; None for a space without an e5 part. Linear, so a
    mean maps to the mean (the combined space's e5 half, unscaled: cosines ignore the scale)."""
    if space == E5_SPACE:
        return _same
    if space == COMBINED_SPACE:
        return _e5_half
    return None


def _same(vectors: np.ndarray) -> np.ndarray:
    return vectors


def _e5_half(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors)[..., -E5_DIMENSION:]


class TopicVectorsResource(dg.ConfigurableResource):
    """Per language, the space its topics live in: e5 for ``MEMTEND_TOPIC_E5_LANGUAGES`` (default
    zh), combined for ``MEMTEND_TOPIC_COMBINED_LANGUAGES``, else the embedder's; and whether a
    memory may join the other language's topics (``MEMTEND_TOPIC_CROSS_LANGUAGE``)."""

    #: pydantic copies field defaults, so the lists are not shared.
    e5_languages: list[str] = list(DEFAULT_E5_LANGUAGES)  # noqa: RUF012
    combined_languages: list[str] = list(DEFAULT_COMBINED_LANGUAGES)  # noqa: RUF012
    #: ``MEMTEND_TOPIC_CROSS_LANGUAGE``: memories may join the other language's topics.
    cross_language: bool = True

    def space(self, language: str) -> str:
        return space_of(language, self.e5_languages, self.combined_languages)

    def embed(self, part: str, texts: Sequence[str], embedder: EmbedderResource) -> np.ndarray:
        """``texts``' vectors of one part, made afresh: the embedder's (``MAIN_SPACE``) or the kept
        vectors (``E5_SPACE``: e5 ⊕ topic encoder); ``in_spaces`` turns parts into a space's vectors."""
        if part == MAIN_SPACE:
            return embedder.embed(list(texts))
        return kept_embed(texts)


def vector_key(text: str) -> str:
    """What a kept vector was made from: the models and a digest of the text."""
    return stored_vector_key(KEPT_MODEL, text)


def space_dimension(space: str, main_dimension: int) -> int:
    if space == COMBINED_SPACE:
        return topic_encoder.DIMENSION + E5_DIMENSION
    return E5_DIMENSION if space == E5_SPACE else main_dimension


def centroid_in_space(centroid: Sequence[float] | None, stored_space: str | None, space: str,
                      main_dimension: int) -> np.ndarray | None:
    """A stored centroid usable in ``space``: same space (centroids written before spaces were
    named are the embedder's) and the space's dimension; else None (recompute from members)."""
    if centroid is None or (stored_space or MAIN_SPACE) != space:
        return None
    if len(centroid) != space_dimension(space, main_dimension):
        return None
    return np.asarray(centroid, dtype=np.float64)
