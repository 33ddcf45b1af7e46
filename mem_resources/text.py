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
from functools import lru_cache

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    import jieba

jieba.setLogLevel(logging.WARNING)

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


@lru_cache(maxsize=1 << 16)
def chinese_words(run: str, hmm: bool = True) -> tuple[str, ...]:
    """jieba words of one run of Chinese characters; runs repeat a lot, so they are cached."""
    return tuple(jieba.lcut(run, HMM=hmm))


def language_of(texts: Sequence[str]) -> str:
    """``zh`` when most texts contain Chinese characters, else ``en``."""
    chinese = sum(1 for text in texts if CJK.search(text))
    return "zh" if chinese * 2 > len(texts) else "en"
