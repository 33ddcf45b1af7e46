"""OpenAI-compatible chat client that returns pydantic-validated JSON, or None when it cannot."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from dagster import ConfigurableResource
from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from openai import OpenAI

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


@dataclass
class ChatUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0

    def add(self, other: ChatUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failures += other.failures


class OpenAIChatResource(ConfigurableResource):
    """Chat completions with timeouts and the SDK's exponential-backoff retries on 408/429/5xx."""

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str = "not-needed"
    timeout_s: float = 60.0
    max_retries: int = 4
    temperature: float = 0.0

    def client(self) -> OpenAI:
        """The SDK is imported here, not at module load: every run process would pay ~1 s for
        it, and offline runs never call it."""
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key,
                      timeout=self.timeout_s, max_retries=self.max_retries)

    def complete_json(self, system: str, user: str, schema: type[T],
                      client: OpenAI | None = None) -> tuple[T | None, ChatUsage]:
        """One call; returns ``(None, usage)`` on transport errors or output that fails ``schema``."""
        import openai

        usage = ChatUsage(calls=1)
        try:
            response = (client or self.client()).chat.completions.create(
                model=self.model,
                temperature=self.temperature,
                response_format={"type": "json_object"},
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            )
        except openai.OpenAIError as exc:
            usage.failures = 1
            log.warning("LLM call failed (%s): %s", type(exc).__name__, exc)
            return None, usage
        if response.usage is not None:
            usage.prompt_tokens = response.usage.prompt_tokens
            usage.completion_tokens = response.usage.completion_tokens
        content = response.choices[0].message.content if response.choices else None
        try:
            return schema.model_validate(json.loads(_FENCE.sub("", content or ""))), usage
        except (json.JSONDecodeError, ValidationError) as exc:
            usage.failures = 1
            log.warning("LLM answer rejected, not valid %s: %s; answer was %.200r",
                        schema.__name__, exc.__class__.__name__, content)
            return None, usage
