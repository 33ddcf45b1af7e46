"""Summarizers that name a topic: an offline pass-through and an LLM one.

Both receive the members' texts (most typical first), an offline draft (phrases covering most
members, see ``mem_assets.reorg.offline_summaries``) and, for a level-2 topic, its sub-topics' keys.
The offline summarizer returns the draft. The LLM summarizer makes one call, and one more if the
answer cannot be read; it returns ``None`` when it still cannot, or without a call when the run's
budget (``run_budget``: the per-run LLM limits, counted apart from the judge's and placement's) is
spent (``usage.deferred`` then 1); the caller writes the draft instead, counted in the run's
metadata, and marks the topic as owed an LLM summary (``topic_writer``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence

from dagster import ConfigurableResource
from pydantic import BaseModel, Field, field_validator

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


class SummarizerResource(ConfigurableResource, ABC):
    """Turns a topic's member texts into a ``TopicSummary``, or ``None`` to use the draft."""

    def run_budget(self) -> CallBudget | None:
        """A fresh budget for one run, or None: no model, nothing to count."""
        return None

    @abstractmethod
    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = (),
                  budget: CallBudget | None = None) -> tuple[TopicSummary | None, ChatUsage]: ...


class ExtractiveSummarizer(SummarizerResource):
    """Offline default: the draft as is. No network, no cost, deterministic."""

    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = (),
                  budget: CallBudget | None = None) -> tuple[TopicSummary | None, ChatUsage]:
        return draft, ChatUsage()


_LANGUAGES = {"zh": "Chinese", "en": "English"}


class LLMSummarizer(SummarizerResource):
    """An OpenAI-compatible chat model writes the summary from the member texts.

    The texts go in as one JSON-encoded user message and the system prompt says they are data,
    not instructions. At most two calls per topic: an unreadable answer is asked for once more.
    """

    chat: OpenAIChatResource
    max_members: int = Field(default=40, ge=2, description="Member texts shown to the model.")
    max_chars_per_member: int = Field(default=400, ge=20)
    max_calls_per_run: int = Field(default=1000, ge=0, description="Summary calls one run may make; 0: no limit.")
    max_tokens_per_run: int = Field(default=2_000_000, ge=0,
                                    description="Prompt + completion tokens summaries may spend in one run; 0: no limit.")

    def run_budget(self) -> CallBudget | None:
        return CallBudget(self.max_calls_per_run, self.max_tokens_per_run)

    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = (),
                  budget: CallBudget | None = None) -> tuple[TopicSummary | None, ChatUsage]:
        shown = [text[:self.max_chars_per_member] for text in members[:self.max_members]]
        payload: dict[str, object] = {"memories": shown, "suggested_keywords": draft.tags}
        if child_keys:
            payload["sub_topics"] = list(child_keys)
        return self.chat.ask_json(SUMMARY_SYSTEM.format(language=_LANGUAGES.get(language, language)),
                                  json.dumps(payload, ensure_ascii=False), TopicSummary, budget=budget)
