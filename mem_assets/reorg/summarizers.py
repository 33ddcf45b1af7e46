"""Summarizers that name a topic: an offline pass-through and an LLM one.

Both receive the members' texts (most typical first), an offline draft (phrases covering most
members, see ``mem_assets.reorg.summarizing``) and, for a level-2 topic, its sub-topics' keys.
The offline summarizer returns the draft. The LLM summarizer makes one call, and one more if the
answer cannot be read; it returns ``None`` when it still cannot, and the caller writes the
draft instead (counted in the run's metadata).
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence

import openai
from dagster import ConfigurableResource
from pydantic import BaseModel, Field, ValidationError, field_validator

from mem_assets.reorg.prompts import SUMMARY_RETRY, SUMMARY_SYSTEM
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
    """Turns a topic's member texts into a ``TopicSummary``, or ``None`` to use the draft."""

    @abstractmethod
    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = ()) -> tuple[TopicSummary | None, ChatUsage]: ...


class ExtractiveSummarizer(SummarizerResource):
    """Offline default: the draft as is. No network, no cost, deterministic."""

    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = ()) -> tuple[TopicSummary | None, ChatUsage]:
        return draft, ChatUsage()


_LANGUAGES = {"zh": "Chinese", "en": "English"}
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_DECODER = json.JSONDecoder()
log = logging.getLogger(__name__)


def parse_summary(content: str | None) -> TopicSummary | None:
    """The first JSON object in a chat answer that is a valid summary: reasoning in ``<think>``,
    code fences and prose around the object are skipped."""
    text = _THINK.sub("", content or "")
    for start in (match.start() for match in re.finditer(r"\{", text)):
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            try:
                return TopicSummary.model_validate(value)
            except ValidationError:
                continue
    return None


class LLMSummarizer(SummarizerResource):
    """An OpenAI-compatible chat model writes the summary from the member texts.

    The texts go in as one JSON-encoded user message and the system prompt says they are data,
    not instructions. At most ``1 + max_retries`` calls per topic.
    """

    chat: OpenAIChatResource
    max_members: int = Field(default=40, ge=2, description="Member texts shown to the model.")
    max_chars_per_member: int = Field(default=400, ge=20)
    max_retries: int = Field(default=1, ge=0, le=3, description="Calls after an unreadable answer.")

    def summarize(self, members: Sequence[str], draft: TopicSummary, language: str,
                  child_keys: Sequence[str] = ()) -> tuple[TopicSummary | None, ChatUsage]:
        shown = [text[:self.max_chars_per_member] for text in members[:self.max_members]]
        payload: dict[str, object] = {"memories": shown, "suggested_keywords": draft.tags}
        if child_keys:
            payload["sub_topics"] = list(child_keys)
        messages = [{"role": "system", "content": SUMMARY_SYSTEM.format(language=_LANGUAGES.get(language, language))},
                    {"role": "user", "content": json.dumps(payload, ensure_ascii=False)}]
        usage = ChatUsage()
        client = self.chat.client()
        for attempt in range(1 + self.max_retries):
            usage.calls += 1
            try:
                response = client.chat.completions.create(model=self.chat.model, temperature=self.chat.temperature,
                                                          messages=messages)
            except openai.OpenAIError as exc:
                usage.failures += 1
                log.warning("Summary call failed (%s): %s", type(exc).__name__, exc)
                continue
            if response.usage is not None:
                usage.prompt_tokens += response.usage.prompt_tokens
                usage.completion_tokens += response.usage.completion_tokens
            content = response.choices[0].message.content if response.choices else None
            summary = parse_summary(content)
            if summary is not None:
                return summary, usage
            usage.failures += 1
            log.warning("Summary answer %d unreadable: %.200r", attempt + 1, content)
            messages = [*messages, {"role": "assistant", "content": content or ""},
                        {"role": "user", "content": SUMMARY_RETRY}]
        return None, usage
