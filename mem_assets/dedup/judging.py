"""Judging candidate pairs through a content-hash cache, so no pair is ever judged twice."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from mem_assets.dedup.judges import JudgeResource
from mem_resources.llm import ChatUsage
from mem_resources.memory_model import normalize_text

JUDGMENT_COLUMNS = ["left_id", "right_id", "label", "reason", "cached", "failed", "pair_key"]


def pair_key(judge_fingerprint: str, text_a: str, text_b: str) -> str:
    """Order-free hash of the two normalised texts and the judge that labels them."""
    first, second = sorted((normalize_text(text_a), normalize_text(text_b)))
    payload = "\x1f".join((judge_fingerprint, first, second))
    return "judgment:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class JudgingReport:
    judgments: pd.DataFrame
    to_cache: list[dict] = field(default_factory=list)
    usage: ChatUsage = field(default_factory=ChatUsage)
    cache_hits: int = 0


def judge_pairs(pairs: pd.DataFrame, judge: JudgeResource,
                lookup: Callable[[Sequence[str]], dict[str, dict]]) -> JudgingReport:
    """Label each pair (columns left_id, right_id, left_text, right_text).

    Identical text pairs share one judgment; ``lookup`` returns cached judgments by key. Failed
    judgments are returned (label independent, failed) but never offered for caching.
    """
    if pairs.empty:
        return JudgingReport(pd.DataFrame(columns=JUDGMENT_COLUMNS))
    keys = [pair_key(judge.fingerprint, a, b)
            for a, b in zip(pairs["left_text"], pairs["right_text"], strict=True)]
    texts = dict(zip(keys, zip(pairs["left_text"], pairs["right_text"], strict=True), strict=True))
    cached = lookup(list(texts))
    missing = [key for key in texts if key not in cached]
    judged, usage = judge.judge_pairs([texts[key] for key in missing])
    fresh = dict(zip(missing, judged, strict=True))
    rows = []
    for key, left, right in zip(keys, pairs["left_id"], pairs["right_id"], strict=True):
        if key in cached:
            rows.append((left, right, cached[key]["label"], cached[key]["reason"], True, False, key))
        else:
            verdict = fresh[key]
            rows.append((left, right, verdict.label, verdict.reason, False, verdict.failed, key))
    to_cache = [{"key": key, "label": verdict.label, "reason": verdict.reason,
                 "judge": judge.fingerprint} for key, verdict in fresh.items() if not verdict.failed]
    return JudgingReport(pd.DataFrame(rows, columns=JUDGMENT_COLUMNS), to_cache, usage,
                         cache_hits=sum(key in cached for key in texts))
