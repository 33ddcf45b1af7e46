"""Offline topic summaries: no model, same answer every time.

A topic is named by the phrases that cover most of its members: greedily, the phrase used by
most not-yet-covered members, weighted by how rare it is among the tenant's texts (so "user" or
"week" never name a topic). Phrases are English word stems and pairs of adjacent content words,
and jieba words of Chinese. A level-1 value quotes its most typical member (the one using most
of the covering phrases); a level-2 value is
written from all memories under it and lists its sub-topics, and its key never equals a child's.
Everything is written in the language most members are written in.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import snowballstemmer

from mem_assets.reorg.summarizers import TopicSummary
from mem_resources.text import chinese_words, english_stop_words, is_chinese

_CJK_STOP = frozenset({"我们", "你们", "他们", "今天", "昨天", "一个", "这个", "那个", "已经", "最近",
                       "每天", "每次", "每周", "因为", "所以", "但是", "就是", "还是", "没有", "特别",
                       "用户", "一次", "一只", "一家", "大约"})
#: Memories are written about "the user": naming a topic after that says nothing.
_EN_USER = frozenset({"user", "users"})


#: Words that say nothing about what a topic is about when naming it (how memories are phrased).
_EN_GENERIC = frozenset((
    "got", "get", "gets", "getting", "use", "uses", "used", "using", "new", "noticed", "notice",
    "started", "start", "starts", "want", "wants", "wanted", "week", "weeks", "weekend", "weekends",
    "month", "months", "day", "days", "time", "times", "first", "twice", "year", "years", "today",
    "last", "next", "said", "says", "say", "thinks", "think", "like", "likes", "liked", "love",
    "loves", "loved", "tried", "try", "tries", "made", "make", "makes", "really", "finally", "now",
    "still", "every", "often", "usually", "asked", "ask", "asks", "wrote", "takes", "took", "take",
    "went", "goes", "going", "found", "find", "feels", "felt", "feel", "help", "helps", "helped",
    "told", "keeps", "keep", "kept", "lot", "lots", "hours", "better", "best", "good", "great",
    "thing", "things", "way", "ago", "soon", "just", "also", "even", "enough", "much", "many",
    "little", "big", "bit", "doing", "done", "wants", "planning", "plans", "planned", "considering",
    "thinking", "looking", "trying",
))
_CJK_GENERIC = frozenset({"喜欢", "一点", "时候", "明年", "今年", "家里", "开始", "觉得", "现在", "一下",
                          "很多", "不错", "第一次", "以后", "一定", "下次", "之前", "有点", "不能", "不要",
                          "可以", "还是", "终于", "越来越", "一些", "这里", "那里", "东西", "事情", "好几"})

_PHRASE_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9+#'-]*|[\u3400-\u9fff\uf900-\ufaff]+|[^\sA-Za-z\u3400-\u9fff\uf900-\ufaff]+")
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)

#: A chosen bigram is worth a little more than its words: "peanut allergy" says more than "peanut".
_BIGRAM_BONUS = 1.3


def phrases(text: str) -> dict[str, str]:
    """Phrase keys of a text and how each is written: English word stems and pairs of adjacent
    content words (``w:``/``b:``), jieba words of Chinese runs (``z:``)."""
    found: dict[str, str] = {}
    previous: tuple[str, str] | None = None
    for token in _PHRASE_TOKEN.findall(unicodedata.normalize("NFKC", text)):
        if is_chinese(token):
            previous = None
            for word in chinese_words(token, hmm=False):
                if len(word) >= 2 and word not in _CJK_STOP and word not in _CJK_GENERIC:
                    found.setdefault(f"z:{word}", word)
            continue
        word = token.lower().removesuffix("'s")
        if (not word[:1].isalpha() or len(word) < 3 or word in english_stop_words()
                or word in _EN_USER or word in _EN_GENERIC):
            previous = None
            continue
        stem = _stem(word)
        surface = token.removesuffix("'s") if token[:1].isupper() and token[1:].islower() and found else word
        found.setdefault(f"w:{stem}", surface)
        if previous is not None:
            found.setdefault(f"b:{previous[0]} {stem}", f"{previous[1]} {surface}")
        previous = (stem, surface)
    return found


class PhraseIndex:
    """Phrases of every text of a tenant's memory type, and in how many texts each occurs."""

    def __init__(self, texts: Sequence[str]) -> None:
        per_text = [phrases(text) for text in texts]
        self.keys = [frozenset(found) for found in per_text]
        self.surfaces: dict[str, Counter[str]] = {}
        for found in per_text:
            for key, surface in found.items():
                self.surfaces.setdefault(key, Counter())[surface] += 1
        self.documents = len(texts)
        self.frequency: Counter[str] = Counter(key for keys in self.keys for key in keys)

    def weight(self, key: str) -> float:
        rarity = math.log((1 + self.documents) / (1 + self.frequency[key])) + 1.0
        return rarity * (_BIGRAM_BONUS if key.startswith("b:") else 1.0)

    def surface(self, key: str) -> str:
        """The most common spelling; capitalised when most uses are (names, mid-sentence)."""
        forms = self.surfaces[key]
        capitalised = sum(count for form, count in forms.items() if form[:1].isupper())
        ordered = sorted(forms.items(), key=lambda item: (-item[1], item[0]))
        if capitalised * 2 >= forms.total():
            return next(form for form, _ in ordered if form[:1].isupper())
        return next(form for form, _ in ordered if not form[:1].isupper())

    def cover(self, rows: Sequence[int], count: int,
              avoid: Sequence[frozenset[str]] = ()) -> tuple[list[str], int]:
        """Up to ``count`` phrase keys chosen greedily to cover most of the members at ``rows``
        (each step: members not yet covered that use the phrase, times its rarity in the tenant),
        and how many members the first three cover. Phrases sharing a word with a chosen one are
        skipped; a set equal to one of ``avoid`` is extended so that a parent never repeats a
        child's key."""
        holders: dict[str, set[int]] = {}
        for row in rows:
            for key in self.keys[row]:
                holders.setdefault(key, set()).add(row)
        candidates = sorted(key for key, members in holders.items() if len(members) >= 2 or len(rows) < 4)
        if not candidates:
            candidates = sorted(holders)
        uncovered = set(rows)
        chosen: list[str] = []
        used_words: set[str] = set()
        while len(chosen) < count + len(avoid):
            best = max(
                (key for key in candidates if key not in chosen and not (_words(key) & used_words)),
                key=lambda key: ((len(holders[key] & uncovered) or len(holders[key]) / len(rows)) * self.weight(key), key),
                default=None,
            )
            if best is None:
                break
            chosen.append(best)
            used_words |= _words(best)
            uncovered -= holders[best]
            if len(chosen) >= count and frozenset(chosen[:count]) not in avoid:
                break
        covered = len(set(rows) - set().union(*(holders[key] for key in chosen[:3]))) if chosen else len(rows)
        return chosen, len(rows) - covered


def _words(key: str) -> set[str]:
    return set(key[2:].split(" "))


def typical_first(rows: Sequence[int], index: PhraseIndex, count: int = 5) -> list[int]:
    """``rows`` ordered by how many of the topic's covering phrases each uses (then by row): the
    most typical member first, for a quoted example and for what a model reads first."""
    chosen = set(index.cover(rows, count)[0])
    return sorted(rows, key=lambda row: (-len(chosen & index.keys[row]), row))


def phrase_summary(texts: Sequence[str], rows: Sequence[int], index: PhraseIndex,
                   language: str, child_keys: Sequence[str] = ()) -> TopicSummary:
    """A topic named by the phrases covering most of its members.

    Level 1 (no ``child_keys``): "N memories about a, b and c", then the most typical member.
    Level 2: the same phrases, computed over all members under it, and its sub-topics' keys;
    its key never equals a child's.
    """
    avoid = [frozenset(key.split("、" if "、" in key else ", ")) for key in child_keys]
    chosen, covered = index.cover(rows, 5)
    key_phrases = [index.surface(key) for key in chosen[:3]]
    if child_keys:
        surfaces = [index.surface(key) for key in chosen]
        while frozenset(key_phrases) in avoid and len(key_phrases) < len(surfaces):
            key_phrases = surfaces[:len(key_phrases) + 1]
    tags = [index.surface(key) for key in chosen[:5]]
    zh = language == "zh"
    joiner = "、" if zh else ", "
    key = joiner.join(key_phrases) or texts[rows[0]][:60]
    if key in child_keys:
        key = f"{key}（{len(child_keys)}个子话题）" if zh else f"{key} ({len(child_keys)} sub-topics)"
    n = len(rows)
    about = joiner.join(key_phrases) or key
    if child_keys:
        shown = ("；" if zh else "; ").join(child_keys[:6])
        value = (f"{n}条关于{about}的记忆，分为{len(child_keys)}个子话题：{shown}" if zh
                 else f"{n} memories about {about}, in {len(child_keys)} sub-topics: {shown}")
    else:
        typical = texts[typical_first(rows, index)[0]]
        value = (f"{n}条关于{about}的记忆，例如：{typical}" if zh
                 else f"{n} memories about {about}, e.g. “{typical}”")
    background = (f"{n}条记忆中有{covered}条提到{about}。" if zh
                  else f"{covered} of {n} memories mention {about}.")
    return TopicSummary(key=key[:200], value=value[:2000], tags=tags, background=background)
