"""Summarizers that name topics: an offline pass-through and an LLM one.

Both receive, per topic, the members' texts (most typical first), an offline draft (phrases
covering most members, see ``mem_assets.reorg.offline_summaries``) and, for a level-2 topic, its
sub-topics' keys. The offline summarizer returns the drafts. The LLM summarizer names several
topics of one language per call (``topics_per_call``), and asks once more when an answer cannot be
read; a topic it still has no usable answer for gets ``None``, and every topic of a call the run's
budget (``run_budget``: the per-run LLM limits, counted apart from the judge's and placement's)
cannot pay for is ``deferred``. The caller writes the draft instead, counted in the run's metadata,
and marks a deferred topic as owed an LLM summary (``topic_writer``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import ConfigurableResource
from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from mem_assets.reorg.summary_prompts import SUMMARY_SYSTEM
from mem_resources.llm import CallBudget, ChatUsage, OpenAIChatResource


class TopicSummary(BaseModel):
    """What a summary parent says about its members (seed 000 §6.3: key, value, tags, background)."""

    key: str = Field(min_length=1, max_length=200)
    value: str = Field(min_length=1, max_length=2000)
    tags: list[str] = Field(default_factory=list, max_length=12)
    background: str = Field(default="", max_length=2000)

    @field_validator("key", "value")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("must not be blank")
        return text.strip()


@dataclass(frozen=True)
class SummaryRequest:
    """One topic to name: its members' texts (most typical first), the offline draft, the members'
    language and, for a level-2 topic, its sub-topics' keys."""

    members: Sequence[str]
    draft: TopicSummary
    language: str
    child_keys: Sequence[str] = ()


@dataclass
class Named:
    """Per request, in order: the summary (None: write the draft) and whether the run's budget
    deferred it; and what the calls spent."""

    summaries: list[TopicSummary | None]
    deferred: list[bool]
    usage: ChatUsage = field(default_factory=ChatUsage)


class SummarizerResource(ConfigurableResource, ABC):
    """Turns topics' member texts into ``TopicSummary`` objects, or ``None`` to use the draft."""

    def run_budget(self) -> CallBudget | None:
        """A fresh budget for one run, or None: no model, nothing to count."""
        return None

    def batch_size(self) -> int:
        """How many topics the writer gathers before asking (one call's worth for a model)."""
        return 64

    @abstractmethod
    def summarize(self, requests: Sequence[SummaryRequest], budget: CallBudget | None = None) -> Named: ...


class ExtractiveSummarizer(SummarizerResource):
    """Offline default: the drafts as they are. No network, no cost, deterministic."""

    def summarize(self, requests: Sequence[SummaryRequest], budget: CallBudget | None = None) -> Named:
        return Named([request.draft for request in requests], [False] * len(requests))


_LANGUAGES = {"zh": "Chinese", "en": "English"}
#: Completion tokens one topic's answer may take (key, a sentence or two, tags, background; Chinese
#: costs more tokens a character than English).
TOKENS_PER_TOPIC = 160


class NamedTopic(TopicSummary):
    id: str


class TopicSummaries(BaseModel):
    """The model's answer: one named topic per requested id (context ``ids``); an entry for an id
    not asked about is dropped, and a bare object is read as the answer for a one-topic call."""

    topics: list[NamedTopic]

    @model_validator(mode="before")
    @classmethod
    def _shapes(cls, data: Any, info: ValidationInfo) -> Any:
        ids = (info.context or {}).get("ids", ())
        if isinstance(data, list):
            data = {"topics": data}
        elif isinstance(data, dict) and "topics" not in data and "key" in data and len(ids) == 1:
            data = {"topics": [{"id": ids[0], **data}]}
        if isinstance(data, dict) and isinstance(data.get("topics"), list):
            data = {**data, "topics": [t for t in data["topics"] if not isinstance(t, dict) or t.get("id") in ids]}
        return data


def answer_schema(ids: Sequence[str]) -> dict[str, Any]:
    """The JSON schema sent with a call: one entry per asked id (a grammar-constrained server
    cannot name another)."""
    entry = {"type": "object", "properties": {
        "id": {"type": "string", "enum": list(ids)}, "key": {"type": "string"}, "value": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5}, "background": {"type": "string"}},
        "required": ["id", "key", "value", "tags", "background"], "additionalProperties": False}
    return {"type": "object", "properties": {"topics": {
        "type": "array", "items": entry, "minItems": len(ids), "maxItems": len(ids)}},
        "required": ["topics"], "additionalProperties": False}


class LLMSummarizer(SummarizerResource):
    """An OpenAI-compatible chat model writes the summaries from the member texts.

    Several topics of one language go in one call, as one JSON-encoded user message; the system
    prompt says the texts are data, not instructions. A call whose answer cannot be read is asked
    once more; a topic the answer leaves out keeps its draft (counted by the caller)."""

    chat: OpenAIChatResource
    topics_per_call: int = Field(default=6, ge=1, description="Topics named in one call.")
    max_members: int = Field(default=40, ge=2, description="Member texts shown for a topic named alone.")
    max_members_per_call: int = Field(default=120, ge=2,
                                      description="Member texts shown in one call, shared by its topics.")
    max_chars_per_member: int = Field(default=400, ge=20)
    max_calls_per_run: int = Field(default=1000, ge=0, description="Summary calls one run may make; 0: no limit.")
    max_tokens_per_run: int = Field(default=2_000_000, ge=0,
                                    description="Prompt + completion tokens summaries may spend in one run; 0: no limit.")

    def run_budget(self) -> CallBudget | None:
        return CallBudget(self.max_calls_per_run, self.max_tokens_per_run)

    def batch_size(self) -> int:
        """``topics_per_call``, fewer when the chat's ``max_tokens`` cannot hold that many answers
        (``TOKENS_PER_TOPIC`` each): a cut-off answer would lose the whole call."""
        return max(1, min(self.topics_per_call, self.chat.max_tokens // TOKENS_PER_TOPIC))

    def summarize(self, requests: Sequence[SummaryRequest], budget: CallBudget | None = None) -> Named:
        named = Named([None] * len(requests), [False] * len(requests))
        by_language: dict[str, list[int]] = {}
        for position, request in enumerate(requests):
            by_language.setdefault(request.language, []).append(position)
        size = self.batch_size()
        for language, positions in by_language.items():
            for start in range(0, len(positions), size):
                self._ask(requests, positions[start:start + size], language, budget, named)
        return named

    def _ask(self, requests: Sequence[SummaryRequest], positions: Sequence[int], language: str,
             budget: CallBudget | None, named: Named) -> None:
        shown = min(self.max_members, max(1, self.max_members_per_call // len(positions)))
        ids = [f"t{n + 1}" for n in range(len(positions))]
        topics = []
        for tid, position in zip(ids, positions, strict=True):
            request = requests[position]
            topic: dict[str, object] = {"id": tid, "memories": [t[:self.max_chars_per_member]
                                                                 for t in request.members[:shown]],
                                        "suggested_keywords": request.draft.tags}
            if request.child_keys:
                topic["sub_topics"] = list(request.child_keys)
            topics.append(topic)
        answer, usage = self.chat.ask_json(
            SUMMARY_SYSTEM.format(language=_LANGUAGES.get(language, language)),
            json.dumps({"topics": topics}, ensure_ascii=False), TopicSummaries,
            context={"ids": ids}, sent_schema=answer_schema(ids), budget=budget)
        named.usage.add(usage)
        if answer is None:
            for position in positions:
                named.deferred[position] = bool(usage.deferred)
            return
        by_id = {topic.id: topic for topic in reversed(answer.topics)}  # the first answer for an id
        for tid, position in zip(ids, positions, strict=True):
            named.summaries[position] = by_id.get(tid)
