"""The space topics are compared in: embeddings minus their language's mean, re-normalised.

Offline embedders give every text of one language a large shared component (WordLlama: any two
Chinese memories score ~0.6, any two topic centroids ~0.9), which drowns what a topic is about.
Subtracting the tenant's mean vector per language removes it; what is left separates topics in
both languages. Means come from the run's own data (topic centroids, else the pool), so nothing
extra is stored and they follow the tenant as it grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from mem_resources.embedder import normalize_rows
from mem_resources.text import CJK


def language(text: str) -> str:
    """``zh`` for a text with any Chinese character, else ``en``."""
    return "zh" if CJK.search(text) else "en"


def languages(texts: Iterable[str]) -> np.ndarray:
    return np.array([language(text) for text in texts], dtype=object)


class TopicSpace:
    """Per-language means of a tenant's memories; ``project`` centres and normalises vectors."""

    def __init__(self, means: dict[str, np.ndarray]) -> None:
        self.means = means

    @classmethod
    def fit(cls, topic_langs: Sequence[str], topic_means: np.ndarray, memory_langs: Sequence[str],
            memory_vectors: np.ndarray, min_topics: int = 3) -> TopicSpace:
        """A language with ``min_topics`` top-level topics or more: the plain mean of their means,
        so that one large theme does not pull the centre towards itself (and then look like
        noise). Otherwise the mean of that language's topic members and loose memories."""
        topic_langs = np.asarray(topic_langs, dtype=object)
        memory_langs = np.asarray(memory_langs, dtype=object)
        means: dict[str, np.ndarray] = {}
        for lang in set(topic_langs.tolist()) | set(memory_langs.tolist()):
            of_topics = topic_means[topic_langs == lang] if len(topic_langs) else topic_means[:0]
            of_memories = memory_vectors[memory_langs == lang] if len(memory_langs) else memory_vectors[:0]
            rows = of_topics if len(of_topics) >= min_topics else np.vstack([of_topics, of_memories])
            means[lang] = rows.astype(np.float64).mean(axis=0)
        return cls(means)

    def project(self, vectors: np.ndarray, langs: Sequence[str]) -> np.ndarray:
        """Centre each vector on its language's mean and normalise (a vector may be a mean)."""
        out = np.asarray(vectors, dtype=np.float64).copy()
        langs = np.asarray(langs, dtype=object)
        for lang, mean in self.means.items():
            out[langs == lang] -= mean
        return normalize_rows(out)
