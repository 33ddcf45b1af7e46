"""Judges: label a pair of memories redundant / contradictory / independent, and fuse them.

Two implementations behind one resource type, so assets never know which one runs:
``OfflineJudge`` (a learned model over pair features, no network; see
mem_assets/dedup/judge_model.py) and
``OpenAIJudge`` (any OpenAI-compatible chat endpoint). A judge that fails — transport error,
timeout after retries, or an answer that does not validate — yields ``failed=True`` with label
``independent``: a failure never merges anything.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dagster import ConfigurableResource
from pydantic import BaseModel, Field

from mem_assets.dedup import offline_judge
from mem_assets.dedup.labels import Label
from mem_assets.dedup.prompts import FUSE_SYSTEM, JUDGE_SYSTEM
from mem_resources.llm import ChatUsage, OpenAIChatResource

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class Judgment:
    label: Label
    reason: str
    failed: bool = False


@dataclass(frozen=True)
class Fusion:
    """How to resolve a group: ``text`` is the fused memory, or None for "keep the newer"."""

    text: str | None
    reason: str
    failed: bool = False


class JudgeResource(ConfigurableResource, ABC):
    """Decides how two memories of one tenant relate, and how to fuse a redundant group."""

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Identifies the judge in the judgment cache: another judge re-judges."""

    @abstractmethod
    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]: ...

    @abstractmethod
    def fuse(self, texts: Sequence[str], label: Label) -> tuple[Fusion, ChatUsage]:
        """Fuse redundant texts, or reconcile contradictory ones (``text=None``: irreconcilable)."""


class OfflineJudge(JudgeResource):
    """The shipped pair model (mem_assets/dedup/judge_model.py), precision first; fuses by keeping
    the more informative text."""

    @property
    def fingerprint(self) -> str:
        from mem_assets.dedup import judge_model

        return f"offline-model:{judge_model.load().fingerprint}"

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        from mem_assets.dedup import judge_model

        decided = judge_model.predict(list(pairs))
        judgments = [Judgment(label, f"judge model: P({label}) = {p:.2f}") for label, p in decided]
        return judgments, ChatUsage(calls=len(pairs))

    def fuse(self, texts: Sequence[str], label: Label) -> tuple[Fusion, ChatUsage]:
        if label == "contradictory":
            return Fusion(None, "offline judge never reconciles a contradiction"), ChatUsage()
        best = max(texts, key=offline_judge.informativeness)
        return Fusion(best, "kept the most informative text"), ChatUsage()


class Verdict(BaseModel):
    """The LLM's answer; the reason comes first so the model reasons before it decides."""

    reason: str = Field(min_length=1, max_length=1000)
    relation: Label


class Reconciliation(BaseModel):
    reason: str = Field(min_length=1, max_length=1000)
    reconcilable: bool
    merged: str | None = Field(default=None, max_length=8000)




class OpenAIJudge(JudgeResource):
    """An OpenAI-compatible chat model; timeouts and backoff retries come from ``chat``."""

    chat: OpenAIChatResource
    max_concurrency: int = 4

    @property
    def fingerprint(self) -> str:
        return f"openai:{self.chat.model}:v1"

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[Judgment], ChatUsage]:
        client = self.chat.client()
        usage = ChatUsage()

        def one(pair: tuple[str, str]) -> tuple[Judgment, ChatUsage]:
            user = f"Memory A: {pair[0]}\nMemory B: {pair[1]}"
            verdict, call_usage = self.chat.complete_json(JUDGE_SYSTEM, user, Verdict, client=client)
            if verdict is None:
                log.warning("Judge gave no valid verdict for pair %.60r / %.60r: counted as "
                            "independent, nothing merged", pair[0], pair[1])
                return Judgment("independent", "judge failed: no valid answer", failed=True), call_usage
            return Judgment(verdict.relation, verdict.reason), call_usage

        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            results = list(pool.map(one, pairs))
        for _, call_usage in results:
            usage.add(call_usage)
        return [judgment for judgment, _ in results], usage

    def fuse(self, texts: Sequence[str], label: Label) -> tuple[Fusion, ChatUsage]:
        user = "\n".join(f"Memory {i + 1}: {text}" for i, text in enumerate(texts))
        answer, usage = self.chat.complete_json(FUSE_SYSTEM.format(label=label), user, Reconciliation)
        if answer is None:
            log.warning("Resolver gave no valid answer for %d memories: left unresolved", len(texts))
            return Fusion(None, "resolver failed: no valid answer", failed=True), usage
        if answer.reconcilable and answer.merged and answer.merged.strip():
            return Fusion(answer.merged.strip(), answer.reason), usage
        if label == "redundant":
            best = max(texts, key=offline_judge.informativeness)
            return Fusion(best, f"kept the most informative text ({answer.reason})"), usage
        return Fusion(None, answer.reason), usage
