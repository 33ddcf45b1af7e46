"""Features of a pair of memory texts for the learned offline judge. Pure: text in, numbers out.

What they capture (docs/dedup.md): how much the two say the same thing (semantic cosine, content
word and character overlap with the *subject* removed, so "Caroline ..." / "Caroline ..." shares
nothing by the name alone), where they differ (the aligned differing spans: how long, whether one
text only adds words, whether the change is a number, a date, a negation or an antonym), and cues
of a change over time in the newer text ("moved", "no longer", "搬到", "不再"). ``b`` is the newer.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

import jieba
import jieba.posseg
import numpy as np

from mem_resources.embedder import hashing_embed

Embed = Callable[[Sequence[str]], np.ndarray]

jieba.setLogLevel(logging.WARNING)

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|\d+(?:[.:]\d+)?|[\u3400-\u9fff\uf900-\ufaff]+")

_EN_STOP = frozenset(
    "a an the and or but of in on at to for from with by as is are was were be been being am do does "
    "did has have had this that these those it its there here very really also so then than too into "
    "about over up out some any just which who whom what when where while because since after before "
    "s 's".split())
_ZH_STOP = frozenset("的 了 是 在 和 也 就 都 而 及 与 或 着 吧 呢 吗 啊 很 还 又 于 把 被 给 让 对 个 一个 这 那 地 得".split())
_SUBJECT_WORDS = frozenset(
    "user user's users he she i i'm i've my me mine his her hers him they them their we our us "
    "myself himself herself 用户 我 我们 他 她 他们 她们 你 自己 我家 用户家".split())
_SENTENCE_STARTERS = frozenset(
    "the on in at last every each after before during since for when this next a an my his her our "
    "their once recently yesterday today".split())

_EN_NEGATION = frozenset(
    "not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot couldn't "
    "hasn't haven't hadn't shouldn't wouldn't nobody nothing none neither nor without".split())
_ZH_NEGATION = ("不", "没", "未", "别", "无", "非", "莫", "戒")
_ZH_NOT_NEGATION = frozenset("不错 不同 不过 不少 不断 不仅 不管 不久 不但 无论 非常 不得不 别的 别人 无聊 没想到".split())

_CHANGE_EN = frozenset(
    "moved move moving now anymore longer switched switch changed change quit left leave stopped "
    "stop gave give started start began new newly these nowadays currently recently became become "
    "turned turn instead again no-longer sold traded dropped withdrew canceled cancelled closed "
    "retired divorced outgrown".split())
_CHANGE_ZH = ("搬到", "搬去", "搬家", "现在", "不再", "改", "换", "离职", "辞", "已经", "开始", "最近",
              "如今", "目前", "不干", "戒", "退出", "取消", "放弃", "卖掉", "卖了", "离婚", "转", "变成",
              "又开始", "后来", "好了", "去世", "过世")
_ANTONYMS = [
    ({"like", "likes", "liked", "love", "loves", "loved", "enjoy", "enjoys", "enjoyed", "fan", "favorite",
      "favourite", "passionate", "prefer", "prefers", "adore", "adores", "喜欢", "爱", "热爱", "最爱", "享受",
      "爱好", "迷上"},
     {"hate", "hates", "hated", "dislike", "dislikes", "disliked", "stand", "boring", "tiresome",
      "annoying", "uneasy", "anxious", "讨厌", "厌恶", "受不了", "无聊", "烦", "反感", "焦虑"}),
    ({"married", "spouse", "husband", "wife", "已婚", "结婚"}, {"single", "divorced", "单身", "离婚"}),
    ({"alive", "健在"}, {"died", "passed", "dead", "去世", "过世"}),
    ({"passed", "won", "accepted", "approved", "got", "通过", "赢", "入选", "考过", "选中"},
     {"failed", "lost", "rejected", "denied", "没过", "输", "拒绝", "挂"}),
    ({"left-handed", "左撇子", "左手"}, {"right-handed", "右撇子", "右手"}),
    ({"early", "早"}, {"late", "晚"}),
    ({"buy", "bought", "own", "owns", "买"}, {"rent", "rents", "renting", "租"}),
    ({"aisle", "过道"}, {"window", "靠窗"}),
    ({"afraid", "scared", "terrify", "terrified", "fear", "怕", "害怕"},
     {"enjoy", "enjoys", "bother", "love", "喜欢"}),
]
_PEOPLE = frozenset(
    "wife husband spouse partner sister brother mother mom mum father dad parent son daughter kid child "
    "children friend boss manager colleague coworker neighbor neighbour girlfriend boyfriend grandmother "
    "grandma grandfather grandpa cousin uncle aunt niece nephew teacher student roommate family fam "
    "妻子 老婆 丈夫 老公 姐姐 妹妹 哥哥 弟弟 妈妈 母亲 爸爸 父亲 儿子 女儿 孩子 朋友 同事 老板 邻居 男朋友 女朋友 "
    "奶奶 爷爷 外婆 外公 表哥 表姐 父母 爸妈 室友 同学 老师 上司 家人".split())
_EN_NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_EN_NUMBERS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                    "ninety": 90, "hundred": 100, "once": 1, "twice": 2, "both": 2, "single": 1,
                    "half": 0.5, "dozen": 12, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5})
_ZH_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_NUMERAL = re.compile(r"[零一二两三四五六七八九十百千]+|\d+")
_MONTHS = frozenset(
    "january february march april may june july august september october november december jan feb "
    "mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday "
    "weekend spring summer fall autumn winter morning evening night yesterday".split())
_ZH_TIME = re.compile(r"[零一二两三四五六七八九十\d]+[月号日点]|周[一二三四五六日末]|星期[一二三四五六天日]|[春夏秋冬]天|"
                      r"上周|下周|去年|今年|明年|前年|上个月|下个月|早上|晚上|中午|凌晨")


def _zh_value(numeral: str) -> float:
    if numeral.isdigit():
        return float(numeral)
    total, digit = 0, 0
    for char in numeral:
        if char in _ZH_DIGITS:
            digit = _ZH_DIGITS[char]
        else:
            total += (digit or 1) * {"十": 10, "百": 100, "千": 1000}[char]
            digit = 0
    return float(total + digit)


@dataclass(frozen=True)
class Parsed:
    """One memory text: its content tokens (subject removed) and the cues found in it."""

    tokens: tuple[str, ...]
    chars: str
    numbers: frozenset[float]
    times: frozenset[str]
    negations: int
    change_cues: int
    zh: bool
    subject: str


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("’", "'").strip()


def _en_tokens(text: str) -> tuple[list[str], str]:
    raw = _TOKEN.findall(text)
    subject = ""
    for position, token in enumerate(raw[:6]):
        bare = token.removesuffix("'s")
        if bare[:1].isupper() and bare.lower() not in _SENTENCE_STARTERS and bare.lower() not in _SUBJECT_WORDS \
                and (position > 0 or bare.lower() not in _EN_STOP):
            subject = bare.lower()
            break
    return [t.lower() for t in raw], subject


def _stem(word: str) -> str:
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65536)
def parse(text: str) -> Parsed:
    text = _normalize(text)
    zh = bool(_CJK.search(text))
    numbers: set[float] = set()
    times: set[str] = set()
    negations = 0
    change = 0
    tokens: list[str] = []
    subject = ""
    if zh:
        pieces = list(jieba.posseg.cut(text))
        for index, piece in enumerate(pieces[:3]):
            if piece.flag == "nr" and not subject:
                subject = piece.word
            if piece.word in _SUBJECT_WORDS:
                break
        times.update(_ZH_TIME.findall(text))
        words = [p.word.strip().lower() for p in pieces if p.word.strip()]
    else:
        words, subject = _en_tokens(text)
    for word in words:
        if _CJK.match(word):
            if word in _ZH_NOT_NEGATION:
                tokens.append(word)
                continue
            if word.startswith(_ZH_NEGATION) or word in ("没有",):
                negations += 1
                word = word[1:] if len(word) > 1 else ""
            if any(cue in word for cue in _CHANGE_ZH):
                change += 1
            numbers.update(_zh_value(n) for n in _ZH_NUMERAL.findall(word)
                           if not word.startswith(("一起", "一直", "一点", "一下", "一样", "一般")))
            if word and word not in _ZH_STOP and word not in _SUBJECT_WORDS and word != subject:
                tokens.append(word)
        else:
            if word in _EN_NEGATION or word.endswith("n't"):
                negations += 1
                continue
            if word in _CHANGE_EN:
                change += 1
            if word.isdigit():
                numbers.add(float(word))
            elif word in _EN_NUMBERS:
                numbers.add(float(_EN_NUMBERS[word]))
            if word in _MONTHS:
                times.add(word)
            if word in _EN_STOP or word in _SUBJECT_WORDS or word.removesuffix("'s") == subject:
                continue
            tokens.append(_stem(word))
    if re.search(r"\bno longer\b|\bnot anymore\b|\bany ?more\b", text.lower()):
        change += 1
    chars = "".join(ch for ch in "".join(tokens) if _CJK.match(ch))
    return Parsed(tuple(tokens), chars, frozenset(numbers), frozenset(times), negations, change, zh,
                  subject)


def _antonym_hit(only_a: set[str], only_b: set[str], raw_a: str, raw_b: str) -> float:
    for left, right in _ANTONYMS:
        a_left = any(w in left for w in only_a) or any(w in raw_a for w in left if _CJK.match(w))
        b_right = any(w in right for w in only_b) or any(w in raw_b for w in right if _CJK.match(w))
        a_right = any(w in right for w in only_a) or any(w in raw_a for w in right if _CJK.match(w))
        b_left = any(w in left for w in only_b) or any(w in raw_b for w in left if _CJK.match(w))
        if (a_left and b_right and not a_right) or (a_right and b_left and not b_right):
            return 1.0
    return 0.0


def _char_ngrams(chars: str, n: int) -> set[str]:
    return {chars[i:i + n] for i in range(max(0, len(chars) - n + 1))}


def _jaccard(x: set, y: set) -> float:
    return len(x & y) / len(x | y) if x or y else 0.0


FEATURE_NAMES: tuple[str, ...] = (
    "sem_cos", "lex_cos", "jaccard", "contain_min", "contain_max", "char_jaccard", "char2_jaccard",
    "char_contain_max", "only_a", "only_b", "diff_blocks", "diff_span_a", "diff_span_b",
    "pure_insertion", "same_tokens", "num_both", "num_conflict", "num_same", "num_only_one",
    "time_both", "time_conflict", "neg_a", "neg_b", "neg_diff", "change_b", "change_a",
    "antonym", "len_ratio", "len_min", "zh", "mixed", "subject_same", "subject_differs",
    "people_diff", "soft_contain_a", "soft_contain_b", "soft_contain_min", "unaligned_a",
    "unaligned_b", "diff_cos", "sem_x_jaccard", "neg_diff_x_overlap",
)


def _soft_alignment(x: Sequence[str], y: Sequence[str], vectors: dict[str, np.ndarray]
                    ) -> tuple[float, float, int, int]:
    """Mean best word-to-word cosine each way, and how many words find no partner (< 0.6):
    "allergic" finds "allergy", "hikes" finds "hiking"; a new value finds nothing."""
    if not x or not y:
        return 0.0, 0.0, len(x), len(y)
    sims = np.stack([vectors[w] for w in x]) @ np.stack([vectors[w] for w in y]).T
    best_x, best_y = sims.max(axis=1), sims.max(axis=0)
    return float(best_x.mean()), float(best_y.mean()), int((best_x < 0.6).sum()), int((best_y < 0.6).sum())


def pair_features(a: str, b: str, embed: Embed) -> np.ndarray:
    """The feature vector (FEATURE_NAMES order) of an older text ``a`` and a newer text ``b``;
    ``embed`` gives unit vectors for texts and single words (the semantic embedder)."""
    pa, pb = parse(a), parse(b)
    ta, tb = set(pa.tokens), set(pb.tokens)
    shared = ta & tb
    only_a, only_b = ta - tb, tb - ta
    words = sorted(ta | tb)
    diff_a, diff_b = " ".join(sorted(only_a)), " ".join(sorted(only_b))
    texts = [a, b, *([diff_a, diff_b] if only_a and only_b else [])]
    vectors = embed([*texts, *words])
    sem_cos = float(vectors[0] @ vectors[1])
    diff_cos = float(vectors[2] @ vectors[3]) if only_a and only_b else 0.0
    by_word = dict(zip(words, vectors[len(texts):], strict=True))
    lex = hashing_embed([a, b], 384)
    lex_cos = float(lex[0] @ lex[1])
    soft_a, soft_b, unaligned_a, unaligned_b = _soft_alignment(pa.tokens, pb.tokens, by_word)
    contain_a = len(shared) / len(ta) if ta else 0.0
    contain_b = len(shared) / len(tb) if tb else 0.0
    ops = [op for op in SequenceMatcher(None, pa.tokens, pb.tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    span_a = sum(i2 - i1 for _, i1, i2, _, _ in ops)
    span_b = sum(j2 - j1 for _, _, _, j1, j2 in ops)
    kinds = {op[0] for op in ops}
    ca, cb = _char_ngrams(pa.chars, 1), _char_ngrams(pb.chars, 1)
    ca2, cb2 = _char_ngrams(pa.chars, 2), _char_ngrams(pb.chars, 2)
    char_contain = max(len(ca & cb) / len(ca) if ca else 0.0, len(ca & cb) / len(cb) if cb else 0.0)
    num_both = bool(pa.numbers and pb.numbers)
    time_both = bool(pa.times and pb.times)
    jaccard = _jaccard(ta, tb)
    neg_diff = float((pa.negations > 0) != (pb.negations > 0))
    la, lb = max(1, len(pa.tokens)), max(1, len(pb.tokens))
    people = sum(1 for w in only_a | only_b if w in _PEOPLE or any(p in w for p in _PEOPLE if _CJK.match(p)))
    return np.array([
        sem_cos, lex_cos, jaccard, min(contain_a, contain_b), max(contain_a, contain_b),
        _jaccard(ca, cb), _jaccard(ca2, cb2), char_contain, len(only_a), len(only_b), len(ops),
        span_a, span_b, float(bool(ops) and (kinds <= {"insert"} or kinds <= {"delete"})),
        float(ta == tb), float(num_both), float(num_both and pa.numbers != pb.numbers),
        float(num_both and pa.numbers == pb.numbers), float(bool(pa.numbers) != bool(pb.numbers)),
        float(time_both), float(time_both and not (pa.times & pb.times)),
        float(pa.negations), float(pb.negations), neg_diff, float(pb.change_cues), float(pa.change_cues),
        _antonym_hit(only_a, only_b, a, b), min(la, lb) / max(la, lb), float(min(la, lb)),
        float(pa.zh and pb.zh), float(pa.zh != pb.zh),
        float(bool(pa.subject) and pa.subject == pb.subject),
        float(bool(pa.subject) and bool(pb.subject) and pa.subject != pb.subject),
        float(people), soft_a, soft_b, min(soft_a, soft_b), float(unaligned_a), float(unaligned_b),
        diff_cos, sem_cos * jaccard, neg_diff * max(contain_a, contain_b),
    ], dtype=np.float64)


def informativeness(text: str) -> tuple[int, int]:
    """Sort key for 'the more informative text': more content words, then longer."""
    return len(set(parse(text).tokens)), len(_normalize(text))
