"""Which vectors a language's topics are compared in, and where those vectors are kept.

Chinese and English memories never share a topic (``PlacementParams.split_languages``), so each
language may use its own space. WordLlama (the offline embedder) carries little meaning for
Chinese, so by default Chinese topics use multilingual-e5-small ``query:`` vectors: ~17 ms per
text, so each memory is embedded once and the vector kept on its node (``reorg_vector``, with
``reorg_vector_key`` naming the model and a digest of the text it was made from: a vector whose key
does not match — a merge rewrote the text, the model changed — is made again); later cycles read
it back. English stays in the configured embedder's space (``embedding``), which costs nothing
extra. Every topic's stored centroid names the space it is in (``reorg_centroid_space``); one of
another space is recomputed from its members' vectors, never compared across spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import numpy as np

from mem_resources.embedder import (
    E5_QUERY_SPACE,
    EmbedderResource,
    e5_query_embed,
    stored_vector_key,
)

#: The stored-vector model tag: a change of model or prefix invalidates stored vectors.
E5_SPACE = E5_QUERY_SPACE
E5_DIMENSION = 384
#: The configured embedder's own ``embedding`` property.
MAIN_SPACE = "embedding"
#: Placed in the e5 space by default (``MEMTEND_TOPIC_E5_LANGUAGES``); docs/reorg.md says when
#: ``zh,en`` is the better choice.
DEFAULT_E5_LANGUAGES = ("zh",)


class TopicVectorsResource(dg.ConfigurableResource):
    """Per language, the space its topics live in (``MEMTEND_TOPIC_E5_LANGUAGES``, default zh)."""

    e5_languages: list[str] = list(DEFAULT_E5_LANGUAGES)  # noqa: RUF012 - pydantic copies field defaults

    def space(self, language: str) -> str:
        return E5_SPACE if language in self.e5_languages else MAIN_SPACE

    def embed(self, space: str, texts: Sequence[str], embedder: EmbedderResource) -> np.ndarray:
        """Vectors of ``texts`` in ``space``."""
        return e5_query_embed(list(texts)) if space == E5_SPACE else embedder.embed(list(texts))


def vector_key(text: str) -> str:
    """What a stored e5 vector was made from: the model and a digest of the text."""
    return stored_vector_key(E5_SPACE, text)


def space_dimension(space: str, main_dimension: int) -> int:
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
