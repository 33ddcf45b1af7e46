"""OpenAI-compatible chat client that returns pydantic-validated JSON, or None when it cannot.

Every failure of a call — transport, HTTP status, an HTTP 200 whose body is not a chat completion
(not JSON, truncated, wrong shape), an answer with no JSON in it, JSON that fails the schema — is
reported as ``(None, usage)`` with its kind counted, never raised: the caller decides what a
failure means (for the judge: nothing merged, the node stays unchecked).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dagster import ConfigurableResource
from pydantic import BaseModel, PrivateAttr, ValidationError

from mem_resources.llm_answers import UnparsableAnswer, extract_json

if TYPE_CHECKING:
    import openai
    from openai import OpenAI

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
FailureKind = Literal["transport", "timeout", "http_status", "bad_body", "unparsable", "schema"]
#: Failures of the answer itself: worth one more try. Transport and status errors were already
#: retried with backoff by the SDK.
ANSWER_FAILURES = frozenset({"bad_body", "unparsable", "schema"})
RETRY_PROMPT = ("Your previous answer could not be used ({error}). Answer again with only the JSON "
                "object the instructions describe, nothing else.")
_FORMATS = ("json_schema", "json_object", "none")


@dataclass
class ChatUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    unparsable: int = 0
    deferred: int = 0
    failure_kinds: Counter[str] = field(default_factory=Counter)

    def add(self, other: ChatUsage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.failures += other.failures
        self.retries += other.retries
        self.unparsable += other.unparsable
        self.deferred += other.deferred
        self.failure_kinds.update(other.failure_kinds)


class CallFailed(Exception):
    def __init__(self, kind: FailureKind, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


def _response_content(response: Any) -> str:
    """The first choice's text; anything else the SDK handed back is a broken body."""
    choices = getattr(response, "choices", None)
    if not isinstance(response, BaseModel) or not choices:
        raise CallFailed("bad_body", f"not a chat completion: {str(response)[:120]!r}")
    content = getattr(getattr(choices[0], "message", None), "content", None)
    if not isinstance(content, str):
        raise CallFailed("bad_body", "the completion has no text content")
    return content


def _format_rejected(exc: openai.APIStatusError) -> bool:
    """A 400/422 that names the response format: the server does not support it."""
    text = f"{exc.message} {exc.body}".lower()
    return exc.status_code in (400, 422) and ("response_format" in text or "json" in text)


class OpenAIChatResource(ConfigurableResource):
    """Chat completions with a per-request timeout and the SDK's backoff retries on
    408/429/5xx and lost connections (``max_retries``)."""

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str = "not-needed"
    timeout_s: float = 60.0
    max_retries: int = 2
    temperature: float = 0.0
    response_format: Literal["json_schema", "json_object", "none"] = "json_schema"

    _refused_formats: set[str] = PrivateAttr(default_factory=set)

    def client(self) -> OpenAI:
        """The SDK is imported here, not at module load: every run process would pay ~1 s for
        it, and offline runs never call it."""
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key,
                      timeout=self.timeout_s, max_retries=self.max_retries)

    def _format(self, schema: type[BaseModel]) -> dict[str, Any] | None:
        """The strongest format the server has not refused, starting from the configured one."""
        for name in _FORMATS[_FORMATS.index(self.response_format):]:
            if name in self._refused_formats:
                continue
            if name == "json_schema":
                return {"type": "json_schema", "json_schema": {
                    "name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}}
            return {"type": "json_object"} if name == "json_object" else None
        return None

    def _create(self, client: OpenAI, messages: list[dict[str, str]], schema: type[BaseModel],
                usage: ChatUsage) -> str:
        """One completion's text; a refused response format is dropped for the rest of the run
        and the request sent again without it."""
        import openai

        while True:
            response_format = self._format(schema)
            extra = {"response_format": response_format} if response_format else {}
            usage.calls += 1
            try:
                response = client.chat.completions.create(
                    model=self.model, temperature=self.temperature, messages=messages, **extra)
            except openai.APIStatusError as exc:
                if response_format and _format_rejected(exc):
                    self._refused_formats.add(str(response_format["type"]))
                    log.warning("The server refused response_format %s (HTTP %s); asking without it",
                                response_format["type"], exc.status_code)
                    continue
                raise CallFailed("http_status", f"HTTP {exc.status_code}: {exc.message}") from exc
            except openai.APITimeoutError as exc:
                raise CallFailed("timeout", f"no answer within {self.timeout_s} s") from exc
            except openai.APIError as exc:
                raise CallFailed("transport", f"{type(exc).__name__}: {exc}") from exc
            except Exception as exc:
                raise CallFailed("bad_body", f"{type(exc).__name__}: {exc}") from exc
            if getattr(response, "usage", None) is not None:
                usage.prompt_tokens += response.usage.prompt_tokens or 0
                usage.completion_tokens += response.usage.completion_tokens or 0
            return _response_content(response)

    def ask_json(self, system: str, user: str, schema: type[T], client: OpenAI | None = None,
                 context: dict[str, Any] | None = None,
                 deadline: float | None = None) -> tuple[T | None, ChatUsage]:
        """Ask once; an answer that cannot be read or fails ``schema`` (validated with
        ``context``) is asked for once more, unless ``deadline`` (time.monotonic) has passed."""
        usage = ChatUsage()
        client = client or self.client()
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        for attempt in (1, 2):
            content = ""
            try:
                content = self._create(client, messages, schema, usage)
                try:
                    return schema.model_validate(extract_json(content), context=context), usage
                except UnparsableAnswer as exc:
                    raise CallFailed("unparsable", str(exc)) from exc
                except ValidationError as exc:
                    raise CallFailed("schema", f"{exc.error_count()} error(s): "
                                     f"{exc.errors(include_url=False)[0]['msg']}") from exc
            except CallFailed as failure:
                if failure.kind in ("unparsable", "schema"):
                    usage.unparsable += 1
                late = deadline is not None and time.monotonic() >= deadline
                if failure.kind not in ANSWER_FAILURES or attempt == 2 or late:
                    usage.failures += 1
                    usage.failure_kinds[failure.kind] += 1
                    log.warning("LLM call failed (%s); answer was %.200r", failure, content)
                    return None, usage
                usage.retries += 1
                if content:
                    messages = [*messages[:2], {"role": "assistant", "content": content[:4000]},
                                {"role": "user", "content": RETRY_PROMPT.format(error=failure)}]
        raise AssertionError("unreachable")
