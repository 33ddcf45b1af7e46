"""Summarizers that name a cluster of memories: an offline pass-through and an LLM one.

Both receive the members' texts and an extractive draft (computed offline, see
``mem_assets.reorg.summarizing``). The offline summarizer returns the draft; the LLM summarizer
asks an OpenAI-compatible model and returns ``None`` when the answer is unusable, so the caller
skips that cluster instead of writing a half-made parent.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence

from dagster import ConfigurableResource
from pydantic import BaseModel, Field, field_validator

from mem_assets.reorg.prompts import SUMMARY_SYSTEM
from mem_resources.llm import ChatUsage, OpenAIChatResource


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


class SummarizerResource(ConfigurableResource, ABC):
    """Turns a cluster's member texts into a ``TopicSummary``, or ``None`` to skip the cluster."""

    @abstractmethod
    def summarize(self, members: Sequence[str], draft: TopicSummary,
                  language: str) -> tuple[TopicSummary | None, ChatUsage]: ...


class ExtractiveSummarizer(SummarizerResource):
    """Offline default: the extractive draft as is. No network, no cost, deterministic."""

    def summarize(self, members: Sequence[str], draft: TopicSummary,
                  language: str) -> tuple[TopicSummary | None, ChatUsage]:
        return draft, ChatUsage()


_LANGUAGES = {"zh": "Chinese", "en": "English"}


class LLMSummarizer(SummarizerResource):
    """An OpenAI-compatible chat model writes the summary; the answer is validated with pydantic."""

    chat: OpenAIChatResource
    max_members: int = Field(default=40, ge=2, description="Member texts shown to the model.")
    max_chars_per_member: int = Field(default=400, ge=20)

    def summarize(self, members: Sequence[str], draft: TopicSummary,
                  language: str) -> tuple[TopicSummary | None, ChatUsage]:
        shown = [text[:self.max_chars_per_member] for text in members[:self.max_members]]
        user = json.dumps({"memories": shown, "suggested_keywords": draft.tags},
                          ensure_ascii=False)
        system = SUMMARY_SYSTEM.format(language=_LANGUAGES.get(language, language))
        return self.chat.complete_json(system, user, TopicSummary)
