"""The one tokenizer: English word runs and Chinese character runs, with jieba for Chinese words.

The embedder, the offline judge and the topic summarizer all read text through here, so "what a
word is" means the same thing in every domain.
"""

from __future__ import annotations

import logging
import re
import unicodedata
import warnings
from collections.abc import Sequence
from functools import cache, lru_cache
from types import ModuleType

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[\u3400-\u9fff\uf900-\ufaff]+")


def normalize(text: str) -> str:
    """NFKC, lower case, typographic apostrophes folded."""
    return unicodedata.normalize("NFKC", text).lower().replace("’", "'")


def tokens(text: str) -> list[str]:
    """English words (with an optional 's/'t suffix) and whole runs of Chinese characters."""
    return _TOKEN.findall(normalize(text))


def is_chinese(token: str) -> bool:
    return bool(CJK.match(token))


@cache
def _jieba() -> ModuleType:
    """jieba, imported on the first Chinese text (it costs every process 0.2 s to import)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
        import jieba
    jieba.setLogLevel(logging.WARNING)
    return jieba


def chinese_tagged(text: str) -> list[tuple[str, str]]:
    """jieba's (word, part-of-speech flag) pairs of ``text``."""
    import jieba.posseg

    _jieba()
    return [(p.word, p.flag) for p in jieba.posseg.lcut(text)]


@lru_cache(maxsize=1 << 16)
def chinese_words(run: str, hmm: bool = True) -> tuple[str, ...]:
    """jieba words of one run of Chinese characters; runs repeat a lot, so they are cached."""
    return tuple(_jieba().lcut(run, HMM=hmm))


def language_of(texts: Sequence[str]) -> str:
    """``zh`` when most texts contain Chinese characters, else ``en``."""
    chinese = sum(1 for text in texts if CJK.search(text))
    return "zh" if chinese * 2 > len(texts) else "en"


_CJK_FUNCTION_CHARS = frozenset("的了是在和也就都而及与或着吧呢吗啊地得之")


@cache
def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, imported on first use: importing scikit-learn costs every
    process 1.5 s, and most runs (ingest, dedup, lifecycle, sensors) never need it."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def content_words(text: str) -> list[str]:
    """English words minus stop words; jieba words of Chinese runs minus function characters."""
    stop = english_stop_words()
    words: list[str] = []
    for token in tokens(text):
        if is_chinese(token):
            words.extend(w for w in chinese_words(token) if not set(w) <= _CJK_FUNCTION_CHARS)
        elif token not in stop:
            words.append(token)
    return words


def _stem(word: str) -> str:
    """Enough folding to match a plural or possessive with its base form."""
    word = word.removesuffix("'s")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def unsupported_words(text: str, sources: Sequence[str]) -> list[str]:
    """Content words of ``text`` that no source contains: English words compared by stem,
    Chinese words as substrings of a source (word boundaries differ between sentences)."""
    english = {_stem(token) for source in sources for token in tokens(source) if not is_chinese(token)}
    normalized = [normalize(source) for source in sources]
    missing = []
    for word in content_words(text):
        found = (any(word in source for source in normalized) if is_chinese(word)
                 else _stem(word) in english)
        if not found:
            missing.append(word)
    return missing
