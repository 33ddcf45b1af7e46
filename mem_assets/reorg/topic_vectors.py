"""Which vectors a language's topics are compared in, and where those vectors are kept.

Chinese and English memories never share a space (``PlacementParams.split_languages``), so each
language uses its own. By default (``MEMTEND_TOPIC_COMBINED_LANGUAGES=en,zh``) each language's
topics live in its **encoder space**: the vector of that language's **topic encoder** (bge-small
fine-tuned on labeled themes, ``topic_encoder``) joined with the memory's multilingual-e5-small
``query:`` vector at weight 1e-6, so cosines there are the encoder's while a mean still maps to the
e5 space all languages share (cross-language offers). English got its encoder on 2026-12-03
(docs/reorg.md, "Topic encoder"), Chinese later that day ("A Chinese topic encoder"); before
that Chinese topics lived in plain e5 space (``MEMTEND_TOPIC_E5_LANGUAGES``, still available).

Each memory is run through each model at most once: its **kept vector** (``reorg_vector``: e5 ⊕
English encoder ⊕ Chinese encoder, 1,280 floats), made only for the memories the placement
cascade sends on (``cascade``), is stored on its node (``placement_plan.make_kept``). A space
reads two parts, e5 and its language's encoder (``parts_of``), so a memory gets the other
language's encoder part only when it is offered to that language's topics (as a guest of its
space, ``MemberStore.load`` completing it) — the only place that part is read. Its e5 part
is the ``query:`` vector, not the passage vector the dedup judge keeps (``judge_vector``): sharing
the judge's would run e5 once per memory, but placed worse on every unseen set it was tried on
(research/NOTES.md §2.7). Only cross-language offers read the e5 part, so a cycle of one language
(a tenant of one language, or offers off) places in ``ONE_LANGUAGE_SPACES`` and makes kept vectors
with only its own encoder's part (``PARTS``; the others zeros): no e5 pass, one encoder pass. A
tenant's first cycle of two languages completes the kept vectors it reads (``completed``: only
the missing parts are made) and recomputes its topics' centroids in the encoder spaces. A kept
vector is stored with ``reorg_vector_key`` naming the models of its parts and a digest of the
text it was made from: a vector whose key does not match — a merge rewrote the text, a model
changed — is made again; later cycles read it back. Every topic's
stored centroid names the space it is in (``reorg_centroid_space``); one of another space is
recomputed from its members' vectors, never compared across spaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg
import numpy as np

from mem_assets.reorg.cascade import CascadeParams
from mem_assets.reorg.placement import CrossParams, PlacementParams
from mem_assets.reorg.placement_thresholds import SHIPPED, PlacementThresholds
from mem_assets.reorg.topic_encoder import ENCODERS, topic_encoder_embed
from mem_resources.embedder import (
    E5_QUERY_SPACE,
    e5_query_embed,
    normalize_rows,
    stored_vector_key,
)

#: The e5 space's stored-centroid tag: the ``query:`` vector (the judge's passage vector placed
#: worse: fresh5, unseen, purity 0.602 -> 0.585 with re-tuned cross-language offers).
E5_SPACE = E5_QUERY_SPACE
E5_DIMENSION = 384
#: The kept vector's parts: e5 and each language's encoder. A part not made is zeros (a memory
#: never offered to the other language's topics needs no part of that language's encoder; one
#: placed while its tenant's cycles held one language needs only its own encoder's part).
PARTS: tuple[str, ...] = ("e5", *ENCODERS)
#: Each part's model tag, in its stored key: a change of any model makes that part again.
_PART_TAGS = {"e5": E5_SPACE, **{language: model.name for language, model in ENCODERS.items()}}
KEPT_DIMENSION = E5_DIMENSION + sum(model.dimension for model in ENCODERS.values())
#: The configured embedder's own ``embedding`` property.
MAIN_SPACE = "embedding"
#: e5's share of a cosine in an encoder space: carried only so that a mean maps to the e5 space.
COMBINED_WEIGHT = 1e-6
#: Each language's encoder space, by its stored-centroid tag: a change of weight or model
#: recomputes centroids.
ENCODER_SPACES: dict[str, str] = {language: f"{model.name}+{E5_SPACE}@{COMBINED_WEIGHT:g}"
                                  for language, model in ENCODERS.items()}
#: Each language's encoder space in a cycle of one language: the encoder's cosines alone (the e5
#: part, which only cross-language offers read, is zeros), so no e5 pass is needed. Within 2e-6
#: of the encoder space's cosines (e5 weighs ``COMBINED_WEIGHT``): the same placements. A
#: second language's first cycle recomputes the centroids in ``ENCODER_SPACES``.
ONE_LANGUAGE_SPACES: dict[str, str] = {language: f"{model.name}@one-language" for language, model in ENCODERS.items()}
_LANGUAGE_OF_SPACE = {space: language for spaces in (ENCODER_SPACES, ONE_LANGUAGE_SPACES)
                      for language, space in spaces.items()}
#: English's encoder space (the "combined space" of docs/reorg.md).
COMBINED_SPACE = ENCODER_SPACES["en"]
#: Spaces whose vectors need the kept vector with its e5 part.
NEEDS_E5 = frozenset({E5_SPACE, *ENCODER_SPACES.values()})
#: Spaces whose vectors need a kept vector (with or without e5).
NEEDS_KEPT = NEEDS_E5 | frozenset(ONE_LANGUAGE_SPACES.values())
#: Placed in the e5 space by default (``MEMTEND_TOPIC_E5_LANGUAGES``): none since the Chinese encoder.
DEFAULT_E5_LANGUAGES: tuple[str, ...] = ()
#: Placed in their encoder's space by default (``MEMTEND_TOPIC_COMBINED_LANGUAGES``).
DEFAULT_COMBINED_LANGUAGES = ("en", "zh")


def space_params(thresholds: PlacementThresholds) -> dict[str, PlacementParams]:
    """Each space's thresholds by its stored-centroid tag: both encoder spaces take the
    ``combined`` ones (research/studies/topic_zh_encoder_rule.md chose them for Chinese too)."""
    return {MAIN_SPACE: thresholds.embedder_params, E5_SPACE: thresholds.e5_params,
            **dict.fromkeys([*ENCODER_SPACES.values(), *ONE_LANGUAGE_SPACES.values()], thresholds.combined_params)}


#: Each space's shipped thresholds (``models/placement-thresholds.json``).
SHIPPED_PARAMS = space_params(SHIPPED)


def _kept_slices() -> dict[str, slice]:
    """Where each part sits in the kept vector: e5's 384 floats, then each language's encoder."""
    slices, at = {"e5": slice(0, E5_DIMENSION)}, E5_DIMENSION
    for language, model in ENCODERS.items():
        slices[language] = slice(at, at + model.dimension)
        at += model.dimension
    return slices


_KEPT_SLICES = _kept_slices()


def combine(main: np.ndarray, e5: np.ndarray, weight: float = COMBINED_WEIGHT) -> np.ndarray:
    """``main`` joined with e5 so that a cosine is ``(1 - weight)`` times ``main``'s plus ``weight``
    times e5's (row by row; each half normalised)."""
    return np.hstack([np.sqrt(1 - weight) * normalize_rows(np.asarray(main, dtype=np.float64)),
                      np.sqrt(weight) * normalize_rows(np.asarray(e5, dtype=np.float64))]).astype(np.float32)


def space_of(language: str, e5_languages: Sequence[str], combined_languages: Sequence[str],
             two_languages: bool = True) -> str:
    """The topic space of ``language``: its encoder's (without e5 in a cycle of one language,
    ``two_languages`` False), e5, else the embedder's."""
    if language in combined_languages and language in ENCODER_SPACES:
        return ENCODER_SPACES[language] if two_languages else ONE_LANGUAGE_SPACES[language]
    return E5_SPACE if language in e5_languages else MAIN_SPACE


def is_encoder_space(space: str) -> bool:
    return space in _LANGUAGE_OF_SPACE


def kept_embed(texts: Sequence[str], parts: Sequence[str] = PARTS) -> np.ndarray:
    """Kept vectors: e5 (``E5_SPACE``) ⊕ each language's topic encoder; a part not in ``parts``
    is zeros."""
    return completed(np.zeros((len(texts), KEPT_DIMENSION), dtype=np.float32), texts, parts)


def completed(kept: np.ndarray, texts: Sequence[str], parts: Sequence[str] = PARTS) -> np.ndarray:
    """Kept vectors with each of ``parts`` they lack made (only for the rows that lack it)."""
    out = np.array(kept, dtype=np.float32).reshape(len(texts), KEPT_DIMENSION)
    for part in parts:
        rows = np.flatnonzero(~out[:, _KEPT_SLICES[part]].any(axis=1))
        if len(rows):
            chosen = [texts[row] for row in rows]
            out[rows, _KEPT_SLICES[part]] = (e5_query_embed(chosen) if part == "e5"
                                             else topic_encoder_embed(chosen, part)).reshape(len(rows), -1)
    return out


def present(kept: np.ndarray) -> tuple[str, ...]:
    """The parts a kept vector was made with."""
    kept = np.asarray(kept)
    return tuple(part for part in PARTS if kept[_KEPT_SLICES[part]].any())


def parts_of(space: str) -> tuple[str, ...]:
    """The kept parts a vector of ``space`` is made from (``in_spaces``): a one-language space its
    encoder's; an encoder space e5 (offers) and its language's encoder, whatever the member's own
    language; the e5 space e5."""
    if space in ONE_LANGUAGE_SPACES.values():
        return (_LANGUAGE_OF_SPACE[space],)
    if is_encoder_space(space):
        return ("e5", _LANGUAGE_OF_SPACE[space])
    return ("e5",) if space == E5_SPACE else ()


def lacks(kept: np.ndarray | None, space: str) -> bool:
    """Whether a kept vector (None: none) lacks a part ``space`` reads."""
    return kept is None or not set(parts_of(space)) <= set(present(kept))


def in_spaces(spaces: Sequence[str], main: Sequence[np.ndarray | None],
              kept: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Each row's vector in its space from its embedder (``main``) and kept (e5 ⊕ encoders) parts
    (a part its space does not use may be None); each encoder space's rows are joined in one pass
    (a one-language space with its e5 part zeros)."""
    chosen = [main[row] if space == MAIN_SPACE else np.asarray(kept[row])[:E5_DIMENSION]
              for row, space in enumerate(spaces)]
    for space, language in _LANGUAGE_OF_SPACE.items():
        joined = [row for row, of_row in enumerate(spaces) if of_row == space]
        if joined:
            e5 = np.stack([np.asarray(kept[row])[_KEPT_SLICES["e5"]] for row in joined])
            both = combine(np.stack([np.asarray(kept[row])[_KEPT_SLICES[language]] for row in joined]),
                           e5 if space in NEEDS_E5 else np.zeros_like(e5))
            for row, vector in zip(joined, both, strict=True):
                chosen[row] = vector
    return chosen


def moved_to(vector: np.ndarray, space: str, target: str) -> np.ndarray | None:
    """A vector of ``space`` in ``target``: the same vector, or an encoder space's without its e5
    part in the language's one-language space (exact); None where it cannot be (no e5 to add)."""
    if space == target:
        return vector
    if space in ENCODER_SPACES.values() and target == ONE_LANGUAGE_SPACES[_LANGUAGE_OF_SPACE[space]]:
        moved = np.array(vector, dtype=np.float32)
        moved[-E5_DIMENSION:] = 0
        return moved
    return None


def to_shared(space: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """The map from ``space`` to the space all languages share (e5 passage), where a memory may
    be offered to the other language's topics; None for a space without an e5 part. Linear, so a
    mean maps to the mean (an encoder space's e5 part, unscaled: cosines ignore the scale)."""
    if space == E5_SPACE:
        return _same
    if space in NEEDS_E5:
        return _e5_half
    return None


def _same(vectors: np.ndarray) -> np.ndarray:
    return vectors


def _e5_half(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors)[..., -E5_DIMENSION:]


class TopicVectorsResource(dg.ConfigurableResource):
    """Per language, the space its topics live in: its encoder's for
    ``MEMTEND_TOPIC_COMBINED_LANGUAGES`` (default en,zh), e5 for ``MEMTEND_TOPIC_E5_LANGUAGES``
    (default none), else the embedder's; whether a memory may join the other language's topics
    (``MEMTEND_TOPIC_CROSS_LANGUAGE``); and each space's placement thresholds
    (``MEMTEND_TOPIC_THRESHOLDS`` over the shipped ones)."""

    #: pydantic copies field defaults, so the lists are not shared.
    e5_languages: list[str] = list(DEFAULT_E5_LANGUAGES)  # noqa: RUF012
    combined_languages: list[str] = list(DEFAULT_COMBINED_LANGUAGES)  # noqa: RUF012
    #: ``MEMTEND_TOPIC_CROSS_LANGUAGE``: memories may join the other language's topics.
    cross_language: bool = True
    #: ``MEMTEND_TOPIC_THRESHOLDS``: a JSON file overriding the shipped placement thresholds in
    #: part (``placement_thresholds``); empty: the shipped ones.
    thresholds_file: str = ""

    def thresholds(self) -> PlacementThresholds:
        return SHIPPED.with_file(self.thresholds_file)

    def space_params(self) -> dict[str, PlacementParams]:
        """The thresholds of each topic space."""
        return space_params(self.thresholds())

    def cross_params(self) -> CrossParams:
        return self.thresholds().cross_params

    def cascade_params(self) -> CascadeParams:
        """Which memories are placed from the embedder's space without a kept vector (``cascade``)."""
        return self.thresholds().cascade_params

    def space(self, language: str, two_languages: bool = True) -> str:
        return space_of(language, self.e5_languages, self.combined_languages, two_languages)


def vector_key(text: str, parts: Sequence[str] = PARTS) -> str:
    """What a kept vector was made from: the models of its parts and a digest of the text."""
    return stored_vector_key("+".join(_PART_TAGS[part] for part in PARTS if part in parts), text)


def is_kept_key(key: str | None, text: str, kept: np.ndarray) -> bool:
    """Whether a stored kept vector's key says it was made from ``text`` by the current models."""
    return key == vector_key(text, present(kept))


def space_dimension(space: str, main_dimension: int) -> int:
    if is_encoder_space(space):
        return ENCODERS[_LANGUAGE_OF_SPACE[space]].dimension + E5_DIMENSION
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
