"""Features of a pair of memory texts for the learned offline judge. Pure: text in, numbers out.

What they capture (docs/dedup.md): how much the two say the same thing (semantic cosine, content
word and character overlap with the *subject* removed, so "Caroline ..." / "Caroline ..." shares
nothing by the name alone), a soft word alignment (each content word's best WordLlama match on the
other side: "allergic" finds "allergy"), what stays unaligned on each side and whether it is a
*value* (a number, a date, a name or place, a colour, an animal, a food, a job, ...), whether the
two sides swap values of one kind ("beagle" / "golden retriever", "Berlin" / "Paris"), negations
and antonyms, events (past tense, dates) versus states, and cues of a change over time in the newer
text ("moved", "no longer", "搬到", "不再"). ``b`` is the newer.

Text-level work (parsing, sentence and word vectors) is done once per distinct text by
``PairFeaturizer``, so scoring many pairs that share texts stays cheap.
"""

from __future__ import annotations

import gc
import logging
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

import jieba
import jieba.posseg
import numpy as np

from mem_resources.bge import Language, TokenEncoder, TokenStates, pair_language
from mem_resources.embedder import hashing_embed

Embed = Callable[[Sequence[str]], np.ndarray]
Encoders = Callable[[Language], TokenEncoder]
PairScorer = Callable[[Sequence[tuple[str, str]]], np.ndarray]
CrossScorers = Mapping[Language, PairScorer]
"""A cross-encoder per pair language; pairs of another language get -1 in ``CROSS_FEATURE_NAMES``."""

jieba.setLogLevel(logging.WARNING)


class _MemoPOSTokenizer(jieba.posseg.POSTokenizer):
    """jieba's default part-of-speech tokenizer (same dictionaries, same output) with its HMM pass
    over a run of unknown characters memoised: the pass is a pure function of the run, the
    slowest step of parsing, and runs (names, rare words) recur across a tenant's texts."""

    def __init__(self) -> None:
        self.__dict__.update(jieba.posseg.dt.__dict__)

    def _POSTokenizer__cut(self, sentence: str) -> Iterator[jieba.posseg.pair]:
        return iter(_hmm_cut(sentence))


@lru_cache(maxsize=65536)
def _hmm_cut(run: str) -> tuple[jieba.posseg.pair, ...]:
    return tuple(jieba.posseg.POSTokenizer._POSTokenizer__cut(jieba.posseg.dt, run))


_POS = _MemoPOSTokenizer()

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"[A-Za-z]+(?:[-'][A-Za-z]+)*|\d+(?:[.:]\d+)?|[\u3400-\u9fff\uf900-\ufaff]+")

_EN_STOP = frozenset(
    "a an the and or but of in on at to for from with by as is are was were be been being am do does "
    "did has have had this that these those it its there here very really also so then than too into "
    "about over up out some any just which who whom what when where while because since after before "
    "s 's".split())
_ZH_STOP = frozenset("的 了 是 在 和 也 就 都 而 及 与 或 着 吧 呢 吗 啊 很 还 又 于 把 被 给 让 对 个 一个 这 那 地 得 过".split())
_SUBJECT_WORDS = frozenset(
    "user user's users he she i i'm i've my me mine his her hers him they them their we our us "
    "myself himself herself themselves 用户 我 我们 他 她 他们 她们 你 自己 我家 用户家".split())
_SENTENCE_STARTERS = frozenset(
    "the on in at last every each after before during since for when this next a an my his her our "
    "their once recently yesterday today".split())

_EN_NEGATION = frozenset(
    "not no never don't doesn't didn't isn't aren't wasn't weren't won't can't cannot couldn't "
    "hasn't haven't hadn't shouldn't wouldn't nobody nothing none neither nor without".split())
_ZH_NEGATION = ("不", "没", "未", "别", "无", "非", "莫", "戒")
_ZH_NEGATION_WORDS = frozenset("不 没 没有 未 别 无 非 从不 从来不 从没 从来没 从来没有 并不 并没有 并没 一点也不 再也不 "
                               "永远不 几乎不".split())
_SCOPE = 2
_ZH_NOT_NEGATION = frozenset("不错 不同 不过 不少 不断 不仅 不管 不久 不但 无论 非常 不得不 别的 别人 无聊 没想到".split())

_CHANGE_EN = frozenset(
    "moved move moving now anymore longer switched switch changed change quit left leave stopped "
    "stop started start began new newly these nowadays currently recently became become "
    "turned turn instead again no-longer sold traded dropped withdrew canceled cancelled closed "
    "retired divorced outgrown".split())
_CHANGE_ZH = ("搬到", "搬去", "搬家", "现在", "不再", "改", "换", "离职", "辞", "已经", "开始", "最近",
              "如今", "目前", "不干", "戒", "退出", "取消", "放弃", "卖掉", "卖了", "离婚", "转", "变成",
              "又开始", "后来", "好了", "去世", "过世")
_CHANGE_ZH_RE = re.compile("|".join(map(re.escape, _CHANGE_ZH)))
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
    ({"attended", "went", "made", "saw", "watched", "joined", "performed", "参加", "去了", "看了"},
     {"missed", "skipped", "cancelled", "canceled", "postponed", "错过", "取消", "推迟"}),
    ({"allow", "allows", "allowed", "permit", "permits", "permitted", "允许", "可以"},
     {"ban", "bans", "banned", "forbid", "forbids", "forbidden", "prohibit", "prohibits", "禁止", "不让", "不许"}),
    ({"start", "started", "began", "begin", "joined", "开始", "加入"},
     {"quit", "stopped", "stop", "left", "ended", "dropped", "gave", "辞职", "退出", "放弃", "停"}),
    ({"bond", "closer", "connect", "connects", "together", "brings", "亲近", "拉近"},
     {"apart", "push", "pushes", "distance", "isolate", "疏远"}),
    ({"healthy", "well", "recovered", "健康", "痊愈", "康复"}, {"sick", "ill", "injured", "生病", "受伤", "住院"}),
    ({"easy", "simple", "容易", "简单"}, {"hard", "difficult", "tough", "难", "困难"}),
    ({"calm", "relaxed", "peaceful", "peace", "serenity", "平静", "放松"},
     {"stressed", "anxious", "nervous", "uneasy", "紧张", "焦虑"}),
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
_ZH_DIGITS = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_NUMERAL = re.compile(r"[〇零一二两三四五六七八九十百千]+|\d+")
_LEADING_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_MONTHS = frozenset(
    "january february march april may june july august september october november december jan feb "
    "mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday "
    "weekend spring summer fall autumn winter morning evening night yesterday".split())
_ZH_TIME = re.compile(r"[零一二两三四五六七八九十\d]+[月号日点]|周[一二三四五六日末]|星期[一二三四五六天日]|[春夏秋冬]天|"
                      r"上周|下周|去年|今年|明年|前年|上个月|下个月|早上|晚上|中午|凌晨")

#: Kinds of *values*: two texts that swap one value of a kind for another ("beagle" / "poodle",
#: "蓝色" / "绿色") say different things about one slot. English words are matched after stemming.
_VALUE_KINDS: dict[str, str] = {}
for _kind, _words in {
    "colour": "red blue green yellow orange purple pink black white gray grey brown beige navy teal gold "
              "silver maroon violet turquoise lavender 红 蓝 绿 黄 紫 粉 黑 白 灰 橙 棕 红色 蓝色 绿色 黄色 紫色 "
              "粉色 黑色 白色 灰色 橙色 棕色 金色 银色",
    "animal": "dog cat puppy kitten bird parrot hamster rabbit bunny fish goldfish turtle tortoise horse snake "
              "lizard gecko guinea ferret chicken duck cow pig sheep goat beagle poodle retriever labrador "
              "lab corgi husky bulldog terrier shepherd chihuahua dachshund pug spaniel collie boxer rottweiler "
              "siamese persian tabby ragdoll maine 猫 狗 鸟 鱼 兔 兔子 仓鼠 乌龟 鹦鹉 金鱼 马 蛇 小狗 小猫 狗狗 猫咪 "
              "柯基 泰迪 金毛 哈士奇 拉布拉多 柴犬 边牧 比格 萨摩耶 博美 布偶 英短 橘猫 狸花猫 暹罗猫",
    "food": "pizza sushi pasta tea coffee beer wine juice milk chocolate cake bread rice noodle burger salad "
            "steak chicken beef pork lamb tofu soup curry taco ramen dumpling cheese apple banana orange "
            "strawberry mango grape peanut shrimp seafood egg vegetable fruit spicy sweet latte espresso "
            "cappuccino soda water cilantro mushroom onion garlic tomato potato carrot broccoli celery "
            "茶 咖啡 啤酒 红酒 果汁 牛奶 巧克力 蛋糕 面包 米饭 面条 汉堡 沙拉 牛排 鸡肉 牛肉 猪肉 羊肉 豆腐 汤 咖喱 "
            "寿司 饺子 火锅 奶酪 苹果 香蕉 橙子 草莓 芒果 葡萄 花生 虾 海鲜 鸡蛋 蔬菜 水果 辣 甜 香菜 芹菜 "
            "蘑菇 洋葱 大蒜 西红柿 土豆 胡萝卜 乌龙 乌龙茶 绿茶 红茶 奶茶 拿铁 可乐 包子 烧烤 川菜 粤菜 湘菜",
    "job": "teacher nurse doctor engineer lawyer chef cook designer accountant developer programmer writer "
           "artist musician dentist pharmacist pilot driver firefighter police officer soldier farmer "
           "scientist researcher professor student manager cashier barista waiter waitress baker "
           "photographer architect journalist editor consultant therapist counselor counsellor "
           "veterinarian vet mechanic electrician plumber banker analyst 老师 教师 护士 医生 工程师 律师 厨师 "
           "设计师 会计 程序员 作家 画家 音乐家 牙医 药剂师 司机 消防员 警察 农民 科学家 教授 学生 经理 "
           "收银员 服务员 摄影师 建筑师 记者 编辑 顾问 心理咨询师 兽医 外卖员 快递员 销售",
    "activity": "soccer football basketball tennis baseball golf swimming swim running run hiking hike yoga "
                "pilates painting paint drawing photography dancing dance cycling biking skiing surfing "
                "climbing boxing kickboxing karate chess gaming knitting gardening fishing camping "
                "reading cooking baking singing volleyball badminton hockey rugby marathon "
                "piano guitar violin drum cello flute saxophone clarinet ukulele trumpet harp "
                "足球 篮球 网球 棒球 高尔夫 游泳 跑步 爬山 徒步 瑜伽 画画 绘画 摄影 跳舞 骑行 滑雪 冲浪 攀岩 拳击 "
                "围棋 象棋 游戏 钓鱼 露营 读书 做饭 烘焙 唱歌 排球 羽毛球 乒乓球 马拉松 钢琴 吉他 小提琴 鼓 "
                "大提琴 长笛 萨克斯 尤克里里",
    "weekday": "monday tuesday wednesday thursday friday saturday sunday weekend 周一 周二 周三 周四 周五 "
               "周六 周日 周末 星期一 星期二 星期三 星期四 星期五 星期六 星期天 星期日",
    "month": "january february march april may june july august september october november december "
             "spring summer fall autumn winter 一月 二月 三月 四月 五月 六月 七月 八月 九月 十月 十一月 十二月 "
             "春天 夏天 秋天 冬天",
    "relative": "wife husband sister brother mother mom mum father dad son daughter grandmother grandma "
                "grandfather grandpa cousin uncle aunt niece nephew girlfriend boyfriend 妻子 老婆 丈夫 老公 "
                "姐姐 妹妹 哥哥 弟弟 妈妈 母亲 爸爸 父亲 儿子 女儿 奶奶 爷爷 外婆 外公 男朋友 女朋友",
}.items():
    for _word in _words.split():
        _VALUE_KINDS.setdefault(_word, _kind)

#: Feeling and judgement words, +1 / -1: "is looking forward to" / "is dreading", "glowing review" /
#: "terrible review". A flip of polarity where the rest aligns is a contradiction cue.
_POLARITY: dict[str, int] = {}
for _sign, _words in ((1, ("love loves loved enjoy enjoys enjoyed like likes liked happy glad excited thrilled proud "
                          "grateful thankful great good wonderful amazing fantastic awesome glowing positive confident "
                          "calm relaxed relaxing peaceful quiet easy fun interesting exciting rewarding meaningful "
                          "inspiring inspired helpful supportive kind successful success won win passed accepted "
                          "promoted praised best better favorite favourite fond keen eager ready comfortable safe "
                          "healthy recovered hopeful optimistic satisfied pleased delighted forward welcome "
                          "喜欢 爱 热爱 享受 开心 高兴 快乐 兴奋 骄傲 自豪 感激 感谢 满意 好评 不错 棒 放松 平静 轻松 "
                          "容易 有趣 有意思 有收获 成功 通过 赢 升职 健康 康复 期待 感动 支持 顺利 喜爱 热情")),
                      (-1, ("hate hates hated dislike dislikes disliked sad unhappy upset angry annoyed frustrated "
                           "ashamed disappointed disappointing terrible awful bad poor negative nervous anxious "
                           "worried scared afraid dread dreading dreads stressed overwhelmed lonely alone bored "
                           "boring tiresome tedious dull difficult hard loud noisy painful failed lost rejected fired "
                           "worst worse meaningless useless waste sick ill injured uncomfortable miserable tired "
                           "exhausted hopeless struggle struggles hurt "
                           "讨厌 厌恶 烦 难过 伤心 生气 失望 丢脸 羞愧 差评 糟糕 紧张 焦虑 担心 害怕 怕 孤单 孤独 寂寞 "
                           "无聊 枯燥 没意思 困难 吵 挂 失败 输 拒绝 浪费 生病 受伤 累 压力 发愁 痛苦"))):
    for _word in _words.split():
        _POLARITY[_word] = _sign
_ZH_POLARITY = sorted((w for w in _POLARITY if _CJK.match(w)), key=len, reverse=True)


@lru_cache(maxsize=65536)
def _polarity(word: str) -> int:
    if _CJK.match(word):
        return next((_POLARITY[w] for w in _ZH_POLARITY if w in word), 0)
    return _POLARITY.get(word, 0)


#: Words of single-valued attributes: where one of these is shared, a swapped value is a change
#: ("lives in Berlin" / "lives in Paris"), not a second fact ("went to Berlin" / "went to Paris").
_FUNCTIONAL = frozenset(
    "live lives living lived born hometown name named called nickname favorite favourite married "
    "age aged old birthday breed color colour drive drives driving works work job profession "
    "occupation employer rent salary major native mother tongue size weighs weight height tall floor "
    "address nationality citizen religion blood type "
    "住 住在 住的 出生 出生在 老家 家乡 籍贯 叫 名叫 名字 最喜欢 最爱 岁 生日 职业 工作 上班 开 母语 专业 "
    "体重 身高 房租 鞋码 品种 国籍 血型 宗教 地址 楼".split())


#: Past-tense forms: "went to a concert on 12 May" is an event; two events on other days are two facts.
_EN_PAST = frozenset(
    "went was were had did ran took got made saw bought won lost came began met left told found gave "
    "thought felt sold spent brought taught caught wrote read drove flew ate drank swam sang rode "
    "became kept held built sent paid heard knew grew threw broke fell forgot chose wore tried moved "
    "finished started visited attended joined adopted traveled travelled visited celebrated learned "
    "learnt played watched cooked baked painted finished completed graduated married decided "
    "received signed quit".split())
_ZH_PAST = re.compile(r"了|过|昨天|上周|上个月|去年|前年|那年|之前|以前|曾")
_ZH_VALUE_FLAGS = {"nr": "name", "ns": "place", "nz": "name", "nt": "name"}
#: "一名消防员", "一辆车": 一 with a measure word is an article, not a count.
_ZH_ARTICLE = re.compile(r"^一(个|名|位|只|条|辆|家|件|本|张|台|份|种|场|次|顿|双|把|所|间|座|支|首|部|套|款|群|些|点|下|起|直|样|般|切|定|共|边|天到晚)")
_ZH_TIME_CHARS = re.compile(r"[年月日号周点]|星期|[春夏秋冬]天|早上|晚上|中午|凌晨")


def _zh_value(numeral: str) -> float:
    if numeral.isdigit():
        return float(numeral)
    if len(numeral) > 1 and not any(unit in numeral for unit in "十百千"):
        return float("".join(str(_ZH_DIGITS[char]) for char in numeral))
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
    """One memory text: its content tokens (subject removed), their value kinds, and its cues."""

    tokens: tuple[str, ...]
    kinds: tuple[str, ...]
    negated: tuple[bool, ...]
    words: frozenset[str]
    chars: str
    numbers: frozenset[float]
    times: frozenset[str]
    negations: int
    change_cues: int
    past: int
    polarity: int
    zh: bool
    subject: str
    people: frozenset[str]
    functional: frozenset[str]
    antonyms: tuple[tuple[frozenset[str], bool, frozenset[str], bool], ...]


_ZH_YEAR = re.compile(r"[〇零一二三四五六七八九]{2,4}(?=年)")


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("’", "'").strip()
    return _ZH_YEAR.sub(lambda m: str(int(_zh_value(m.group()))), text)


def _en_words(text: str) -> tuple[list[tuple[str, bool]], str]:
    """Lower-cased words with whether each is capitalised mid-sentence (a name or place), and the
    subject: the first capitalised word near the start that is not a sentence starter."""
    raw = _TOKEN.findall(text)
    subject = ""
    for token in raw[:6]:
        bare = token.removesuffix("'s")
        lower = bare.lower()
        if bare[:1].isupper() and lower not in _SENTENCE_STARTERS and lower not in _SUBJECT_WORDS \
                and lower not in _EN_STOP and lower not in _MONTHS:
            subject = lower
            break
        if not (lower in _SENTENCE_STARTERS or lower in _MONTHS or lower[:1].isdigit()):
            break
    words = [(t.lower(), i > 0 and t[:1].isupper()) for i, t in enumerate(raw)]
    return words, subject


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65536)
def _zh_kind(word: str, flag: str) -> str:
    if word in _VALUE_KINDS:
        return _VALUE_KINDS[word]
    if _ZH_ARTICLE.match(word):
        return ""
    if flag in ("m", "t") and _ZH_TIME_CHARS.search(word) or _ZH_TIME.search(word):
        return "time"
    if _ZH_NUMERAL.fullmatch(word) or (flag == "m" and _ZH_NUMERAL.search(word)):
        return "number"
    return _ZH_VALUE_FLAGS.get(flag, "")


_ZH_ANTONYMS = [(tuple(w for w in left if _CJK.match(w)), tuple(w for w in right if _CJK.match(w)))
                for left, right in _ANTONYMS]
_ZH_ANTONYM_RES = [tuple(re.compile("|".join(map(re.escape, side))) if side else None for side in sides)
                   for sides in _ZH_ANTONYMS]
_ANTONYM_WORDS = frozenset(w for sides in _ANTONYMS for side in sides for w in side)
_ZH_ANTONYM_ANY = re.compile("|".join(re.escape(w) for sides in _ZH_ANTONYMS for side in sides for w in side))
_NO_ANTONYM_SIDES = tuple((frozenset(), False, frozenset(), False) for _ in _ANTONYMS)


def _occurs(pattern: re.Pattern[str] | None, text: str) -> bool:
    return pattern is not None and pattern.search(text) is not None


def _antonym_sides(raw_text: str, words: frozenset[str]) -> tuple[tuple[frozenset[str], bool, frozenset[str], bool], ...]:
    """Per antonym pair: this text's words on each side, and whether a Chinese side word occurs."""
    if words.isdisjoint(_ANTONYM_WORDS) and not _ZH_ANTONYM_ANY.search(raw_text):
        return _NO_ANTONYM_SIDES
    return tuple((words & left, _occurs(zh_left, raw_text), words & right, _occurs(zh_right, raw_text))
                 for (left, right), (zh_left, zh_right) in zip(_ANTONYMS, _ZH_ANTONYM_RES, strict=True))


@lru_cache(maxsize=65536)
def _is_people(word: str) -> bool:
    return word in _PEOPLE or bool(_CJK.match(word)) and any(p in word for p in _ZH_PEOPLE)


_ZH_PEOPLE = tuple(p for p in _PEOPLE if _CJK.match(p))


@lru_cache(maxsize=65536)
def parse(text: str) -> Parsed:
    raw_text = text
    text = _normalize(text)
    zh = bool(_CJK.search(text))
    numbers: set[float] = set()
    times: set[str] = set()
    negations = change = past = polarity = 0
    tokens: list[str] = []
    kinds: list[str] = []
    negated: list[bool] = []
    scope = 0
    subject = ""
    words: list[tuple[str, str, bool]] = []
    if zh:
        pieces = list(_POS.cut(text))
        for piece in pieces[:3]:
            if piece.flag == "nr" and not subject:
                subject = piece.word
            if piece.word in _SUBJECT_WORDS:
                break
        times.update(_ZH_TIME.findall(text))
        past += len(_ZH_PAST.findall(text))
        for piece in pieces:
            word = piece.word.strip().lower()
            if word and (word[0].isalnum() or _CJK.match(word)):
                words.append((word, piece.flag, False))
    else:
        en_words, subject = _en_words(text)
        words = [(w, "", cap) for w, cap in en_words]
    for word, flag, capitalised in words:
        if _CJK.match(word):
            if word in _ZH_NOT_NEGATION:
                tokens.append(word)
                kinds.append("")
                negated.append(scope > 0)
                scope = max(0, scope - 1)
                continue
            if word in _ZH_NEGATION_WORDS:
                negations += 1
                scope = _SCOPE
                continue
            if word.startswith(_ZH_NEGATION):
                negations += 1
                word = word[1:]
                scope = max(scope, 1)
            if _CHANGE_ZH_RE.search(word):
                change += 1
            found = [] if _ZH_ARTICLE.match(word) else [_zh_value(n) for n in _ZH_NUMERAL.findall(word)]
            numbers.update(found)
            if word and word not in _ZH_STOP and word not in _SUBJECT_WORDS and word != subject:
                polarity += _polarity(word) * (-1 if scope > 0 else 1)
                tokens.append(word)
                kinds.append(_zh_kind(word, flag))
                negated.append(scope > 0)
                scope = max(0, scope - 1)
        else:
            if word in _EN_NEGATION or word.endswith("n't"):
                negations += 1
                scope = _SCOPE
                continue
            if word in _CHANGE_EN:
                change += 1
            if word in _EN_PAST:
                past += 1
            kind = ""
            number = _LEADING_NUMBER.match(word)
            if number:
                numbers.add(float(number.group()))
                kind = "number"
            elif word in _EN_NUMBERS:
                numbers.add(float(_EN_NUMBERS[word]))
                kind = "number"
            if word in _MONTHS:
                times.add(word)
            if word in _EN_STOP or word in _SUBJECT_WORDS or word.removesuffix("'s") == subject:
                continue
            polarity += _polarity(word) * (-1 if scope > 0 else 1)
            stem = _stem(word)
            kind = kind or _VALUE_KINDS.get(word) or _VALUE_KINDS.get(stem) or ("name" if capitalised else "")
            tokens.append(stem)
            kinds.append(kind)
            negated.append(scope > 0)
            scope = max(0, scope - 1)
    if re.search(r"\bno longer\b|\bnot anymore\b|\bany ?more\b|\bg[ai]ve(?:n)? up\b", text.lower()):
        change += 1
    chars = "".join(ch for ch in "".join(tokens) if _CJK.match(ch))
    raw = frozenset(w for w, _, _ in words)
    return Parsed(tuple(tokens), tuple(kinds), tuple(negated), raw, chars, frozenset(numbers), frozenset(times), negations,
                  change, past, polarity, zh, subject, frozenset(t for t in tokens if _is_people(t)),
                  raw & _FUNCTIONAL, _antonym_sides(raw_text, raw))


def _antonym_hit(pa: Parsed, pb: Parsed) -> float:
    """One side of an antonym pair only in the older text, the other only in the newer."""
    for (left_a, zh_left_a, right_a, zh_right_a), (left_b, zh_left_b, right_b, zh_right_b) in zip(
            pa.antonyms, pb.antonyms, strict=True):
        a_left = bool(left_a - pb.words) or zh_left_a
        b_right = bool(right_b - pa.words) or zh_right_b
        a_right = bool(right_a - pb.words) or zh_right_a
        b_left = bool(left_b - pa.words) or zh_left_b
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
    "soft_worst_a", "soft_worst_b", "aligned_frac_min", "aligned_frac_max", "unaligned_sim_max",
    "values_unaligned_a", "values_unaligned_b", "value_swap", "values_shared", "names_unaligned",
    "past_a", "past_b", "char3_jaccard", "char_contain_min", "neg_diff_x_aligned",
    "neg_flip", "neg_flip_x_aligned", "value_swap_exact", "values_only_a", "values_only_b",
    "polarity_a", "polarity_b", "polarity_flip", "polarity_flip_x_aligned",
    "functional_shared", "functional_swap",
)

DEEP_FEATURE_NAMES: tuple[str, ...] = ("deep_cos", "deep_x_jaccard", "deep_minus_sem", "deep_x_contain_min")
"""Read from a second, contextual embedder (multilingual-e5): it tells paraphrases from related but
different facts far better than static word vectors ("allergic to cats" / "has a cat allergy")."""

ALIGNED_FEATURE_NAMES: tuple[str, ...] = ("bge_cos", "bge_align_f", "bge_worst_older", "bge_worst_newer",
                                          "bge_unaligned_older", "bge_unaligned_newer")
CROSS_FEATURE_NAMES: tuple[str, ...] = ("ce_contradictory", "ce_independent", "ce_redundant")
"""The probabilities of the cross-encoder of the pair's language (``cross_encoder``: Chinese since
judge-v9, English since judge-v13); -1 for a language the model has none for."""
"""Read from bge-small's per-token states (English or Chinese model, one per pair): a greedy
word-piece alignment in context, BERTScore-style. A paraphrase aligns every piece on both sides;
a changed value leaves one piece poorly matched; extra detail leaves pieces of one side unmatched."""

_UNALIGNED_BELOW = 0.7


def aligned_row(older: TokenStates, newer: TokenStates) -> list[float]:
    """``ALIGNED_FEATURE_NAMES`` of one pair."""
    similarity = older.tokens @ newer.tokens.T
    best_older, best_newer = similarity.max(axis=1), similarity.max(axis=0)
    precision, recall = float(best_newer.mean()), float(best_older.mean())
    return [float(older.sentence @ newer.sentence), 2 * precision * recall / (precision + recall),
            float(best_older.min()), float(best_newer.min()),
            float((best_older < _UNALIGNED_BELOW).mean()), float((best_newer < _UNALIGNED_BELOW).mean())]


_ALIGNED = 0.6


def _mean(values: np.ndarray) -> float:
    """``float(values.mean())`` of a non-empty vector, as numpy computes it (same sum, same
    division by an intp count, same rounding) without its dispatch: it runs for every pair."""
    total = np.add.reduce(values)
    return float(total.dtype.type(total / np.intp(len(values))))


def _column_mean(rows: np.ndarray) -> np.ndarray:
    """``rows.mean(axis=0)``, as numpy computes it."""
    total = np.add.reduce(rows, axis=0)
    return np.true_divide(total, np.intp(len(rows)), out=total, casting="unsafe")


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Featurizing allocates millions of short-lived, acyclic objects (reference counting frees
    them); the cyclic collector would rescan every live object of the process hundreds of times
    meanwhile (~10% of the time at 20k pairs). Restores the previous state; collects nothing less."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class _Text:
    """A text's parse and vectors, and what every pair with it reads: computed once per text."""

    parsed: Parsed
    vector: np.ndarray
    lexical: np.ndarray
    words: np.ndarray
    token_set: frozenset[str]
    negated: np.ndarray
    valued: tuple[tuple[int, str], ...]
    named: tuple[int, ...]
    chars: tuple[set[str], set[str], set[str]]
    antonymous: bool
    any_negated: bool

    @classmethod
    def of(cls, parsed: Parsed, vector: np.ndarray, lexical: np.ndarray, words: np.ndarray) -> _Text:
        return cls(parsed, vector, lexical, words, frozenset(parsed.tokens), np.array(parsed.negated, dtype=bool),
                   tuple((i, k) for i, k in enumerate(parsed.kinds) if k),
                   tuple(i for i, k in enumerate(parsed.kinds) if k in ("name", "place")),
                   (_char_ngrams(parsed.chars, 1), _char_ngrams(parsed.chars, 2), _char_ngrams(parsed.chars, 3)),
                   any(left or zh_left or right or zh_right for left, zh_left, right, zh_right in parsed.antonyms),
                   any(parsed.negated))


class PairFeaturizer:
    """Feature rows for many pairs; each distinct text is parsed and embedded once (``embed``
    gives unit vectors for texts and single words: the semantic embedder). With ``deep`` (unit
    vectors of whole texts from a contextual embedder), rows also hold ``DEEP_FEATURE_NAMES``;
    with ``aligned`` (bge-small encoders by language), then ``ALIGNED_FEATURE_NAMES``; with
    ``cross`` (cross-encoders by pair language), then ``CROSS_FEATURE_NAMES``."""

    def __init__(self, embed: Embed, deep: Embed | None = None,
                 known_deep: Mapping[str, np.ndarray] | None = None, aligned: Encoders | None = None,
                 cross: CrossScorers | None = None) -> None:
        self._embed = embed
        self._deep = deep
        self._aligned = aligned
        self._cross = cross
        self._cross_read: set[tuple[str, str]] = set()
        self._states: dict[tuple[Language, str], TokenStates] = {}
        self._texts: dict[str, _Text] = {}
        self._words: dict[str, np.ndarray] = {}
        self._deep_vectors: dict[str, np.ndarray] = dict(known_deep or {})
        self._known_deep = frozenset(self._deep_vectors)

    @property
    def embedded_deep(self) -> dict[str, np.ndarray]:
        """The ``deep`` vectors this featurizer made (not given as ``known_deep``): worth keeping."""
        return {text: vector for text, vector in self._deep_vectors.items() if text not in self._known_deep}

    @property
    def width(self) -> int:
        return len(FEATURE_NAMES) + (len(DEEP_FEATURE_NAMES) if self._deep else 0) \
            + (len(ALIGNED_FEATURE_NAMES) if self._aligned else 0) + (len(CROSS_FEATURE_NAMES) if self._cross else 0)

    def _prepare(self, texts: Sequence[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._texts]
        if not new:
            return
        parsed = [parse(t) for t in new]
        words = [w for w in dict.fromkeys(w for p in parsed for w in p.tokens) if w not in self._words]
        vectors = self._embed([*new, *words]) if new or words else np.zeros((0, 256))
        self._words.update(zip(words, vectors[len(new):], strict=True))
        lexical = hashing_embed(new, 384)
        dim = vectors.shape[1]
        for i, (text, p) in enumerate(zip(new, parsed, strict=True)):
            word_vectors = (np.stack([self._words[w] for w in p.tokens]) if p.tokens
                            else np.zeros((0, dim), dtype=vectors.dtype))
            self._texts[text] = _Text.of(p, vectors[i], lexical[i], word_vectors)

    @property
    def deep_skipped(self) -> int:
        """Texts this featurizer read without a ``deep`` vector (none made, none known): e5
        passes a gate spared."""
        return sum(1 for text in self._texts if text not in self._deep_vectors) if self._deep else 0

    def matrix(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return self.with_deep(pairs, self.cheap(pairs))

    def cheap(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The ``FEATURE_NAMES`` columns only: no contextual embedding."""
        if not pairs:
            return np.zeros((0, len(FEATURE_NAMES)))
        with _without_cyclic_gc():
            self._prepare([t for pair in pairs for t in pair])
            return np.array([self._row(a, b) for a, b in pairs], dtype=np.float64)

    def deep_rows(self, pairs: Sequence[tuple[str, str]], cheap: np.ndarray) -> np.ndarray:
        """``FEATURE_NAMES`` + ``DEEP_FEATURE_NAMES`` rows from the ``cheap`` rows of the same
        ``pairs``: e5 only (vectors made here are kept, so ``with_deep`` does not embed again)."""
        if self._deep is None:
            raise ValueError("a featurizer without a deep embedder makes no deep rows")
        if not pairs:
            return np.zeros((0, len(FEATURE_NAMES) + len(DEEP_FEATURE_NAMES)))
        return np.hstack([cheap, self._deep_columns(pairs, cheap)])

    def with_deep(self, pairs: Sequence[tuple[str, str]], cheap: np.ndarray) -> np.ndarray:
        """Full rows from the ``cheap`` rows of the same ``pairs`` (embeds their texts with ``deep``
        and ``aligned``)."""
        if not pairs:
            return np.zeros((0, self.width))
        parts = [cheap]
        if self._deep is not None:
            parts.append(self._deep_columns(pairs, cheap))
        languages = [pair_language(a, b) for a, b in pairs]
        if self._aligned is not None:
            parts.append(self._aligned_columns(pairs, languages))
        if self._cross is not None:
            parts.append(self._cross_columns(pairs, languages))
        return np.hstack(parts) if len(parts) > 1 else cheap

    def _cross_columns(self, pairs: Sequence[tuple[str, str]], languages: Sequence[Language]) -> np.ndarray:
        assert self._cross is not None
        columns = np.full((len(pairs), len(CROSS_FEATURE_NAMES)), -1.0)
        for language, scorer in self._cross.items():
            rows = [i for i, lang in enumerate(languages) if lang == language]
            if rows:
                read = [pairs[i] for i in rows]
                columns[rows] = scorer(read)
                self._cross_read.update(read)
        return columns

    @property
    def cross_encoded(self) -> int:
        """Distinct (older, newer) orders this featurizer had ``cross`` read: its cost."""
        return len(self._cross_read)

    def _aligned_columns(self, pairs: Sequence[tuple[str, str]], languages: Sequence[Language]) -> np.ndarray:
        assert self._aligned is not None
        for language in dict.fromkeys(languages):
            new = list(dict.fromkeys(t for (a, b), lang in zip(pairs, languages, strict=True) if lang == language
                                     for t in (a, b) if (language, t) not in self._states))
            if new:
                self._states.update(((language, t), s) for t, s in
                                    zip(new, self._aligned(language).encode(new), strict=True))
        return np.array([aligned_row(self._states[(lang, a)], self._states[(lang, b)])
                         for (a, b), lang in zip(pairs, languages, strict=True)], dtype=np.float64)

    def _deep_columns(self, pairs: Sequence[tuple[str, str]], base: np.ndarray) -> np.ndarray:
        assert self._deep is not None
        new = [t for t in dict.fromkeys(t for pair in pairs for t in pair) if t not in self._deep_vectors]
        if new:
            self._deep_vectors.update(zip(new, self._deep(new), strict=True))
        older = np.stack([self._deep_vectors[a] for a, _ in pairs])
        newer = np.stack([self._deep_vectors[b] for _, b in pairs])
        cos = (older * newer).sum(axis=1, dtype=np.float64)
        column = {name: base[:, i] for i, name in enumerate(FEATURE_NAMES)}
        return np.column_stack([cos, cos * column["jaccard"], cos - column["sem_cos"],
                                cos * column["contain_min"]])

    def _row(self, a: str, b: str) -> list[float]:
        ta_, tb_ = self._texts[a], self._texts[b]
        pa, pb = ta_.parsed, tb_.parsed
        ta, tb = ta_.token_set, tb_.token_set
        shared = ta & tb
        sem_cos = float(ta_.vector @ tb_.vector)
        lex_cos = float(ta_.lexical @ tb_.lexical)
        if len(pa.tokens) and len(pb.tokens):
            sims = ta_.words @ tb_.words.T
            best_a, best_b = sims.max(axis=1), sims.max(axis=0)
        else:
            sims = np.zeros((len(pa.tokens), len(pb.tokens)))
            best_a, best_b = np.zeros(len(pa.tokens)), np.zeros(len(pb.tokens))
        loose_a, loose_b = best_a < _ALIGNED, best_b < _ALIGNED
        n_loose_a, n_loose_b = int(np.count_nonzero(loose_a)), int(np.count_nonzero(loose_b))
        soft_a = _mean(best_a) if len(best_a) else 0.0
        soft_b = _mean(best_b) if len(best_b) else 0.0
        frac_a = 1 - n_loose_a / len(best_a) if len(best_a) else 0.0
        frac_b = 1 - n_loose_b / len(best_b) if len(best_b) else 0.0
        if n_loose_a and n_loose_b:
            diff_a = _column_mean(ta_.words[loose_a])
            diff_b = _column_mean(tb_.words[loose_b])
            diff_cos = float(diff_a @ diff_b / (np.sqrt(diff_a.dot(diff_a)) * np.sqrt(diff_b.dot(diff_b)) + 1e-9))
            unaligned_sim = float(sims[loose_a][:, loose_b].max())
        else:
            diff_cos = unaligned_sim = 0.0
        flips = 0
        if len(pa.tokens) and len(pb.tokens) and (ta_.any_negated or tb_.any_negated):
            partner_a, partner_b = sims.argmax(axis=1), sims.argmax(axis=0)
            flips = int(np.count_nonzero((best_a >= _ALIGNED) & (ta_.negated != tb_.negated[partner_a]))) \
                + int(np.count_nonzero((best_b >= _ALIGNED) & (tb_.negated != ta_.negated[partner_b])))
        listed_a, listed_b = loose_a.tolist(), loose_b.tolist()
        exact_a = {k for i, k in ta_.valued if pa.tokens[i] not in tb}
        exact_b = {k for j, k in tb_.valued if pb.tokens[j] not in ta}
        kinds_a = {k for i, k in ta_.valued if listed_a[i]}
        kinds_b = {k for j, k in tb_.valued if listed_b[j]}
        shared_values = sum(1 for i, _ in ta_.valued if pa.tokens[i] in tb)
        names_loose = sum(1 for i in ta_.named if listed_a[i]) + sum(1 for j in tb_.named if listed_b[j])
        contain_a = len(shared) / len(ta) if ta else 0.0
        contain_b = len(shared) / len(tb) if tb else 0.0
        ops = [op for op in SequenceMatcher(None, pa.tokens, pb.tokens, autojunk=False).get_opcodes()
               if op[0] != "equal"]
        span_a = sum(i2 - i1 for _, i1, i2, _, _ in ops)
        span_b = sum(j2 - j1 for _, _, _, j1, j2 in ops)
        kinds = {op[0] for op in ops}
        (ca, ca2, ca3), (cb, cb2, cb3) = ta_.chars, tb_.chars
        char_a = len(ca & cb) / len(ca) if ca else 0.0
        char_b = len(ca & cb) / len(cb) if cb else 0.0
        num_both = bool(pa.numbers and pb.numbers)
        num_conflict = num_both and pa.numbers != pb.numbers
        time_both = bool(pa.times and pb.times)
        jaccard = _jaccard(ta, tb)
        neg_diff = float((pa.negations > 0) != (pb.negations > 0))
        la, lb = max(1, len(pa.tokens)), max(1, len(pb.tokens))
        people = len(pa.people ^ pb.people)
        return [
            sem_cos, lex_cos, jaccard, min(contain_a, contain_b), max(contain_a, contain_b),
            _jaccard(ca, cb), _jaccard(ca2, cb2), max(char_a, char_b), len(ta) - len(shared), len(tb) - len(shared),
            len(ops),
            span_a, span_b, float(bool(ops) and (kinds <= {"insert"} or kinds <= {"delete"})),
            float(ta == tb), float(num_both), float(num_both and pa.numbers != pb.numbers),
            float(num_both and pa.numbers == pb.numbers), float(bool(pa.numbers) != bool(pb.numbers)),
            float(time_both), float(time_both and not (pa.times & pb.times)),
            float(pa.negations), float(pb.negations), neg_diff, float(pb.change_cues), float(pa.change_cues),
            _antonym_hit(pa, pb) if ta_.antonymous and tb_.antonymous else 0.0, min(la, lb) / max(la, lb),
            float(min(la, lb)),
            float(pa.zh and pb.zh), float(pa.zh != pb.zh),
            float(bool(pa.subject) and pa.subject == pb.subject),
            float(bool(pa.subject) and bool(pb.subject) and pa.subject != pb.subject),
            float(people), soft_a, soft_b, min(soft_a, soft_b), float(n_loose_a), float(n_loose_b),
            diff_cos, sem_cos * jaccard, neg_diff * max(contain_a, contain_b),
            float(best_a.min()) if len(best_a) else 0.0, float(best_b.min()) if len(best_b) else 0.0,
            min(frac_a, frac_b), max(frac_a, frac_b), unaligned_sim,
            float(len(kinds_a)), float(len(kinds_b)), float(bool(kinds_a & kinds_b)), float(shared_values),
            float(names_loose), float(pa.past), float(pb.past), _jaccard(ca3, cb3), min(char_a, char_b),
            neg_diff * min(frac_a, frac_b),
            float(flips), float(flips > 0) * min(frac_a, frac_b), float(bool(exact_a & exact_b)),
            float(len(exact_a)), float(len(exact_b)),
            float(pa.polarity), float(pb.polarity), float(pa.polarity * pb.polarity < 0),
            float(pa.polarity * pb.polarity < 0) * max(frac_a, frac_b),
            float(bool(pa.functional & pb.functional)),
            float(bool(pa.functional & pb.functional) and (bool(exact_a & exact_b) or num_conflict)),
        ]


def pair_features(a: str, b: str, embed: Embed, deep: Embed | None = None,
                  aligned: Encoders | None = None, cross: CrossScorers | None = None) -> np.ndarray:
    """The feature vector (FEATURE_NAMES, then DEEP_FEATURE_NAMES with ``deep``, ALIGNED_FEATURE_NAMES
    with ``aligned``, CROSS_FEATURE_NAMES with ``cross``) of an older text ``a`` and a newer text ``b``."""
    return PairFeaturizer(embed, deep, aligned=aligned, cross=cross).matrix([(a, b)])[0]


_DATE_KINDS = frozenset({"weekday", "month", "time"})
_ZH_DAY_UNITS = frozenset("月号日")


def _dates(parsed: Parsed) -> list[bool]:
    """Which tokens tell a date: a weekday, month or time word, or a number next to a month name or
    a day unit (3 月 12 号)."""
    tokens, kinds = parsed.tokens, parsed.kinds
    month = [k == "month" or t in _MONTHS or t in _ZH_DAY_UNITS for t, k in zip(tokens, kinds, strict=True)]
    return [k in _DATE_KINDS or t in _MONTHS
            or k == "number" and any(month[j] for j in (i - 1, i + 1) if 0 <= j < len(tokens))
            for i, (t, k) in enumerate(zip(tokens, kinds, strict=True))]


def dated_events(a: str, b: str) -> bool:
    """Whether the older ``a`` and newer ``b`` tell one kind of event on two different dates and
    nothing else: two events, not an update ("went to a pottery class on 12 March" / "... on 30
    March"). Not when the newer text says something changed ("moved to", "no longer"), when only
    one side is negated, or when both name a one-valued attribute (a birthday has one date)."""
    pa, pb = parse(a), parse(b)
    if pb.change_cues or (pa.negations > 0) != (pb.negations > 0) or pa.functional & pb.functional:
        return False
    dates_a, dates_b = _dates(pa), _dates(pb)
    ops = [op for op in SequenceMatcher(None, pa.tokens, pb.tokens, autojunk=False).get_opcodes() if op[0] != "equal"]
    told_a = {t for t, d in zip(pa.tokens, dates_a, strict=True) if d}
    told_b = {t for t, d in zip(pb.tokens, dates_b, strict=True) if d}
    return (bool(ops) and bool(told_a) and bool(told_b) and told_a != told_b
            and all(dates_a[i] for _, i1, i2, _, _ in ops for i in range(i1, i2))
            and all(dates_b[j] for _, _, _, j1, j2 in ops for j in range(j1, j2)))
