"""Offline relation judge: lexical rules that need no model and no network.

Method (also in docs/dedup.md). Each text becomes a sequence of content words — English words
lowercased and crudely stemmed, Chinese words from jieba; stop words, subject pronouns and
negation markers dropped, synonyms folded ("enjoys" -> "like", "住在" -> "住") — plus a negation
flag. Then, first match wins:

1. same normalised text                                         -> redundant
2. the two texts are about different people ("wife", "姐姐")      -> independent
3. antonyms across the texts ("likes" / "hates", "单身" / "已婚")   -> contradictory
4. negation differs and most content words are shared           -> contradictory
5. the content words differ in exactly one short span (<= 2 words each side) that is not a
   person's name ("friend Tom" / "friend Anna") and holds a number,
   or sits right next to a single-valued cue ("lives", "works", "name", "color", "住", "叫", "颜色")
                                                                 -> contradictory
6. one text is the other plus extra words (word level, or character level for Chinese), or the
   content words are the same                                    -> redundant
7. anything else                                                  -> independent

When unsure it answers independent, which never merges anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from mem_assets.dedup.labels import Label
from mem_resources.text import CJK, chinese_words, tokens

_NUMBER = re.compile(r"^(?:\d+|[零一二两三四五六七八九十百千万]+)[个只位名岁年月日号]?$")

_EN_STOP = frozenset(
    "a an the and or but of in on at to for from with by as is are was were be been being am do does "
    "did has have had this that these those it its there here very really also still now currently "
    "just so then than too into about over up out years year every each some any".split()
)
_ZH_STOP = frozenset("的 了 是 在 和 也 就 都 而 及 与 或 着 吧 呢 吗 啊 很 已经 现在 目前 一直 还 又 于 , 。".split())
_SUBJECTS = frozenset(
    "user user's users he she i my his her they their me 他 她 我 用户 他们 她们 我们 它 你".split()
)
_EN_NEGATIONS = frozenset(
    "not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot hasn't "
    "haven't longer anymore stopped quit".split()
)
_ZH_NEGATIONS = frozenset("不 不再 没 没有 未 别 从不 从未 再也不 已经不 并不".split())
_ZH_NOT_NEGATIONS = frozenset("不错 不同 不过 不少 不断 不仅 不管 不久".split())
_PEOPLE_WORDS = (
    "wife husband sister brother mother mom father dad son daughter friend boss colleague neighbor "
    "neighbour partner girlfriend boyfriend parents grandmother grandfather cousin "
    "妻子 老婆 丈夫 老公 姐姐 妹妹 哥哥 弟弟 妈妈 母亲 爸爸 父亲 儿子 女儿 朋友 同事 老板 邻居 "
    "男朋友 女朋友 奶奶 爷爷 外婆 外公"
)


def _stem(word: str) -> str:
    if CJK.match(word):
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    for suffix in ("ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _stems(words: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in words.split())


_SYNONYMS = {_stem(k): _stem(v) for k, v in {
    "enjoys": "like", "loves": "like", "adores": "like", "prefers": "like", "fan": "like",
    "favourite": "favorite", "resides": "lives", "employed": "works", "fluent": "fluently",
    "喜爱": "喜欢", "爱": "喜欢", "热爱": "喜欢", "住在": "住", "居住": "住", "定居": "住",
    "上班": "工作", "任职": "工作",
}.items()}
_ANTONYMS = frozenset(frozenset(_stem(w) for w in pair.split()) for pair in (
    "like hates", "like dislikes", "married single", "喜欢 讨厌", "喜欢 厌恶", "单身 已婚",
))
_PEOPLE = _stems(_PEOPLE_WORDS)
_CUES = _stems(
    "lives works job name called age born birthday favorite color colour married hometown city salary phone "
    "email address profession 住 工作 叫 名字 岁 年龄 生日 出生 最 职业 老家 家乡 电话 邮箱 工资 城市 地址 颜色 名叫"
)


@dataclass(frozen=True)
class Analysis:
    words: tuple[str, ...]
    negated: bool

    @property
    def bag(self) -> frozenset[str]:
        return frozenset(self.words)


@lru_cache(maxsize=65536)
def normalize(text: str) -> str:
    return " ".join(tokens(text))


_ZH_NUMERAL = re.compile(r"^([零一二两三四五六七八九十百千]+)([个只位名岁年天次周]?)$")
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}


def _zh_number(numeral: str) -> int:
    """Chinese numerals below 10,000 ("七" 7, "十二" 12, "两百零五" 205) as an integer."""
    total, digit = 0, 0
    for char in numeral:
        if char in _ZH_DIGITS:
            digit = _ZH_DIGITS[char]
        else:
            total += (digit or 1) * _ZH_UNITS[char]
            digit = 0
    return total + digit


_UNITS = frozenset("个只位名岁年月日号天次周")


def _without_values(words: frozenset[str]) -> frozenset[str]:
    """Numbers and measure words say nothing about what two statements are about."""
    return frozenset(w for w in words if w not in _UNITS and not _NUMBER.match(w))


def _split_numerals(word: str) -> list[str]:
    """"七年" → ["7", "年"], as "7年" tokenizes, so one value in two scripts is one word.
    Dates ("三月五日") stay whole, so a changed date remains one substitution."""
    match = _ZH_NUMERAL.match(word)
    if match is None:
        return [word]
    return [str(_zh_number(match.group(1))), *([match.group(2)] if match.group(2) else [])]


@lru_cache(maxsize=65536)
def analyze(text: str) -> Analysis:
    words: list[str] = []
    negated = False
    for token in normalize(text).split():
        if CJK.match(token):
            for word in chinese_words(token):
                if word in _ZH_NEGATIONS:
                    negated = True
                    continue
                if len(word) > 1 and word[0] in "不戒" and word not in _ZH_NOT_NEGATIONS:
                    negated, word = True, word[1:]
                if word not in _ZH_STOP and word not in _SUBJECTS:
                    words.extend(_SYNONYMS.get(part, part) for part in _split_numerals(word))
        elif token in _EN_NEGATIONS or token.endswith("n't"):
            negated = True
        elif token not in _EN_STOP and token not in _SUBJECTS:
            stem = _stem(token)
            words.append(_SYNONYMS.get(stem, stem))
    return Analysis(tuple(words), negated)


def _single_substitution(x: tuple[str, ...], y: tuple[str, ...]
                         ) -> tuple[list[str], list[str], str, str] | None:
    """The one differing span of two word sequences (old, new, the words right before and after
    it), if they differ in exactly one short span."""
    changes = [op for op in SequenceMatcher(None, x, y, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(changes) != 1 or changes[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = changes[0]
    if i2 - i1 > 2 or j2 - j1 > 2:
        return None
    before = x[i1 - 1] if i1 > 0 else ""
    after = x[i2] if i2 < len(x) else ""
    return list(x[i1:i2]), list(y[j1:j2]), before, after


def _only_insertions(x: str | tuple[str, ...], y: str | tuple[str, ...]) -> bool:
    """True when one sequence is the other with material added in one direction only."""
    ops = {op[0] for op in SequenceMatcher(None, x, y, autojunk=False).get_opcodes()} - {"equal"}
    return ops in (set(), {"insert"}, {"delete"})


def _has_cue(words: frozenset[str]) -> bool:
    return any(w in _CUES or (CJK.match(w) and any(c in w for c in _CUES if CJK.match(c))) for w in words)


def judge(a: str, b: str) -> tuple[Label, str]:
    """Label a pair of memory texts, with a one-line reason."""
    if normalize(a) == normalize(b):
        return "redundant", "same text after normalisation"
    x, y = analyze(a), analyze(b)
    shared, only_a, only_b = x.bag & y.bag, x.bag - y.bag, y.bag - x.bag
    if (only_a | only_b) & _PEOPLE:
        return "independent", "about different people"
    if any(frozenset((p, q)) in _ANTONYMS for p in only_a for q in only_b):
        return "contradictory", "opposite statements about the same thing"
    topical = _without_values(shared)
    if not topical:
        return "independent", "no content words in common"
    if x.negated != y.negated and len(topical) / max(1, min(len(_without_values(x.bag)),
                                                          len(_without_values(y.bag)))) >= 0.5:
        return "contradictory", "one statement negates the other"
    if x.negated == y.negated:
        span = _single_substitution(x.words, y.words)
        if span is not None:
            old, new, before, after = span
            if before in _PEOPLE:
                return "independent", "about different people"
            numbers = any(_NUMBER.match(w) for w in old) and any(_NUMBER.match(w) for w in new)
            if numbers or _has_cue(frozenset(w for w in (before, after) if w)):
                return "contradictory", f"different values for one attribute ({' '.join(old)} vs {' '.join(new)})"
        if not only_a and not only_b:
            return "redundant", "same content words"
        if _only_insertions(x.words, y.words):
            return "redundant", "one statement contains the other"
        if CJK.search(a) and _only_insertions("".join(x.words), "".join(y.words)):
            return "redundant", "one statement contains the other"
    return "independent", "different facts"


def informativeness(text: str) -> tuple[int, int]:
    """Sort key for 'the more informative text': more content words, then longer."""
    return len(analyze(text).bag), len(normalize(text))
