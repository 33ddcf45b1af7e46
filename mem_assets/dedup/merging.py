"""Merging a redundant group into one node (seed 000 §4.2, §5.2): which of its texts says the
most, and the merged node's id and metadata.

The offline fusion keeps the most informative text (``informativeness``): a text's content words —
English words lowercased and crudely stemmed, Chinese words from jieba (numerals as digits); stop
words, subject pronouns and negation markers dropped, synonyms folded ("enjoys" -> "like",
"住在" -> "住") — are counted, then its length breaks ties. The merged node's id depends only on
the tenant and its sources, so a rerun finds the same node; its metadata unions the sources' and
keeps each source's version in its history.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from mem_resources.graph_schema_adapter import SEED_DIALECT, GraphDialect
from mem_resources.memory_model import (
    ArchivedVersion,
    MemoryItem,
    MemoryStatus,
    SourceMessage,
    UpdateType,
    memory_id,
    normalize_text,
    payload_hash,
)
from mem_resources.text import CJK, chinese_words, content_words, tokens, unsupported_words


@dataclass(frozen=True)
class MergePlan:
    """One node to create from ``sources`` (archived by it), with its text and why."""

    merged_id: str
    sources: tuple[str, ...]
    text: str
    update_type: UpdateType
    reason: str


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


_SYNONYMS = {_stem(k): _stem(v) for k, v in {
    "enjoys": "like", "loves": "like", "adores": "like", "prefers": "like", "fan": "like",
    "favourite": "favorite", "resides": "lives", "employed": "works", "fluent": "fluently",
    "喜爱": "喜欢", "爱": "喜欢", "热爱": "喜欢", "住在": "住", "居住": "住", "定居": "住",
    "上班": "工作", "任职": "工作",
}.items()}


@lru_cache(maxsize=65536)
def _normalize(text: str) -> str:
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


def _split_numerals(word: str) -> list[str]:
    """"七年" → ["7", "年"], as "7年" tokenizes, so one value in two scripts is one word.
    Dates ("三月五日") stay whole, so a changed date remains one substitution."""
    match = _ZH_NUMERAL.match(word)
    if match is None:
        return [word]
    return [str(_zh_number(match.group(1))), *([match.group(2)] if match.group(2) else [])]


@lru_cache(maxsize=65536)
def _content_words(text: str) -> tuple[str, ...]:
    words: list[str] = []
    for token in _normalize(text).split():
        if CJK.match(token):
            for word in chinese_words(token):
                if word in _ZH_NEGATIONS:
                    continue
                if len(word) > 1 and word[0] in "不戒" and word not in _ZH_NOT_NEGATIONS:
                    word = word[1:]
                if word not in _ZH_STOP and word not in _SUBJECTS:
                    words.extend(_SYNONYMS.get(part, part) for part in _split_numerals(word))
        elif token not in _EN_NEGATIONS and not token.endswith("n't") \
                and token not in _EN_STOP and token not in _SUBJECTS:
            stem = _stem(token)
            words.append(_SYNONYMS.get(stem, stem))
    return tuple(words)


def informativeness(text: str) -> tuple[int, int]:
    """Sort key for 'the more informative text': more distinct content words, then longer."""
    return len(set(_content_words(text))), len(_normalize(text))


def merged_id(tenant: str, sources: Sequence[str], dialect: GraphDialect = SEED_DIALECT) -> str:
    """Deterministic from the tenant and the set of sources: a rerun finds the same node (a UUID
    on a MemOS graph)."""
    digest = hashlib.md5("\x1f".join(("merge", tenant, *sorted(sources))).encode()).hexdigest()
    return memory_id(digest, dialect)


def _union_sources(items: Sequence[MemoryItem]) -> list[SourceMessage]:
    seen: dict[str, SourceMessage] = {}
    for item in items:
        for source in item.metadata.sources:
            dumped = source.model_dump(mode="json", exclude_none=True)
            seen.setdefault(json.dumps(dumped, sort_keys=True, ensure_ascii=False), source)
    return list(seen.values())


def archived_versions(items: Sequence[MemoryItem], update_type: UpdateType) -> list[ArchivedVersion]:
    """The sources' own histories, then one entry per source for the version being archived."""
    entries: dict[tuple[str | None, int, str], ArchivedVersion] = {}
    for item in items:
        for entry in item.metadata.history:
            entries.setdefault((entry.archived_memory_id, entry.version, entry.memory), entry)
    for item in items:
        entry = ArchivedVersion(version=item.metadata.version, update_type=update_type,
                                archived_memory_id=item.id, memory=item.memory,
                                created_at=item.metadata.updated_at)
        entries.setdefault((entry.archived_memory_id, entry.version, entry.memory), entry)
    return sorted(entries.values(), key=lambda e: (e.created_at, e.version, e.archived_memory_id or ""))


def merged_item(tenant: str, plan: MergePlan, sources: Sequence[MemoryItem],
                embedding: list[float]) -> MemoryItem:
    """Seed §4.2 merged metadata: sources unioned, embedding recomputed, latest updated_at,
    version max + 1, history with an archived version per source; other fields from the source
    whose text is kept (else the newest), filled from the others where empty."""
    by_recency = sorted(sources, key=lambda s: (s.metadata.updated_at, s.id), reverse=True)
    kept = next((s for s in by_recency if normalize_text(s.memory) == normalize_text(plan.text)),
                by_recency[0])
    ordered = [kept, *(s for s in by_recency if s is not kept)]
    metas = [s.metadata for s in ordered]
    confidences = [m.confidence for m in metas if m.confidence is not None]
    meta = kept.metadata.model_copy(update={
        "status": MemoryStatus.ACTIVATED,
        "key": next((m.key for m in metas if m.key), None),
        "background": next((m.background for m in metas if m.background), None),
        "tags": list(dict.fromkeys(tag for m in metas for tag in m.tags)),
        "sources": _union_sources(ordered),
        "embedding": embedding,
        "confidence": max(confidences) if confidences else None,
        "created_at": min(m.created_at for m in metas),
        "updated_at": max(m.updated_at for m in metas),
        "version": max(m.version for m in metas) + 1,
        "history": archived_versions(ordered, plan.update_type),
        "evolve_to": [],
        "working_binding": None,
        "payload_hash": payload_hash(tenant, kept.metadata.memory_type.value, plan.text),
        "arrival": max((m.arrival for m in metas if m.arrival), default=None),
    })
    return MemoryItem.model_validate({"id": plan.merged_id, "memory": plan.text,
                                      "metadata": meta.model_dump()})


def keeps_source_text(plan: MergePlan, sources: Sequence[MemoryItem]) -> bool:
    """A merged node whose text is one of its sources' needs no new comparison."""
    return any(normalize_text(s.memory) == normalize_text(plan.text) for s in sources)


#: A source word missing from the kept text is still carried by a kept word sharing a prefix this
#: long and covering this share of the shorter word: the same word in another form ("allergic" /
#: "allergy", "Lisbon" / "Lisboa"), not another word ("microsoft" / "microwave").
_SAME_WORD_PREFIX, _SAME_WORD_SHARE = 5, 0.75


def _same_word(a: str, b: str) -> bool:
    common = len(os.path.commonprefix([a, b]))
    return common >= _SAME_WORD_PREFIX and common >= _SAME_WORD_SHARE * min(len(a), len(b))


def dropped_words(kept: str, sources: Sequence[str]) -> list[str]:
    """Content words of ``sources`` that ``kept`` does not carry (``text.unsupported_words``, then
    other forms of a kept word): what archiving the sources behind ``kept`` would forget."""
    kept_words = tokens(kept)
    return [word for source in sources for word in unsupported_words(source, [kept])
            if CJK.match(word) or not any(_same_word(word, other) for other in kept_words)]


def carries(kept: str, sources: Sequence[str]) -> bool:
    """``kept`` says everything each source says (``dropped_words``): a merge into it forgets nothing."""
    return not dropped_words(kept, sources)


def carried_share(a: str, b: str) -> float:
    """How nearly one of two memories says everything the other says: the larger share of either
    one's content words the other carries (``dropped_words``); 1.0 when one contains the other."""
    shares = [1 - len(dropped_words(kept, [source])) / len(words)
              for source, kept in ((a, b), (b, a)) if (words := content_words(source))]
    return max(shares, default=0.0)


def carrying_source(sources: Sequence[str]) -> str | None:
    """The most informative source that carries all the others, or None when none does (each
    says something the others do not)."""
    carriers = [text for text in sources if carries(text, sources)]
    return max(carriers, key=informativeness) if carriers else None
