"""Extractive, offline summaries of a cluster: no model, same answer every time.

The value is the member nearest the cluster's centroid (the most typical memory); key and tags
are the cluster's most distinctive terms — frequent in the cluster, rare in the rest of the
tenant's candidates (TF-IDF over clusters; a term in every memory, like "user", scores 0) — and
the background is written in the language most of the members are written in.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from mem_assets.reorg.summarizers import TopicSummary
from mem_resources.text import chinese_words, is_chinese, tokens

_CJK_STOP = frozenset({"我们", "你们", "他们", "今天", "昨天", "一个", "这个", "那个", "已经", "最近",
                       "每天", "每次", "每周", "因为", "所以", "但是", "就是", "还是", "没有", "特别",
                       "用户", "一次", "一只", "一家", "大约"})
#: Memories are written about "the user": naming a topic after that says nothing.
_EN_STOP = ENGLISH_STOP_WORDS | {"user", "users"}


def terms(text: str) -> set[str]:
    """Content words: English words of 3+ letters minus stop words, Chinese words of 2+ characters."""
    found: set[str] = set()
    for token in tokens(text):
        if is_chinese(token):
            found.update(w for w in chinese_words(token, hmm=False)
                         if len(w) >= 2 and w not in _CJK_STOP)
        elif len(token) >= 3 and token[0].isalpha():
            word = token.removesuffix("'s")
            if word not in _EN_STOP:
                found.add(word)
    return found


class TermStats:
    """Document frequencies of terms over all candidates, to tell distinctive terms from common ones."""

    def __init__(self, term_sets: Sequence[set[str]]) -> None:
        self.term_sets = term_sets
        self.documents = len(term_sets)
        self.frequency: Counter[str] = Counter(term for found in term_sets for term in found)

    def distinctive(self, rows: Sequence[int], count: int) -> list[str]:
        in_cluster: Counter[str] = Counter(term for row in rows for term in self.term_sets[row])
        scored = sorted(
            ((hits * math.log(self.documents / self.frequency[term]), term)
             for term, hits in in_cluster.items() if hits >= 2 or len(rows) < 4),
            key=lambda pair: (-pair[0], pair[1]),
        )
        return [term for score, term in scored[:count] if score > 0]


def extractive_summary(texts: Sequence[str], vectors: np.ndarray, rows: Sequence[int],
                       stats: TermStats, language: str, tag_count: int = 5) -> TopicSummary:
    """Key, value, tags and background for the members at ``rows`` of ``texts``/``vectors``."""
    members = vectors[list(rows)]
    centroid = members.mean(axis=0)
    typical = list(rows)[int(np.argmax(members @ centroid))]
    tags = stats.distinctive(rows, tag_count)
    joiner = "、" if language == "zh" else ", "
    key = joiner.join(tags[:3]) or texts[typical][:60]
    if language == "zh":
        background = f"{len(rows)}条关于{joiner.join(tags) or key}的记忆。"
    else:
        background = f"{len(rows)} memories about {joiner.join(tags) or key}."
    return TopicSummary(key=key, value=texts[typical], tags=tags, background=background)
