"""Guards on a judge's answer: two memories are not redundant when their roles differ, and one
does not supersede the other unless it states the same kind of thing about its subject.

Pure and rule-based (a small reading of who does what in English and, with jieba, in Chinese),
applied to every judge's answer — offline, LLM or routed — after it labels a pair and before the
pair is cached and resolutions are planned (``guard_judgments``, called by
``judgment_cache.judge_pairs`` and by ``evaluation.evaluate``). Precision first: a guard only
turns ``redundant`` or ``contradictory`` into ``independent``, with its reason; it never makes a
merge or a supersede, and two texts equal after normalisation are never guarded.

- ``roles``: one action (the same word stem) done by two different named doers —
  "Sam thanks Ana for her support" / "Sam supports Ana" (the support is Ana's in one, Sam's in
  the other); "张伟支持李娜" / "李娜支持张伟".
- ``attribute``: a contradiction where one text states an attitude (thinks, likes, 觉得, 喜欢) and
  the other a fact of another kind (owns, works, 有), the attitude not asserting the fact's object
  ("his car") — "does not own a car" / "thinks cars waste money".
- ``several``: one of the same kind under two names — "has a cat named Luna" / "has a cat named
  Milo" (two cats, not a rename), "我有一只叫咪咪的猫" / "我有一只叫球球的猫".
- ``stage``: a redundancy between a plan or a thing under way and its completion — "用户正在准备
  CKA 考试" / "用户通过了 CKA 考试", "is preparing for the exam" / "passed the exam": a later stage,
  not the same fact told twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from mem_assets.dedup.llm_judge_prompt import JudgeRequest
from mem_assets.dedup.pair_judge import Judgment
from mem_assets.dedup.relations import Label
from mem_resources.memory_model import normalize_text
from mem_resources.text import chinese_tagged

GUARDS = "resolution-guards-v4"
"""Versions the guards; part of the judgment cache key, so a change re-judges cached pairs."""

_USER = "@user"
_UNKNOWN = "?"

# --- English ---------------------------------------------------------------------------------

_EN_TOKEN = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)*|[,.;:!?()]")
_EN_STOP = frozenset(
    "a an the and or but of in on at to for from with by as is are was were be been being am do does did "
    "has have had this that these those it its there here very really also so then than too into about "
    "over up out some any just which who whom what when where while because since after before not no "
    "never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot will would can could should "
    "may might must shall still now always often usually recently currently already again ever even more "
    "most much many lot lots other another each every all both".split())
_EN_BOUNDARY_WORDS = frozenset(
    "that who which whom whose because while when whenever after before since so but although though if "
    "where until unless whereas".split())
_EN_STARTERS = frozenset(
    "the on in at last every each after before during since for when this next a an our their once "
    "recently yesterday today however also then now lately".split())
_EN_MONTHS = frozenset(
    "january february march april may june july august september october november december monday "
    "tuesday wednesday thursday friday saturday sunday".split())
_CONTRACTION = re.compile(r"'(?:m|ve|ll|d|re)$")
_EN_SUBJECT_PRONOUNS = {"i": _USER, "we": _UNKNOWN, "he": _UNKNOWN, "she": _UNKNOWN, "they": _UNKNOWN,
                        "you": _UNKNOWN}
_EN_OBJECT_PRONOUNS = {"me": _USER, "us": _UNKNOWN, "him": _UNKNOWN, "her": _UNKNOWN, "them": _UNKNOWN}
_EN_POSSESSIVES = {"my": _USER, "our": _UNKNOWN, "his": _UNKNOWN, "her": _UNKNOWN, "their": _UNKNOWN,
                   "your": _UNKNOWN}
#: "X thanks Y for …": what follows "for" is Y's doing.
_EN_GRATITUDE = frozenset(
    "thank thanks thanked thanking grateful thankful appreciate appreciates appreciated appreciative "
    "credit credits credited praise praises praised".split())
#: Actions done together or to each other: "Sam married Ana" is "Ana married Sam".
_EN_SYMMETRIC = frozenset(
    "meet met meeting marry married marri date dated dating divorce divorced hug hugged kiss kissed talk "
    "talked chat chatted fight fought argue argued agree agreed play played hang friend friends partner "
    "reconnect reconnected together each related similar same like alike share shared".split())
_EN_MUTUAL = re.compile(r"\b(?:each other|one another|together|both of them|mutual(?:ly)?)\b", re.IGNORECASE)


def _en_stem(word: str) -> str:
    word = word.lower().replace("’", "'").removesuffix("'s")
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("ive", ""),
                         ("ment", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


@dataclass(frozen=True)
class _Token:
    word: str
    lower: str
    person: str | None
    """Who the token names: a lower-cased name, ``@user``, or ``?`` (a pronoun not resolved)."""
    possessive: bool = False


def _en_tokens(text: str) -> list[_Token]:
    """Words and punctuation; names (capitalised mid-sentence, or first when not a sentence starter)
    and pronouns carry the person they name."""
    raw = _EN_TOKEN.findall(text)
    tokens: list[_Token] = []
    i = 0
    while i < len(raw):
        word = raw[i].replace("’", "'")
        lower = _CONTRACTION.sub("", word.lower())
        bare = word.removesuffix("'s")
        if lower in ("user", "user's"):
            tokens.append(_Token("user", "user", _USER, lower.endswith("'s")))
            i += 1
            continue
        if lower == "the" and i + 1 < len(raw) and raw[i + 1].lower().removesuffix("'s") == "user":
            tokens.append(_Token("user", "user", _USER, raw[i + 1].lower().endswith("'s")))
            i += 2
            continue
        capital = bare[:1].isupper() and bare.lower() not in _EN_MONTHS and bare.lower() not in _EN_STOP
        if capital and (i > 0 or bare.lower() not in _EN_STARTERS) and lower not in _EN_SUBJECT_PRONOUNS \
                and lower not in _EN_POSSESSIVES and len(bare) > 1 and not bare.isupper():
            parts = [bare]
            possessive = word.endswith("'s")
            while not possessive and i + 1 < len(raw) and raw[i + 1][:1].isupper() \
                    and raw[i + 1].lower().removesuffix("'s") not in _EN_MONTHS:
                i += 1
                parts.append(raw[i].replace("’", "'").removesuffix("'s"))
                possessive = raw[i].replace("’", "'").endswith("'s")
            tokens.append(_Token(" ".join(parts), " ".join(parts).lower(), " ".join(parts).lower(), possessive))
        elif lower in _EN_SUBJECT_PRONOUNS:
            tokens.append(_Token(word, lower, _EN_SUBJECT_PRONOUNS[lower]))
        elif lower in _EN_POSSESSIVES and (lower != "her" or _content_follows(raw, i)):
            tokens.append(_Token(word, lower, _EN_POSSESSIVES[lower], possessive=True))
        elif lower in _EN_OBJECT_PRONOUNS:
            tokens.append(_Token(word, lower, _EN_OBJECT_PRONOUNS[lower]))
        else:
            tokens.append(_Token(word, lower, None))
        i += 1
    return tokens


def _content_follows(raw: Sequence[str], i: int) -> bool:
    """Whether "her" at ``i`` is a possessive: a content word follows it."""
    nxt = raw[i + 1].lower() if i + 1 < len(raw) else ""
    return bool(nxt) and nxt[0].isalpha() and nxt not in _EN_STOP and nxt not in _EN_BOUNDARY_WORDS


def _resolve(people: set[str], who: str) -> str:
    """A pronoun (``?``) names the one named person of ``people``, if there is exactly one."""
    if who != _UNKNOWN:
        return who
    named = people - {_USER, _UNKNOWN}
    return next(iter(named)) if len(named) == 1 else _UNKNOWN


@dataclass(frozen=True)
class Doers:
    """Each action of a text (word stem, or Chinese word) and who does it; ``verbal``: the stems
    used as a verb (a clause's first word after its doer, a passive before "by", what gratitude
    is for), ``people``: the named people of the text."""

    of: dict[str, frozenset[str]]
    verbal: frozenset[str]
    people: frozenset[str]


class _Clauses:
    """Collects each content word's doers clause by clause; the main subject is the doer unless
    a clause names its own (a name or pronoun at its start), a passive names one ("by X"), a
    possessive owns the word ("Ana's support", "her support"), a gift names its giver ("help from
    X"), gratitude points at its object ("thanks Ana for …"), or "with X" adds a co-doer."""

    def __init__(self, people: set[str]) -> None:
        self.people = people
        self.seen: set[str] = set()
        self.doers: dict[str, set[str]] = {}
        self.verbal: set[str] = set()
        self.subject: set[str] = set()
        self.agent: set[str] = set()
        self.clause: list[str] = []
        self.with_: set[str] = set()
        self.fresh: bool | str = False
        """The next content word follows its doer: it is used as a verb ("participle": after
        "is" or "has", only a participle is)."""

    def who(self, person: str) -> str:
        """A name as it is; a pronoun resolved among the names already read (its antecedents),
        so "the user does her design work in Figma" gives no work to Figma."""
        if person != _UNKNOWN:
            self.seen.add(person)
        return _resolve(self.seen, person)

    def add(self, stem: str, agent: set[str], verbal: bool = False) -> None:
        if agent:
            self.doers.setdefault(stem, set()).update(agent)
            self.clause.append(stem)
            if verbal or self.fresh:
                self.verbal.add(stem)
        self.fresh = False

    def reassign(self, stems: Sequence[str], agent: set[str], verbal: bool = False) -> None:
        for stem in stems:
            self.doers[stem] = set(agent)
            if verbal:
                self.verbal.add(stem)

    def close(self) -> None:
        for stem in self.clause:
            self.doers[stem] |= self.with_
        self.clause, self.with_, self.fresh = [], set(), False
        self.agent = set(self.subject)

    def result(self) -> Doers:
        self.close()
        return Doers({stem: frozenset(agents) for stem, agents in self.doers.items()}, frozenset(self.verbal),
                     frozenset(p for p in self.people if p != _UNKNOWN))


_EN_FINITE = re.compile(r"(?:[^s]s|ed)$")
"""A word after a name in mid-clause that reads as its verb ("the desserts Nate bakes")."""
_EN_COPULA = frozenset("is are was were am be been being has have had".split())
_PARTICIPLE = re.compile(r"(?:ed|ing|en)$")
_MODIFIER = re.compile(r"(?:ed|ing|ful|ous|al|ive|less)$")


@lru_cache(maxsize=8192)
def _en_doers(text: str) -> Doers:
    tokens = _en_tokens(text)
    people = {t.person for t in tokens if t.person}
    c = _Clauses(people)
    clause_start, grateful, gratitude_object, since_person, in_thanks = True, False, set(), [], False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        previous = tokens[i - 1].lower if i else ""
        if token.lower in ",.;:!?()" or token.lower in _EN_BOUNDARY_WORDS:
            c.close()
            clause_start, grateful, gratitude_object, since_person, in_thanks = True, False, set(), [], False
            i += 1
            continue
        if token.person is not None:
            who = c.who(token.person)
            if who == _UNKNOWN and token.possessive and in_thanks:
                who = next(iter(gratitude_object))
            if token.possessive:
                owned = []
                j = i + 1
                while j < len(tokens) and tokens[j].person is None and tokens[j].word[:1].isalpha() \
                        and tokens[j].lower not in _EN_BOUNDARY_WORDS \
                        and (tokens[j].lower not in _EN_STOP or tokens[j].lower == "of"):
                    if tokens[j].lower != "of":
                        owned.append(_en_stem(tokens[j].lower))
                        if not _MODIFIER.search(tokens[j].lower) and not (j + 1 < len(tokens)
                                                                          and tokens[j + 1].lower == "of"):
                            j += 1
                            break
                    j += 1
                for stem in owned:
                    c.add(stem, {who})
                if clause_start and not c.subject:
                    c.subject = {_UNKNOWN}
                    c.agent = {_UNKNOWN}
                clause_start = False
                i = j
                continue
            if previous == "by":
                c.reassign(since_person[-1:], {who}, verbal=True)
            elif previous == "from" and since_person:
                c.reassign(since_person[-1:], {who})
            elif previous == "with":
                c.with_.add(who)
            elif clause_start:
                c.agent = {who}
                c.fresh = True
                if not c.subject:
                    c.subject = {who}
            elif previous == "and" and not c.clause:
                c.agent.add(who)
                c.fresh = True
                if not c.doers:
                    c.subject.add(who)
            elif grateful and not gratitude_object:
                gratitude_object = {who}
            elif token.lower in _EN_SUBJECT_PRONOUNS or (
                    since_person and since_person[-1] not in c.verbal and i + 1 < len(tokens)
                    and _EN_FINITE.search(tokens[i + 1].lower) and tokens[i + 1].lower not in _EN_STOP):
                c.agent, c.fresh = {who}, True
            clause_start = False
            since_person = []
            i += 1
            continue
        if token.lower == "for" and gratitude_object:
            c.agent, in_thanks, c.fresh = set(gratitude_object), True, True
        elif token.lower in _EN_COPULA and c.fresh:
            c.fresh = "participle"
        elif token.lower not in _EN_STOP and token.word[:1].isalpha():
            if c.fresh == "participle":
                c.fresh = bool(_PARTICIPLE.search(token.lower))
            if token.lower in _EN_GRATITUDE:
                grateful = True
            stem = _en_stem(token.lower)
            c.add(stem, c.agent or {_UNKNOWN})
            since_person.append(stem)
            clause_start = False
        i += 1
    return c.result()


# --- Chinese ---------------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u9fff]")
_ZH_USER = frozenset("我 我们 用户 自己".split())
_ZH_PRONOUNS = frozenset("他 她 他们 她们 你 您 对方 它".split())
_ZH_BOUNDARY = frozenset("， 。 ； ！ ？ 、 , . ; ! ? 因为 所以 但是 但 而且 并且 然后 虽然 如果 可是 不过".split())
_ZH_STOP = frozenset(
    "的 了 是 在 和 也 就 都 而 及 与 或 着 吧 呢 吗 啊 很 还 又 于 把 被 给 让 对 个 一个 这 那 地 得 过 不 没 没有 "
    "一直 非常 特别 总是 经常 已经 现在 最近 从来 真的 挺 太 有点 一些 为 向 替 帮 跟 同 由 叫".split())
_ZH_AGENT_MARKERS = frozenset("被 让 叫 由".split())
_ZH_RECIPIENT_MARKERS = frozenset("给 对 向 为 帮 替 把".split())
_ZH_COAGENT_MARKERS = frozenset("和 跟 与 同".split())
_ZH_GRATITUDE = frozenset("感谢 谢谢 感激 多谢 夸 夸奖 表扬 称赞 谢".split())
_ZH_SYMMETRIC = frozenset("结婚 离婚 见面 认识 聊天 吵架 约会 分手 合作 一起 互相 彼此 相处 交往 和好 相爱 朋友".split())


_ZH_PLACE_PREPOSITIONS = frozenset("在 到 去 从 来 于 进".split())


@lru_cache(maxsize=8192)
def _zh_cut(text: str, names: frozenset[str] = frozenset()) -> tuple[tuple[str, str], ...]:
    """jieba's words and flags, with each of ``names`` kept whole as a name (jieba cuts a name
    it does not know differently in two sentences: "刘洋" / "刘" "洋教"); adjacent name pieces
    joined ("冯" "志远"), and a word jieba calls a name after a numeral or measure word, or after
    a place preposition ("一所幼儿园", "在星巴克"), flagged a noun."""
    pieces: list[tuple[str, str]] = []
    if names:
        pattern = re.compile("(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + ")")
        for part in pattern.split(text):
            if part in names:
                pieces.append((part, "nr"))
            elif part:
                pieces.extend(chinese_tagged(part))
    else:
        pieces = chinese_tagged(text)
    out: list[tuple[str, str]] = []
    for word, flag in pieces:
        if flag.startswith("nr") and word not in names and out and (
                out[-1][1][:1] in ("m", "q") or out[-1][0] in _ZH_PLACE_PREPOSITIONS):
            flag = "n"
        if flag.startswith("nr") and out and out[-1][1].startswith("nr") and word not in names \
                and out[-1][0] not in names:
            out[-1] = (out[-1][0] + word, "nr")
            continue
        out.append((word, flag))
    return tuple(out)


def _zh_names(*texts: str) -> frozenset[str]:
    """The names jieba finds in any of ``texts`` (two characters or more), less those any text
    places somewhere ("在星巴克", "一所幼儿园"): places and organisations."""
    found = {w for t in texts for w, f in _zh_cut(t) if f.startswith("nr") and len(w) >= 2}
    return frozenset(name for name in found if not any(re.search(_ZH_PLACED + re.escape(name), t) for t in texts))


_ZH_PLACED = "(?:" + "|".join(sorted(_ZH_PLACE_PREPOSITIONS)) + r"|[一二两三几这那每][个所家座间])"


def _zh_person(word: str, flag: str) -> str | None:
    if word in _ZH_USER:
        return _USER
    if word in _ZH_PRONOUNS:
        return _UNKNOWN
    if flag.startswith("nr") or (flag == "eng" and word[:1].isupper()):
        return word.lower()
    return None


@lru_cache(maxsize=8192)
def _zh_doers(text: str, names: frozenset[str] = frozenset()) -> Doers:
    pieces = [(w.strip(), f) for w, f in _zh_cut(text, names) if w.strip()]
    people = {p for w, f in pieces if (p := _zh_person(w, f))}
    c = _Clauses(people)
    clause_start, gratitude = True, False
    i = 0
    while i < len(pieces):
        word, flag = pieces[i]
        previous = pieces[i - 1][0] if i else ""
        nxt = pieces[i + 1] if i + 1 < len(pieces) else ("", "")
        if word in _ZH_BOUNDARY:
            c.close()
            clause_start, gratitude = True, False
            i += 1
            continue
        person = _zh_person(word, flag)
        if person is not None:
            who = c.who(person)
            if previous == "的" and i >= 2 and _zh_content(*pieces[i - 2]):
                c.reassign([pieces[i - 2][0]], {who})  # "生病的邓凯": the illness is his
            if previous in _ZH_RECIPIENT_MARKERS:
                pass
            elif nxt[0] == "的":
                owned, j = _zh_owned(pieces, i + 2)
                for stem in owned:
                    c.add(stem, {who})
                if clause_start and not c.subject:
                    c.subject, c.agent = {_UNKNOWN}, {_UNKNOWN}
                i = j
                clause_start = False
                continue
            elif previous in _ZH_COAGENT_MARKERS:
                if clause_start or not c.doers:
                    c.subject.add(who)
                    c.agent.add(who)
                    c.fresh = True
                else:
                    c.with_.add(who)
            elif previous in _ZH_AGENT_MARKERS or gratitude or clause_start or (
                    _zh_verb_follows(pieces, i) and (not i or pieces[i - 1][1][:1] != "p")):
                if clause_start and not c.subject:
                    c.subject = {who}
                c.agent = {who}
                c.fresh = True
                gratitude = False
            clause_start = False
            i += 1
            continue
        if _zh_content(word, flag):
            if word in _ZH_GRATITUDE:
                gratitude = True
            verb = bool(c.fresh) and (flag.startswith("v") or (i > 0 and _zh_person(*pieces[i - 1]) is not None))
            fresh = c.fresh and not verb
            c.fresh = verb
            c.add(word, c.agent or {_UNKNOWN})
            c.fresh = fresh
            clause_start = False
        i += 1
    return c.result()


def _zh_owned(pieces: Sequence[tuple[str, str]], start: int) -> tuple[list[str], int]:
    """The words a "X 的" owns from ``start``, and where they end: its first word, then nouns
    (time words skipped), and a verb only where the phrase ends with it ("郑浩的生日聚会邀请";
    in "张敏的车去上班" the going is not the car's)."""
    owned, j = [], start
    while j < len(pieces) and len(owned) < 3:
        word, flag = pieces[j]
        if flag[:1] == "t" and owned:
            j += 1
            continue
        if not _zh_content(word, flag) and not (flag[:1] == "t" and not owned):
            break
        final = j + 1 == len(pieces) or not _zh_content(*pieces[j + 1])
        if owned and flag[:1] == "v" and flag != "vn" and not final:
            break
        if flag[:1] != "t":
            owned.append(word)
        j += 1
    return owned, j


_ZH_BEFORE_VERB = frozenset("在 正在 一直 也 都 还 又 就 会 要 总是 经常 常 每天 已经 曾经".split())


def _zh_verb_follows(pieces: Sequence[tuple[str, str]], i: int) -> bool:
    """Whether a verb follows the word at ``i``, past adverbs and 在 ("何静在照顾他")."""
    for word, flag in pieces[i + 1:]:
        if word in _ZH_BEFORE_VERB or flag[:1] == "d":
            continue
        return flag[:1] == "v"
    return False


def _zh_content(word: str, flag: str) -> bool:
    return (bool(_CJK.match(word)) and word not in _ZH_STOP and word not in _ZH_BOUNDARY
            and flag[:1] not in ("u", "p", "c", "m", "t", "r", "y", "x", "d", "q"))


# --- the guards ------------------------------------------------------------------------------

def doers(text: str, names: frozenset[str] = frozenset()) -> Doers:
    """Each action of ``text`` (a word stem, or a Chinese word) and who does it; ``names``:
    Chinese names to keep whole (those of both texts of a pair)."""
    return _zh_doers(text, names) if _CJK.search(text) else _en_doers(text)


def _mutual(text: str) -> bool:
    return bool(_EN_MUTUAL.search(text)) or any(w in text for w in _ZH_SYMMETRIC if _CJK.match(w))


def role_reversal(a: str, b: str) -> str | None:
    """Why ``a`` and ``b`` give one action to different doers, or None. Only people both texts
    name count as doers (a pronoun nothing resolves, "we", or a name only one text has never
    differs), the action is used as a verb in at least one text, and never a symmetric one
    ("married", "together")."""
    if _mutual(a) or _mutual(b) or bool(_CJK.search(a)) != bool(_CJK.search(b)):
        return None
    names = _zh_names(a, b) if _CJK.search(a) else frozenset()
    left, right = doers(a, names), doers(b, names)
    both = left.people & right.people
    if len(both) < 2:
        return None
    for stem in sorted(left.of.keys() & right.of.keys()):
        if stem in _EN_SYMMETRIC or stem in _ZH_SYMMETRIC or not (stem in left.verbal or stem in right.verbal):
            continue
        x, y = left.of[stem], right.of[stem]
        if x and y and x <= both and y <= both and x.isdisjoint(y):
            return (f"roles differ: {stem!r} is done by {', '.join(sorted(x))} in one memory and by "
                    f"{', '.join(sorted(y))} in the other")
    return None


_EN_SKIP_TO_HEAD = _EN_STOP | frozenset(
    "really also still now always never often usually recently currently just already strongly truly "
    "genuinely definitely actually personally kind sort longer generally mostly firmly honestly "
    "seriously deeply".split())
_EN_OPINION = frozenset(_en_stem(w) for w in (
    "think thinks thought believe believes believed feel feels felt find finds found consider considers "
    "considered reckon reckons suppose supposes guess guesses regard regards view views").split())
#: Liking, fearing, caring: a text with one of these says how its subject feels about something,
#: as an opinion does, so the two can be one attribute ("enjoys volunteering" / "thinks
#: volunteering is tiring").
_EN_FEELING = frozenset(_en_stem(w) for w in (
    "like likes liked love loves loved enjoy enjoys enjoyed hate hates hated dislike dislikes disliked "
    "prefer prefers preferred adore adores detest detests loathe fond fan favorite favourite admire "
    "admires despise appreciate appreciates grateful thankful passionate keen afraid scared fear fears "
    "worried anxious nervous excited happy unhappy proud interested interest care mind bother "
    "bothers inspiring inspired boring bored annoying tiring tired great good bad terrible awful "
    "wonderful amazing waste important matter matters").split())
_ZH_OPINION = frozenset("觉得 认为 以为 相信 感觉 觉着 看来 想来 估计 猜".split())
_ZH_FEELING = ("感到", "觉", "看来", "平静", "焦虑", "不安", "紧张", "开心", "难过", "要紧", "喜欢", "爱", "讨厌", "厌", "反感", "享受", "怕", "担心", "感激", "感谢", "欣赏", "在乎", "重视",
               "兴趣", "无聊", "累", "烦", "好", "坏", "浪费", "重要", "受不了", "迷", "热情", "热爱", "佩服", "崇拜")
_ZH_SKIP_TO_HEAD = frozenset(
    "不 没 也 都 还 很 非常 一直 特别 总是 经常 已经 现在 最近 从来 真的 挺 太 有点 其实 始终 并 并不 就 "
    "向来 比较 更 最".split())


_EN_HAVE = frozenset("have has had".split())
_EN_PARTICIPLES = frozenset("thought felt found been become begun got gotten".split())


def _possession(tokens: Sequence[_Token], k: int) -> bool:
    """Whether "have" at ``k`` is the verb of possession ("does not have a car"), not an auxiliary
    ("has always thought", "has started")."""
    for token in tokens[k + 1:]:
        if token.lower in ("always", "never", "just", "already", "long", "recently", "since", "ever"):
            return False
        return not (token.lower in _EN_PARTICIPLES or _PARTICIPLE.search(token.lower))
    return False


@dataclass(frozen=True)
class _Statement:
    opinion: bool
    """The text states what its subject thinks (its first verb is think, believe, find, 觉得, …)."""
    feeling: bool
    """Some word of it says how someone feels about something (likes, fears, boring, 喜欢, 浪费)."""
    head: str
    words: frozenset[str]
    owned: frozenset[str]
    """Content words the text marks as someone's ("his car", "我的车"): asserted to exist."""
    change: bool


@lru_cache(maxsize=8192)
def _statement(text: str) -> _Statement:
    from mem_assets.dedup.offline_judge_features import parse  # jieba: loaded by the runs that judge

    change = parse(text).change_cues > 0
    if _CJK.search(text):
        pieces = [(w.strip(), f) for w, f in _zh_cut(text) if w.strip()]
        words = frozenset(w for w, f in pieces if _zh_content(w, f))
        owned = frozenset(pieces[k + 1][0] for k in range(1, len(pieces) - 1) if pieces[k][0] == "的"
                          and _zh_person(*pieces[k - 1]) is not None)
        head = ""
        for k, (word, flag) in enumerate(pieces):
            if (k < 3 and _zh_person(word, flag) is not None) or word in _ZH_SKIP_TO_HEAD or flag[:1] in ("t", "d"):
                continue
            head = word
            break
        chars = frozenset(ch for w in words for ch in w)
        return _Statement(head in _ZH_OPINION, any(w in text for w in _ZH_FEELING), head, words | chars, owned,
                          change)
    tokens = _en_tokens(text)
    words = frozenset(_en_stem(t.lower) for t in tokens if t.person is None and t.lower not in _EN_STOP
                      and t.word[:1].isalpha())
    owned = frozenset(_en_stem(tokens[k + 1].lower) for k in range(len(tokens) - 1)
                      if tokens[k].possessive and tokens[k + 1].person is None)
    head = ""
    for k, token in enumerate(tokens):
        if token.person is not None and (k < 3 or not head):
            continue
        if token.lower in _EN_HAVE and _possession(tokens, k):
            head = "have"
            break
        if token.lower in _EN_SKIP_TO_HEAD or not token.word[:1].isalpha():
            continue
        head = _en_stem(token.lower)
        break
    return _Statement(head in _EN_OPINION, bool(words & _EN_FEELING), head, words, owned, change)


def other_attribute(a: str, b: str) -> str | None:
    """Why newer ``b`` does not state another value of what older ``a`` states, or None. Only
    the clear case: one text is an opinion ("thinks cars waste money"), the other states a fact
    with no word of feeling ("does not own a car"); the opinion does not use the fact's verb or
    mark the shared thing as someone's ("his car" says he has one), and the newer text has no
    word of change ("now", "no longer", "不再")."""
    sa, sb = _statement(a), _statement(b)
    if sa.opinion == sb.opinion or not sa.head or not sb.head or sb.change:
        return None
    opinion, fact = (sa, sb) if sa.opinion else (sb, sa)
    if fact.feeling or fact.words & (_EN_OPINION | _ZH_OPINION) or fact.head in opinion.words or opinion.owned & fact.words:
        return None
    return (f"the {'newer' if sb.opinion else 'older'} memory is an opinion ({opinion.head!r}), the other a fact "
            f"({fact.head!r}) it does not restate: another attribute, not a new value")


_EN_ONE_OF_A_KIND = re.compile(
    r"\b(?:has|have|had|owns?|owned|adopted|adopts?|got|gets|keeps?|kept|raises?|raised)\s+"
    r"(?:a|an|another|one)\s+(?:[a-z]+\s+){0,2}?([a-z]+?)(?:es|s)?\s*,?\s+(?:named|called)\s+([A-Z][\w'’-]*)")
_ZH_ONE_OF_A_KIND = re.compile(
    r"(?:有|养了?|领养了?)(?:一|另一)(?:只|条|个|匹|头|位)(?:名叫|名字叫|叫做?)([\u4e00-\u9fff\w]{1,6}?)的([\u4e00-\u9fff]{1,3})")
_EN_DENIAL = re.compile(r"\b(?:not|no|never|n't|no longer|anymore|died|passed away|gave away|lost|sold|rehomed|"
                        r"renamed|instead)\b|n't\b", re.IGNORECASE)
_ZH_DENIAL = re.compile(r"没有|没|不再|不|去世|死了|送走|送人|丢了|改名")


def _one_of_a_kind(text: str) -> tuple[str, str] | None:
    """(kind, name) when ``text`` says its subject has one of a kind by name: "has a cat named
    Luna" → ("cat", "Luna"); "我有一只叫咪咪的猫" → ("猫", "咪咪")."""
    if _CJK.search(text):
        match = _ZH_ONE_OF_A_KIND.search(text)
        return (match.group(2), match.group(1)) if match and not _ZH_DENIAL.search(text) else None
    match = _EN_ONE_OF_A_KIND.search(text)
    return (match.group(1).lower(), match.group(2)) if match and not _EN_DENIAL.search(text) else None


def several_of_a_kind(a: str, b: str) -> str | None:
    """Why (older ``a``, newer ``b``) can both hold, or None: each says its subject has one of the
    same kind under two different names ("has a cat named Luna" / "has a cat named Milo"), neither
    denies it and the newer has no word of change — one may have several."""
    one, other = _one_of_a_kind(a), _one_of_a_kind(b)
    if one is None or other is None or one[0] != other[0] or one[1] == other[1] or _statement(b).change:
        return None
    return f"one {one[0]!r} named {one[1]!r}, one named {other[1]!r}: one may have several"


_EN_PLAN = re.compile(
    r"\b(?:preparing|prepares|prepare|planning|plans|plan to|planned to|going to|gonna|will|intends?|intending|"
    r"hopes? to|hoping to|wants? to|wanting to|studying for|signed up|registered for|applying|applied for|about to|"
    r"scheduled)\b", re.IGNORECASE)
_EN_DONE = re.compile(r"\b(?:passed|finished|completed|graduated|earned|obtained|achieved|"
                      r"got (?:the|a|an|his|her|their|my))\b", re.IGNORECASE)
_ZH_PLAN = re.compile(r"正在准备|准备|打算|计划|想要|将要|将会|即将|要去|备考|报名|正在申请|申请|考虑|期待")
_ZH_DONE = re.compile(r"通过了|完成了|拿到了|考过了|考完了|毕业了|获得了|取得了|已经通过|已经完成|已经拿到|顺利通过|成功")
_STAGES = {"plan": "a plan or a thing under way", "done": "a completion"}


def _stage(text: str) -> str | None:
    """"plan" when ``text`` says a thing is planned or under way, "done" when it says it was
    completed, None when it says neither or both."""
    plan, done = (_ZH_PLAN, _ZH_DONE) if _CJK.search(text) else (_EN_PLAN, _EN_DONE)
    planned, completed = bool(plan.search(text)), bool(done.search(text))
    return None if planned == completed else ("plan" if planned else "done")


def other_stage(a: str, b: str) -> str | None:
    """Why (older ``a``, newer ``b``) are not one fact told twice, or None: one states a plan or
    a thing under way, the other its completion."""
    sa, sb = _stage(a), _stage(b)
    if sa is None or sb is None or sa == sb:
        return None
    return f"the older memory states {_STAGES[sa]}, the newer {_STAGES[sb]}: another stage, not a restatement"


@dataclass(frozen=True)
class Guarded:
    """A judge's label after the guards: ``guard`` names the guard that changed it (else None)."""

    label: Label
    guard: str | None = None
    reason: str | None = None


def check(a: str, b: str, label: str) -> Guarded:
    """The guards on one (older ``a``, newer ``b``) pair the judge labelled ``label``."""
    if label == "independent" or normalize_text(a) == normalize_text(b):
        return Guarded(label)  # type: ignore[arg-type]
    why = role_reversal(a, b)
    if why:
        return Guarded("independent", "roles", why)
    why = several_of_a_kind(a, b)
    if why:
        return Guarded("independent", "several", why)
    if label == "redundant":
        why = other_stage(a, b)
        if why:
            return Guarded("independent", "stage", why)
    if label == "contradictory":
        why = other_attribute(a, b)
        if why:
            return Guarded("independent", "attribute", why)
    return Guarded(label)  # type: ignore[arg-type]


def guard(pairs: Sequence[tuple[str, str]], labels: Sequence[str]) -> list[Guarded]:
    return [check(a, b, label) for (a, b), label in zip(pairs, labels, strict=True)]


def guarded_fingerprint(judge_fingerprint: str) -> str:
    """The judgment cache's name for a judge's answers after these guards."""
    return f"{judge_fingerprint}+{GUARDS}"


def guard_judgments(pairs: Sequence[tuple[str, str]], judgments: Sequence[Judgment]) -> list[Judgment]:
    """Each judgment of an (older, newer) pair with the guards applied: a redundant or
    contradictory answer a guard overrules becomes independent, the judge's word kept in the
    reason. Failed and deferred judgments are left as they are."""
    out = []
    for (a, b), judgment in zip(pairs, judgments, strict=True):
        verdict = Guarded(judgment.label) if judgment.failed or judgment.deferred else check(a, b, judgment.label)
        out.append(judgment if verdict.guard is None else replace(
            judgment, label="independent", near=None, near_probability=None,
            reason=f"judged {judgment.label} ({judgment.reason}), overruled by the {verdict.guard} guard: "
                   f"{verdict.reason}"))
    return out


def guarded_requests(requests: Sequence[JudgeRequest],
                     results: Sequence[Sequence[Judgment]]) -> tuple[list[list[Judgment]], int]:
    """``guard_judgments`` over a judge's answers to ``requests``, and how many answers the
    guards changed."""
    out, changed = [], 0
    for request, judgments in zip(requests, results, strict=True):
        guarded = guard_judgments(request.pairs(), judgments)
        changed += sum(g is not j for g, j in zip(guarded, judgments, strict=True))
        out.append(guarded)
    return out, changed
